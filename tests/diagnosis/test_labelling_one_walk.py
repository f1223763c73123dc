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


def _per_occurrence_before(view: TraceView) -> None:
    """``TraceView._per_occurrence`` as it was before the lead's cut (every tool message paired again): the
    reference the cut must equal."""
    calls, msgs, results = view.calls, view.traj.messages, view.results
    taken = {c.call_id for c in calls}
    seen: dict[str, int] = {}
    for c in calls:
        n = seen[c.call_id] = seen.get(c.call_id, 0) + 1
        if n > 1:
            key = f"{c.call_id}#{n}"
            while key in taken:
                key += "#"
            taken.add(key)
            c.id = key
    results.clear()
    answered: dict[int, str] = {}
    waiting: dict[str, list[str]] = {}
    k = 0
    for i in view.tool_steps:
        while k < len(calls) and calls[k].step < i:
            waiting.setdefault(calls[k].call_id, []).append(calls[k].id)
            k += 1
        raw = str(msgs[i].get("tool_call_id"))
        queue = waiting.get(raw)
        key = queue.pop(0) if queue else raw
        content = msgs[i].get("content")
        results[key] = (i, content if isinstance(content, str) else str(content))
        answered[i] = key
    view.__dict__["_answered"] = answered


def test_a_reused_id_is_paired_again_as_when_every_tool_message_was(monkeypatch):
    """Only the tool messages under a reused id or an occurrence's key are paired again now: the keys, the results
    and each tool message's answer must be those of pairing every message again, ids like "call_1#2" included."""
    ids = ["call_1", "call_1", "call_2", "call_1#2", "call_1#2#", "call_2#2", None, ""]
    rnd = random.Random(31)
    reused = 0
    for n in range(3_000):
        messages: list[dict] = [{"role": "system", "content": "policy"}]
        for _ in range(rnd.randint(1, 14)):
            if rnd.random() < 0.5:
                calls = [{"type": "function", "id": rnd.choice(ids), "function": {"name": "f", "arguments": "{}"}}
                         for _ in range(rnd.randint(1, 3))]
                messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            else:
                messages.append({"role": "tool", "tool_call_id": rnd.choice(ids), "content": rnd.choice(["ok", 3])})
        now = TraceView(Trajectory(id=f"t{n}", task_id="x", messages=messages))
        with monkeypatch.context() as m:
            m.setattr(TraceView, "_per_occurrence", _per_occurrence_before)
            before = TraceView(Trajectory(id=f"t{n}", task_id="x", messages=messages))
        assert [c.id for c in now.calls] == [c.id for c in before.calls]
        assert now.results == before.results
        assert [now.answered(i) for i in now.tool_steps] == [before.answered(i) for i in before.tool_steps]
        reused += len({c.call_id for c in now.calls}) < len(now.calls)
    assert reused > 1_000  # (most cases reuse an id)
