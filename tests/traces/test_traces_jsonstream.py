"""A JSON list read one element at a time gives what json.loads gives, and its errors name where."""

from __future__ import annotations

import json
import random

import pytest

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.importers.jsonstream import _BATCH, ArrayRecords, _indented_records, _Reader

DOCS = [
    [],
    [1, 22, 333, -4.5e3, "x", None, True],
    [{"a": [1, 2, {"b": "ü, ] [ \" }"}]}, {"c": "é" * 50}, 12345678901234567890],
    [{"traj": [{"role": "user", "content": "line\nbreak"}], "reward": 1}] * 5,
]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_streamed_elements_equal_json_loads(tmp_path, doc, chunk):
    p = tmp_path / "a.json"
    p.write_text("\ufeff \n" + json.dumps(doc, indent=1, ensure_ascii=False) + "\n\n", encoding="utf-8")
    assert list(ArrayRecords(p, chunk=chunk)) == doc
    assert list(ArrayRecords(p, chunk=chunk)) == doc  # re-iterable


@pytest.mark.parametrize("text", ['[{"a": 1}, {"b": ', '[{"a": 1}\n {"b": 2}]', '[1, 2] 3', '[1,\n 2', '[1, 2,]'])
@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_errors_name_the_line_and_column_json_loads_names(tmp_path, text, chunk):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(json.JSONDecodeError) as whole:
        json.loads(text)
    with pytest.raises(InputError, match="invalid JSON") as e:
        list(ArrayRecords(p, chunk=chunk))
    assert str(p) in str(e.value)
    assert f"line {whole.value.lineno} col {whole.value.colno}" in str(e.value)


def test_non_utf8_is_one_clear_error(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(b'["caf\xe9"]')
    with pytest.raises(InputError, match="non-UTF-8"):
        list(ArrayRecords(p))


def test_deep_nesting_is_an_input_error(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('[{"traj": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    with pytest.raises(InputError, match="nested too deeply"):
        list(ArrayRecords(p))


# An indented list (``json.dump(records, f, indent=N)``, tau-bench's layout) is parsed with pydantic-core's jiter;
# what a fast parser may read differently from the stdlib (an integer beyond 64 bits, which orjson makes a float;
# NaN, 1e400, a lone surrogate, deep nesting) and every other layout must still give exactly what json.loads gives.
ODD = ('[\n  {"big": 123456789012345678901234567890, "neg": -9223372036854775809, "ok": 18446744073709551615},\n'
       '  {"nan": NaN, "inf": 1e400, "minus": -Infinity},\n  {"lone": "\\ud800 x", "pair": "\\ud83d\\ude00"},\n'
       '  {"deep": ' + "[" * 500 + "]" * 500 + '},\n  {"float": 1e19, "after": [1, 2.5, "x"]},\n  {"a": 1}\n]')
LAYOUTS = {
    "indent 2": lambda doc: json.dumps(doc, indent=2),
    "indent 4, CRLF": lambda doc: json.dumps(doc, indent=4).replace("\n", "\r\n"),
    "tabs": lambda doc: json.dumps(doc, indent="\t"),
    "compact": lambda doc: json.dumps(doc),
    "a record a line": lambda doc: "[\n" + ",\n".join(json.dumps(r) for r in doc) + "\n]",
    "first on the bracket's line": lambda doc: "[" + json.dumps(doc, indent=2)[1:].lstrip(),
}
RECORDS = [{"task_id": i, "reward": i / 3, "traj": [{"role": "user", "content": "é ] } \n" * i},
                                                    {"role": "assistant", "content": None, "tool_calls": []}],
            "info": {"n": 10 ** 25 if i == 3 else i, "empty": {}, "list": []}} for i in range(6)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
def test_every_layout_reads_as_json_loads(tmp_path, layout, chunk):
    text = LAYOUTS[layout](RECORDS)
    p = tmp_path / "a.json"
    p.write_text(text, encoding="utf-8")
    assert repr(list(ArrayRecords(p, chunk=chunk))) == repr(json.loads(text))  # repr: int stays int


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_values_a_fast_parser_may_read_differently_are_the_stdlib_s(tmp_path, chunk):
    p = tmp_path / "odd.json"
    p.write_text(ODD)
    got = list(ArrayRecords(p, chunk=chunk))
    assert repr(got) == repr(jsontext.loads(ODD))  # json.loads, a lone surrogate escape read as U+FFFD
    assert got[2]["lone"] == "\ufffd x"
    assert type(got[0]["big"]) is int and got[0]["big"] == 123456789012345678901234567890


def test_an_indented_list_takes_the_fast_path_to_its_end(tmp_path):
    p = tmp_path / "tau.json"
    p.write_text(json.dumps(RECORDS, indent=2))
    reader = _indented_records(p, 64)
    with pytest.raises(StopIteration) as stop:
        while True:
            next(reader)
    assert stop.value.value is None  # None: the end of the list; a count: handed over to the stdlib


@pytest.mark.parametrize("chunk", [64, 4096, 1 << 20])
def test_elements_parsed_together_read_as_the_stdlib_reader_reads_them(tmp_path, chunk):
    """An indented list's elements are parsed several at a time (as one list); an element the fast parser refuses
    there (nesting 202 deep in the list around them, 201 alone; a lone surrogate escape) is read as before, and so
    are the elements after it."""
    records = [dict(r, k=i) for i in range(220) for r in RECORDS]
    records[100]["deep"] = json.loads("[" * 200 + "]" * 200)
    records[1200]["lone"] = "\ud800"  # dumped as a lone surrogate escape
    text = json.dumps(records, indent=2)
    assert len(text) > 2 * _BATCH  # the two are in different batches
    p = tmp_path / "many.json"
    p.write_text(text, encoding="utf-8")
    got = list(ArrayRecords(p, chunk=chunk))
    assert repr(got) == repr(list(_Reader(p, chunk).records())) == repr(jsontext.loads(text))
    assert got[1200]["lone"] == "\ufffd" and len(got) == 1320


def _separators_varied(text: str) -> str:
    """``json.dump``'s layout with the separator after each element's closing line written another way each time
    (its own, a comma on the next line, a blank before the comma, a blank line after it): the reader looks for an
    element's end with the separator of the element before it, and must not take a later element's for it."""
    parts = text.split("\n  },\n  ")
    ways = ("\n  },\n  ", "\n  }\n  ,\n  ", "\n  } ,\n  ", "\n  },\n\n  ")
    return "".join(part + ways[i % len(ways)] for i, part in enumerate(parts[:-1])) + parts[-1]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("crlf", [False, True])
def test_an_element_whose_separator_differs_reads_as_json_loads(tmp_path, chunk, crlf):
    records = [dict(r, k=i) for i in range(3) for r in RECORDS]
    text = _separators_varied(json.dumps(records, indent=2))
    assert text.count("\n  }\n  ,") >= 3  # the layouts did change
    text = text.replace("\n", "\r\n") if crlf else text
    p = tmp_path / "a.json"
    p.write_text(text, encoding="utf-8")
    assert repr(list(ArrayRecords(p, chunk=chunk))) == repr(json.loads(text))


@pytest.mark.parametrize("tail", ['  {"b": 2,}\n]', '  {"b": 2}\n] x', '  {"b": 2}\n', '  {"b": 2}\n  {"c": 3}\n]'])
@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_errors_after_indented_elements_are_the_stdlib_s(tmp_path, tail, chunk):
    text = '[\n  {"a": 1},\n' + tail
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(json.JSONDecodeError) as whole:
        json.loads(text)
    got = []
    with pytest.raises(InputError, match="invalid JSON") as e:
        got.extend(ArrayRecords(p, chunk=chunk))
    assert f"line {whole.value.lineno} col {whole.value.colno}" in str(e.value)


def test_deep_nesting_in_an_indented_list_is_an_input_error(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('[\n  {"a": 1},\n  {"traj": ' + "[" * 100_000 + "]" * 100_000 + "}\n]")
    with pytest.raises(InputError, match="nested too deeply"):
        list(ArrayRecords(p))


def _value(rng, depth):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice([rng.randint(-10 ** rng.randint(1, 30), 10 ** rng.randint(1, 30)),
                           rng.random() * 10 ** rng.randint(-5, 25), float("nan"), None, True,
                           "".join(rng.choice('ab é\n"\\}]{[,:\u2028😀') for _ in range(rng.randint(0, 8)))])
    if r < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{rng.randint(0, 5)}": _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_random_lists_read_as_the_stdlib_reader_reads_them(tmp_path):
    """Differential: random lists in every layout, some corrupted, against the stdlib reader (values, errors)."""
    rng = random.Random(7)
    p = tmp_path / "a.json"
    for _ in range(400):
        text = json.dumps([_value(rng, 1) for _ in range(rng.randint(0, 6))], indent=rng.choice([None, 1, 2, "\t"]),
                          ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.2:
            k = rng.randrange(len(text))
            text = text[:k] + rng.choice(["", "x", ",", "]", "}", "\n"]) + text[k + 1:]
        p.write_text(text.replace("\n", "\r\n") if rng.random() < 0.2 else text, encoding="utf-8")
        chunk = rng.choice([1, 7, 64, 1 << 20])
        outcomes = []
        for records in (ArrayRecords(p, chunk=chunk), _Reader(p, chunk).records()):
            try:
                outcomes.append(repr(list(records)))
            except InputError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1], text


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_first_is_the_first_element_and_the_next_iteration_goes_on_from_it(tmp_path, doc, chunk):
    p = tmp_path / "a.json"
    p.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    records = ArrayRecords(p, chunk=chunk)
    assert records.first() == (doc[0] if doc else None)
    assert records.first() == (doc[0] if doc else None)  # asked again: the same element, not the second
    assert list(records) == doc
    assert list(records) == doc  # a later iteration reads the file again


def test_a_bad_first_element_fails_first_as_iterating_does(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('[{"a": 1,,}]')
    with pytest.raises(InputError, match="invalid JSON") as by_iterating:
        list(ArrayRecords(p))
    with pytest.raises(InputError, match="invalid JSON") as by_first:
        ArrayRecords(p).first()
    assert str(by_first.value) == str(by_iterating.value)


def test_importing_a_list_reads_the_file_and_its_first_element_once(tmp_path, monkeypatch):
    """Format detection's look at the first record and the importer's reading are one read: on main the file was
    opened and its first element parsed three times (``_streamed_list``, ``detect_format``, the importer)."""
    from evoharness.traces.importers import jsonstream, load_paths

    records = [{"task_id": i, "reward": 1.0, "traj": [{"role": "user", "content": f"task {i}"},
                                                      {"role": "assistant", "content": "done"}]} for i in range(3)]
    p = tmp_path / "results.json"
    p.write_text(json.dumps(records, indent=2))
    parsed, opened = [], []
    real_parse, real_open = jsonstream.from_json, jsonstream._indented_records

    def parse(data: bytes):
        parsed.append(data)
        return real_parse(data)

    def indented(path, chunk):
        opened.append(path)
        return (yield from real_open(path, chunk))

    monkeypatch.setattr(jsonstream, "from_json", parse)
    monkeypatch.setattr(jsonstream, "_indented_records", indented)
    assert [t.task_id for t in load_paths([p])] == ["0", "1", "2"]
    assert len(opened) == 1
    assert sum(b'"task 0"' in data for data in parsed) == 1


def test_a_whole_json_file_reads_as_the_stdlib_reads_it(tmp_path, monkeypatch):
    """Differential: ``read_json_file`` (jiter first) against itself with jiter refusing every text (the stdlib's
    reading alone): random documents, some corrupted, with values jiter reads differently or refuses (a lone
    surrogate escape, a UTF-8 byte-order mark, an integer of over 4,300 digits, deep nesting, a control character)."""
    from evoharness.traces import importers

    def stdlib_only(raw):
        raise ValueError("refused")

    def outcome(p):
        try:
            return repr(importers.read_json_file(p))
        except InputError as e:
            return str(e)

    odd = ['"\\ud800 x"', '"\\ud83d\\ude00"', "1" * 4301, "[" * 300 + "]" * 300, '"a\tb"', "NaN", "1e400",
           "-Infinity", "123456789012345678901234567890", "[1,]", "01", '{"a": 1, "a": 2, "b": 3}']
    rng = random.Random(17)
    p = tmp_path / "a.json"
    taken = refused = 0
    for i in range(600):
        doc = {"k": _value(rng, 1), "odd": "ODD", "n": i}
        text = json.dumps(doc, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5).replace(
            '"ODD"', rng.choice(odd))
        if rng.random() < 0.2:
            k = rng.randrange(len(text))
            text = text[:k] + rng.choice(["", "x", ",", "]", "}", "\n", "\x01"]) + text[k + 1:]
        raw = text.encode("utf-8", "surrogatepass")
        p.write_bytes(b"\xef\xbb\xbf" + raw if rng.random() < 0.1 else raw)
        got = outcome(p)
        with monkeypatch.context() as m:
            m.setattr(importers, "from_json", stdlib_only)
            want = outcome(p)
        assert got == want, text
        taken += not got.startswith(str(p))
        refused += got.startswith(str(p))
    assert taken > 300 and refused > 50
