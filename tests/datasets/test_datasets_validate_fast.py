"""The record check's short cut (``validate._surely_valid``) says "valid" only where the full pass finds nothing: over
real tau-bench records and thousands of random breakages of them, ``openai_errors`` gives the same list with the short
cut as without it (for the export's check, which trusts the arguments it parsed, and for `validate`'s, which parses
them). Before the short cut every record the exporter wrote went through the full pass only."""

from __future__ import annotations

import copy
import random

import pytest

from evoharness.datasets import validate
from evoharness.datasets.chat import RecordSkipped, to_record
from evoharness.datasets.validate import openai_errors
from evoharness.traces.importers import load_paths


class _Text(str):
    """A str subclass: the short cut takes exact types only, the full pass any str."""


def _records(shared_data) -> list[dict]:
    out = []
    for t in load_paths([shared_data / "tau_bench_airline_gpt4o"], None):
        try:
            out.append(to_record(t))
        except RecordSkipped:
            pass
    return out


_VALUES = [None, "", " \n", "x", _Text("x"), 0, [], {}, ["x"], {"a": 1}, "call00000", "call00001", "{}", "[1]",
           "{oops", "lookup", "function", "assistant", "tool", "user", "system", "human"]


def _break(rec: dict, rng: random.Random) -> None:
    """One random change somewhere in ``rec``: a value replaced, a key dropped or added, a message moved, dropped,
    doubled or inserted, a run of messages doubled."""
    msgs = rec["messages"]
    m = rng.choice([x for x in msgs if isinstance(x, dict)] or [{}])
    what = rng.randrange(8)
    if what == 0:  # a message's field
        m[rng.choice(["role", "content", "tool_call_id", "tool_calls", "name"])] = rng.choice(_VALUES)
    elif what == 1 and (calls := [c for x in msgs if isinstance(x, dict)
                                  for c in (x.get("tool_calls") if isinstance(x.get("tool_calls"), list) else [])
                                  if isinstance(c, dict)]):  # a call's field, or its function's
        c = rng.choice(calls)
        target = c["function"] if rng.random() < 0.6 and isinstance(c.get("function"), dict) else c
        key = rng.choice(["id", "type", "function", "name", "arguments"])
        if rng.random() < 0.2:
            target.pop(key, None)
        else:
            target[key] = rng.choice(_VALUES)
    elif what == 2:
        m.pop(rng.choice(list(m)), None)
    elif what == 3:
        msgs.insert(rng.randrange(len(msgs) + 1), msgs.pop(rng.randrange(len(msgs))))
    elif what == 4 and len(msgs) > 1:
        msgs.pop(rng.randrange(len(msgs)))
    elif what == 5:
        msgs.insert(rng.randrange(len(msgs) + 1), copy.deepcopy(rng.choice(msgs)))
    elif what == 6:  # a run of messages again (a call and its result: the same call id twice)
        i = rng.randrange(len(msgs))
        at = rng.randrange(len(msgs) + 1)
        msgs[at:at] = copy.deepcopy(msgs[i:i + rng.choice([1, 2, 2, 3])])
    else:
        msgs.insert(rng.randrange(len(msgs) + 1), rng.choice(
            [{"role": "system", "content": "x"}, {"role": "user", "content": "x"}, "x", None,
             {"role": "assistant", "content": None}, {"role": "tool", "tool_call_id": "call00000", "content": "r"}]))


@pytest.mark.parametrize("check_arguments", [False, True])
def test_the_short_cut_never_hides_a_problem_the_full_pass_finds(shared_data, monkeypatch, check_arguments):
    records = _records(shared_data)
    rng = random.Random(17)
    cases = [copy.deepcopy(r) for r in records]
    for _ in range(4_000):
        rec = copy.deepcopy(rng.choice(records))
        for _ in range(rng.choice([1, 1, 2, 3])):
            _break(rec, rng)
        cases.append(rec)
    fast = [openai_errors(r, check_arguments=check_arguments) for r in cases]
    monkeypatch.setattr(validate, "_surely_valid", lambda *a: False)
    full = [openai_errors(r, check_arguments=check_arguments) for r in cases]
    assert fast == full
    assert sum(not e for e in full) >= len(records)  # the real records, valid, and some breakages that break nothing
    assert sum(bool(e) for e in full) > 2_000  # most breakages are problems, of every kind
