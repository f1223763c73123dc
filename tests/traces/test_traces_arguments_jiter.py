"""A tool call's arguments, as ``message_tool_calls`` parses them (jiter first, the stdlib's scanner for what jiter
refuses), are what ``parse_arguments`` (``json.loads``' scanner alone) gives: the same value, of the same types, and
the same verdict on texts that are no JSON -- for hostile texts and for random ones."""

from __future__ import annotations

import math
import random

import pytest

from evoharness.traces.models import message_tool_calls, parse_arguments

HOSTILE = [
    '{"a": 1}', ' \t{"a": [1, 2.5, null, true]}\r\n', '"\\ud800"', '"\\ud83d\\ude00"', '{"a": "\\uDFFF"}', "NaN",
    "[NaN, Infinity, -Infinity]", "nan", "1e400", "-1e400", "1e-400", "-0", "-0.0", "123456789012345678901234567890",
    "-9223372036854775809", "0.1000000000000000055511151231257827", '{"a": 1, "a": 2}', '{"a": 1,}', "[1,]", "01",
    "1.", ".5", "+1", "0x10", "'a'", "{'a': 1}", "[1] x", "1 2", "\ufeff[1]", "\xa0{}", "{}\xa0", "\x0c{}", '"a\x01b"',
    '"\\x41"', '"a\nb"', '"\u2028é"', "", "   ", "[" * 199 + "]" * 199, "[" * 201 + "]" * 201, "[" * 2000 + "]" * 2000,
    '{"": {"": [{}]}}', "\ud800", '{"a": "\ud800"}', "true", "null", '"abc',
    # numbers at the stdlib's limits: 4,300 digits an integer (one more is refused), long mantissas and exponents
    "1" * 4300, "1" * 4301, '{"a": ' + "1" * 4301 + "}", "1" * 4301 + ".5", "1." + "3" * 5000, "1e" + "9" * 5000,
    "0." + "0" * 400 + "1", "0e0", "-0e-0", "1E+2", "123456789012345678901234567890e0",
]


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _parsed(raw: str) -> tuple[object, bool]:
    out: list = []
    message_tool_calls(3, [{"id": "c1", "function": {"name": "f", "arguments": raw}}], out.append)
    (record,) = out
    assert (record.step, record.index, record.id, record.name, record.raw) == (3, 0, "c1", "f", raw)
    return record.args, record.parsed_ok


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_arguments_parse_as_the_stdlib_scanner_parses_them(raw):
    args, ok = _parsed(raw)
    want, want_ok = parse_arguments(raw)
    assert ok is want_ok
    assert _same(args, want)


def test_random_arguments_parse_as_the_stdlib_scanner_parses_them():
    rng = random.Random(17)
    pieces = list('{}[]",:0123456789.eE+- \t\n\\/') + ["true", "null", "NaN", "Infinity", "\\u00e9", "\\ud800", "é",
                                                      "\x01", '"a"', '"k":']
    parsed = 0
    for _ in range(20_000):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        args, ok = _parsed(raw)
        want, want_ok = parse_arguments(raw)
        assert ok is want_ok and _same(args, want), raw
        parsed += ok
    assert parsed > 500  # the draw reaches texts that parse, not only refusals
