"""The twenty-third session's labelling cuts give the answers of what they replace (docs/benchmarks.md, "Labelling
cost, the twenty-third session").

The view parses the tool calls in its own walk of the messages (``message_tool_calls``) and keeps them on the
trajectory (``Trajectory.keep_tool_calls``), where ``Trajectory.tool_calls()`` walked the messages a second time:
the records must be those ``tool_calls()`` makes, on messages built to break the parse (calls that are no list, no
object, a ``function`` that is no object, arguments that are objects, numbers, blank, bad or trailed JSON, tool calls
on a message that is not the assistant's).
"""

from __future__ import annotations

import random

from evoharness.diagnosis.context import TraceView
from evoharness.traces.models import Trajectory

_ARGS = ['{"a": 1}', ' {"b": [1, 2]} ', '{"a": 1} x', "{bad", "", "   ", "null", "[1, 2]", '"text"', "1e400",
         {"k": "v"}, 7, None, ["x"], '{"s": "\\u00e9dit"}', "\n{\"n\": true}\n"]
_IDS = ["call_1", "call_1", "call_2", "", None, 5, "call_3"]


def _call(rnd: random.Random) -> object:
    kind = rnd.random()
    if kind < 0.05:
        return "not an object"
    fn: object = {"name": rnd.choice(["get", "book", 3, None]), "arguments": rnd.choice(_ARGS)}
    if kind < 0.1:
        fn = rnd.choice(["text", None, [1]])
    elif kind < 0.15:
        fn = {"name": "no_arguments"}
    call = {"type": "function", "function": fn}
    if rnd.random() < 0.8:
        call["id"] = rnd.choice(_IDS)
    return call


def _messages(rnd: random.Random) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "policy"}]
    for _ in range(rnd.randint(0, 12)):
        role = rnd.choice(["user", "assistant", "assistant", "tool"])
        m: dict = {"role": role, "content": rnd.choice(["text", None, "", ["part"]])}
        if role in ("assistant", "user") and rnd.random() < 0.6:  # a user message's calls are no calls
            m["tool_calls"] = rnd.choice([[_call(rnd) for _ in range(rnd.randint(0, 3))], {"not": "a list"}, "x"])
        if role == "tool":
            m["tool_call_id"] = rnd.choice(_IDS)
        out.append(m)
    return out


def test_the_view_parses_the_calls_as_tool_calls_does_and_keeps_them_on_the_trajectory():
    rnd = random.Random(23)
    kept = 0
    for n in range(1_500):
        messages = _messages(rnd)
        fresh = Trajectory(id=f"t{n}", task_id="x", messages=messages)
        viewed = Trajectory(id=f"t{n}", task_id="x", messages=[dict(m) for m in messages])
        view = TraceView(viewed)
        assert viewed.tool_calls_parsed()
        records = viewed.tool_calls()
        assert records == fresh.tool_calls()
        assert [(c.step, c.name, c.parsed_ok, c.args, c.arguments) for c in view.calls] == [
            (r.step, r.name if isinstance(r.name, str) else str(r.name), r.parsed_ok, r.args, r.raw_text)
            for r in records]
        kept += len(records)
    assert kept > 1_000  # (the cases hold calls)


def test_the_view_reads_the_calls_a_trajectory_has_parsed_already():
    rnd = random.Random(29)
    for n in range(200):
        traj = Trajectory(id=f"t{n}", task_id="x", messages=_messages(rnd))
        records = traj.tool_calls()
        view = TraceView(traj)
        assert traj.tool_calls() is records  # not parsed again
        assert [c._record for c in view.calls] == records
