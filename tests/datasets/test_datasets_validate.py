"""The OpenAI chat validator catches each kind of broken record; real traces export valid records."""

from __future__ import annotations

import copy
import json

import pytest

from evoharness.datasets.chat import RecordSkipped, clean_messages, to_record
from evoharness.datasets.formats import to_sharegpt
from evoharness.datasets.validate import openai_errors, sharegpt_errors, validate_file
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

from .helpers import make_traj


def _good() -> dict:
    return to_record(make_traj("g", calls=2))


def test_a_clean_record_passes():
    rec = _good()
    assert openai_errors(rec) == []
    roles = [m["role"] for m in rec["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert rec["messages"][2]["tool_calls"][0]["id"] == rec["messages"][3]["tool_call_id"] == "call00000"
    assert rec["tools"][0]["function"]["name"] == "lookup"


def _break(fn):
    rec = copy.deepcopy(_good())
    fn(rec)
    return rec


def _fn(rec):
    return rec["messages"][2]["tool_calls"][0]["function"]


BROKEN = {
    "bad role": (lambda r: r["messages"][1].update(role="human"), "bad role"),
    "tool result answers nothing": (lambda r: r["messages"][3].update(tool_call_id="call_99"),
                                    "answers no pending"),
    "call never answered": (lambda r: r["messages"].pop(5), "not answered"),
    "tool not declared": (lambda r: r.update(tools=[]), "not declared"),
    "arguments not JSON": (lambda r: _fn(r).update(arguments="{oops"), "not JSON"),
    "arguments not an object": (lambda r: _fn(r).update(arguments="[1]"), "not a JSON object"),
    "duplicate call id": (lambda r: (r["messages"][4]["tool_calls"][0].update(id="call00000"),
                                     r["messages"][5].update(tool_call_id="call00000")), "duplicate id"),
    "ends on a tool result": (lambda r: r["messages"].pop(), "last message"),
    "empty user content": (lambda r: r["messages"][1].update(content=""), "non-empty string"),
    "system after start": (lambda r: r["messages"].insert(2, {"role": "system", "content": "x"}),
                           "system message"),
    "empty assistant": (lambda r: r["messages"][-1].update(content=None), "neither content"),
    "unknown top-level key": (lambda r: r.update(meta={}), "unexpected keys"),
    "no messages": (lambda r: r.update(messages=[]), "missing or empty"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_validator_rejects(case):
    fn, expected = BROKEN[case]
    errs = openai_errors(_break(fn))
    assert any(expected in e for e in errs), errs


def test_cleaning_matches_results_without_ids_and_drops_trailing_turns():
    t = make_traj("x", calls=1)
    msgs = [dict(m) for m in t.messages]
    msgs[3].pop("tool_call_id")  # a result without an id answers the oldest pending call
    msgs.append({"role": "user", "content": "thanks"})  # trailing user turn teaches nothing
    out = clean_messages(msgs)
    assert out[3]["tool_call_id"] == out[2]["tool_calls"][0]["id"]
    assert out[-1]["role"] == "assistant" and len(out) == len(t.messages)


def test_final_unanswered_action_is_dropped_but_mid_run_one_skips():
    t = make_traj("x", calls=1)
    final_call = {"role": "assistant", "content": "submitting", "tool_calls": [
        {"id": "s", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}
    out = clean_messages([*t.messages, final_call, {"role": "user", "content": "diff ..."}])
    assert out[-1] == {"role": "assistant", "content": "submitting"}
    mid = [*t.messages[:3], {"role": "assistant", "content": "again"}]  # call at 2 never answered
    with pytest.raises(RecordSkipped, match="unanswered_tool_call"):
        clean_messages(mid)


def test_tools_are_inferred_when_the_trajectory_declares_none():
    rec = to_record(make_traj("x", tool="search_flights", tools_meta=False))
    assert openai_errors(rec) == []
    [tool] = rec["tools"]
    assert tool["function"]["name"] == "search_flights"
    props = tool["function"]["parameters"]["properties"]
    assert props == {"key": {"type": "string"}, "n": {"type": "integer"}}


def test_sharegpt_alternates_and_validates():
    rec = to_sharegpt(_good())
    assert sharegpt_errors(rec) == []
    assert [t["from"] for t in rec["conversations"]] == ["human", "function_call", "observation",
                                                         "function_call", "observation", "gpt"]
    assert json.loads(rec["conversations"][1]["value"])["name"] == "lookup"
    rec["conversations"].pop()
    assert any("last turn" in e for e in sharegpt_errors(rec))


@pytest.mark.parametrize("folder", ["tau_bench_airline_gpt4o", "mini_swe_agent_sample"])
def test_real_traces_make_valid_records(shared_data, folder):
    trajs: list[Trajectory] = list(load_paths([shared_data / folder], None))
    made = skipped = 0
    for t in trajs:
        try:
            rec = to_record(t)
        except RecordSkipped:
            skipped += 1
            continue
        made += 1
        assert openai_errors(rec) == [], t.id
    assert made >= 0.8 * len(trajs)  # nearly all real trajectories make a record


def test_validate_file_reports_line_numbers(tmp_path):
    path = tmp_path / "d.jsonl"
    bad = _break(BROKEN["tool not declared"][0])
    path.write_text(json.dumps(_good()) + "\n" + json.dumps(bad) + "\nnot json\n")
    n, problems = validate_file(path)
    assert n == 3
    assert any(p.startswith("line 2:") and "not declared" in p for p in problems)
    assert "line 3: not JSON" in problems


def test_record_lines_are_the_bytes_to_json_writes():
    """The writers' orjson lines are ``pydantic_core.to_json``'s bytes: strings of every kind, numbers (floats
    at every scale, integers past 64 bits: to_json's), and a NaN in a declared tool (kept as to_json writes it);
    a lone surrogate fails as it did."""
    import math
    import random
    import struct

    import pydantic_core

    from evoharness.datasets.formats import _dump, _dump_record

    rng = random.Random(5)
    chars = [chr(i) for i in range(0x250)] + ["\u2028", "\u2029", "\ufeff", "\U0001f600", "\U0010ffff", "\x7f"]

    def text():
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, 12)))

    def number():
        f = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        return rng.choice([0 if math.isnan(f) or math.isinf(f) else f, rng.getrandbits(70) - 2 ** 69,
                           rng.randint(-10, 10), True, None])

    for _ in range(2000):
        call = {"id": text(), "type": "function", "function": {"name": "f", "arguments": text()}}
        record = {"messages": [{"role": "user", "content": text()},
                               {"role": "assistant", "content": None, "tool_calls": [call]}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {text(): number()}}}]}
        assert _dump_record(record) == pydantic_core.to_json(record) + b"\n"
        meta = {"id": text(), "score": number(), "round": number(), "placebo": False}
        assert _dump(meta) == pydantic_core.to_json(meta) + b"\n"
    nan = {"messages": [{"role": "assistant", "content": "x"}],
           "tools": [{"type": "function", "function": {"name": "f", "parameters": {"x": math.nan}}}]}
    assert _dump_record(nan) == pydantic_core.to_json(nan) + b"\n" and b"NaN" in _dump_record(nan)
    with pytest.raises(pydantic_core.PydanticSerializationError):
        _dump({"messages": [{"role": "user", "content": "\ud800"}]})


def test_declared_tools_of_every_kind_are_written_as_to_json_writes_them_and_plain_ones_by_orjson(monkeypatch):
    """A record's ``tools`` are to_json's bytes whatever a declaration holds (an environment's are Python values):
    infinities, a float, a big integer, a lone surrogate, a datetime, a dataclass, a set, a tuple, an enum, a str
    subclass, a key that is no string. Plain JSON declarations (tau-bench's) are written without to_json (orjson:
    ~3x fewer instructions); before, every record's tools went through to_json."""
    import dataclasses
    import datetime
    import enum
    import math

    import pydantic_core

    from evoharness.datasets import formats

    class Colour(enum.Enum):
        red = "red"

    class Name(str):
        pass

    @dataclasses.dataclass
    class Box:
        side: float

    odd = [math.inf, -math.inf, math.nan, 2.5, 2 ** 70, "\ud800", datetime.datetime(2026, 1, 2, 3, 4, 5),
           datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC), Box(1.5), {1, 2}, (1, "a"), Colour.red, Name("n"),
           {1: "x"}, None]
    for value in odd:
        record = {"messages": [{"role": "assistant", "content": "x"}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"p": value}}}]}
        try:
            expected = pydantic_core.to_json(record) + b"\n"
        except pydantic_core.PydanticSerializationError:
            with pytest.raises(pydantic_core.PydanticSerializationError):
                formats._dump_record(record)
            continue
        assert formats._dump_record(record) == expected, value

    real = to_record(make_traj("g", calls=2))
    real["tools"] = [{"type": "function", "function": {"name": "get_user_details", "description": "Get a user.",
                                                        "parameters": {"type": "object", "required": ["user_id"],
                                                                       "properties": {"user_id": {"type": "string"}}}}}]
    expected = pydantic_core.to_json(real) + b"\n"
    monkeypatch.setattr(formats.pydantic_core, "to_json", lambda *a, **k: pytest.fail("tools went to to_json"))
    assert formats._dump_record(real) == expected


@pytest.mark.parametrize("calls", [5, 2.5, True, "call", {"id": "c"}])
def test_tool_calls_that_are_not_a_list_skip_the_record(calls):
    """Any JSON may stand in a trace's ``tool_calls``: a number was a TypeError out of the export (a traceback);
    it is a malformed call, as an object or a text already were."""
    from evoharness.traces.models import Trajectory

    t = Trajectory.with_messages([{"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": "x", "tool_calls": calls},
                                  {"role": "assistant", "content": "done"}], id="a", task_id="t")
    with pytest.raises(RecordSkipped, match="malformed_tool_call"):
        to_record(t)


def test_a_system_message_mid_conversation_skips_the_record(tmp_path, capsys):
    """It was kept, so the exporter's own check stopped the export with an AssertionError traceback."""
    from evoharness.cli import main
    from evoharness.traces.models import Trajectory
    from evoharness.traces.store import write_trajectories

    late = Trajectory.with_messages([{"role": "user", "content": "hi"}, {"role": "developer", "content": "note"},
                                     {"role": "assistant", "content": "done"}], id="late", task_id="t", score=1.0)
    early = Trajectory.with_messages([{"role": "system", "content": "be brief"}, {"role": "system", "content": "x"},
                                      {"role": "user", "content": "hi"}, {"role": "system", "content": " "},
                                      {"role": "assistant", "content": "done"}], id="early", task_id="t", score=1.0)
    with pytest.raises(RecordSkipped, match="system_message_mid_conversation"):
        to_record(late)
    assert [m["role"] for m in to_record(early)["messages"]] == ["system", "system", "user", "assistant"]
    write_trajectories(tmp_path / "t.jsonl", [late, early])
    assert main(["dataset", "export", "-t", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / "o")]) == 0
    assert "wrote 1 record " in capsys.readouterr().out


# the check in Mistral's chat templates (Mistral-7B-Instruct-v0.3, Mistral-Nemo: tokenizer_config.json)
MISTRAL_ID_CHECK = """{%- for message in messages %}{%- for tool_call in message.tool_calls or [] %}
{%- if not tool_call.id is defined or tool_call.id|length != 9 %}
{{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}
{%- endfor %}{%- if message.role == "tool" and message.tool_call_id|length != 9 %}
{{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}{%- endfor %}"""


@pytest.mark.parametrize("placebo", [False, True])
def test_exported_tool_call_ids_are_nine_letters_and_digits_as_mistral_templates_require(tmp_path, placebo):
    """Ids were call_0, call_1, ...: a Mistral chat template raised on the first record, so no export trained a
    Mistral model without rewriting its ids."""
    import re

    import jinja2

    from evoharness.datasets.export import export_dataset
    from evoharness.datasets.models import SourceKind

    from .helpers import read_jsonl

    def raise_exception(message):
        raise ValueError(message)

    export_dataset(tmp_path, source=SourceKind.all, placebo=placebo,
                   trajectories=[make_traj(f"r{i}", f"t{i}", calls=12) for i in range(3)])
    template = jinja2.Environment().from_string(MISTRAL_ID_CHECK)
    for rec in read_jsonl(tmp_path / "data.jsonl"):
        template.render(messages=rec["messages"], raise_exception=raise_exception)
        ids = [c["id"] for m in rec["messages"] for c in m.get("tool_calls") or []]
        assert len(ids) == 12 and all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids), ids
        assert len(set(ids)) == 12 and openai_errors(rec) == []


@pytest.mark.parametrize("name", ["lookup\n", "a" * 64 + "\n", "look up", "", "a" * 65])
def test_a_tool_name_with_a_final_newline_or_other_bad_name_is_neither_exported_nor_valid(name):
    # a Python regex's ``$`` matches before a final newline: "lookup\n" was exported and called valid
    t = make_traj("n", tool=name, tools_meta=False)
    with pytest.raises(RecordSkipped, match="bad_tool_name"):
        to_record(t)
    rec = _good()
    _fn(rec)["name"] = name
    rec["tools"][0]["function"]["name"] = name
    assert any("bad name" in e for e in openai_errors(rec))
    assert any("not declared" in e for e in openai_errors(rec))


def test_tool_name_ok_says_what_the_pattern_says_twice_and_remembers_a_bounded_number_of_names():
    import random

    from evoharness.datasets import chat

    class Sub(str):
        pass

    rng = random.Random(7)
    alphabet = "ab_-Z09 \n\t.é/\u0000"
    names = ["lookup", "lookup\n", "", "a" * 64, "a" * 65, "a" * 64 + "\n", Sub("lookup"), Sub("bad name"), None, 7,
             b"lookup", ["lookup"]]
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 70))) for _ in range(3000)]
    for name in names * 2:  # the second time from memory
        want = isinstance(name, str) and chat.TOOL_NAME.match(name) is not None
        assert chat.tool_name_ok(name) is want, repr(name)
    for i in range(chat._NAMES_KEPT + 100):
        chat.tool_name_ok(f"n{i}")
    assert len(chat._NAMES_CHECKED) <= chat._NAMES_KEPT
    assert chat.tool_name_ok("lookup") and not chat.tool_name_ok("x" * 10_000)


def test_a_record_of_more_than_100000_calls_is_skipped_not_given_a_ten_character_id():
    from evoharness.datasets.chat import MAX_CALLS, call_id

    assert len(call_id(MAX_CALLS - 1)) == 9 and len(call_id(MAX_CALLS)) == 10

    def run(n: int) -> list[dict]:
        call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call] * n},
                *[{"role": "tool", "tool_call_id": "c", "content": "ok"}] * n,
                {"role": "assistant", "content": "done"}]

    assert clean_messages(run(MAX_CALLS))[1]["tool_calls"][-1]["id"] == "call99999"  # still nine characters
    with pytest.raises(RecordSkipped, match="too_many_tool_calls"):  # the next would be call100000
        clean_messages(run(MAX_CALLS + 1))
