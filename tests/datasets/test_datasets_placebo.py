"""Placebo: same counts, tasks and user turns; assistant turns permuted across samples; still valid."""

from __future__ import annotations

import json
from collections import Counter

from evoharness.datasets.chat import to_record
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.datasets.placebo import permute
from evoharness.datasets.validate import openai_errors

from .helpers import make_traj, read_jsonl


def _records(n: int = 12) -> list[dict]:
    # different tools, call counts and user turns per record, so a mix-up would show
    tools = ["lookup", "search", "book"]
    return [to_record(make_traj(f"s{i}", f"task-{i % 4}", calls=1 + i % 3, tool=tools[i % 3],
                                user_turns=1 + i % 2)) for i in range(n)]


def _assistant_units(rec: dict) -> list[str]:
    """Each assistant turn with its tool results, ids stripped (they are re-keyed)."""
    units, cur = [], None
    for m in rec["messages"]:
        if m["role"] == "assistant":
            cur = [m.get("content"), [(c["function"]["name"], c["function"]["arguments"])
                                      for c in m.get("tool_calls") or []], []]
            units.append(cur)
        elif m["role"] == "tool":
            cur[2].append(m["content"])
    return [json.dumps(u) for u in units]


def test_placebo_keeps_counts_user_turns_and_permutes_assistant_turns():
    originals = _records()
    placebo, kept = permute(originals, seed=3)
    assert len(placebo) == len(originals) and kept == 0
    for o, p in zip(originals, placebo, strict=True):
        assert [m for m in o["messages"] if m["role"] in ("system", "user")] == \
            [m for m in p["messages"] if m["role"] in ("system", "user")]
        assert len(_assistant_units(o)) == len(_assistant_units(p))
        assert not set(_assistant_units(o)) & set(_assistant_units(p))  # none of its own turns remain
        assert openai_errors(p) == []
    # the assistant turns are the same multiset, only moved
    assert Counter(u for r in originals for u in _assistant_units(r)) == \
        Counter(u for r in placebo for u in _assistant_units(r))


def test_placebo_rekeys_ids_and_declares_the_tools_it_now_calls():
    placebo, _ = permute(_records(), seed=1)
    for p in placebo:
        calls = [c for m in p["messages"] for c in m.get("tool_calls") or []]
        assert [c["id"] for c in calls] == [f"call{i:05d}" for i in range(len(calls))]
        declared = {t["function"]["name"] for t in p["tools"]}
        assert {c["function"]["name"] for c in calls} <= declared
        answered = [m["tool_call_id"] for m in p["messages"] if m["role"] == "tool"]
        assert answered == [c["id"] for c in calls]


def test_placebo_is_deterministic_by_seed():
    recs = _records()
    assert permute(recs, seed=5)[0] == permute(recs, seed=5)[0]
    assert permute(recs, seed=5)[0] != permute(recs, seed=6)[0]


def test_a_single_record_cannot_be_permuted_and_says_so():
    [rec] = _records(1)
    out, kept = permute([rec], seed=0)
    assert kept == len(_assistant_units(rec)) and out[0]["messages"] == rec["messages"]


def test_placebo_export_matches_the_real_export_and_its_card_says_placebo(tmp_path):
    trajs = [make_traj(f"s{i}", f"task-{i % 5}", calls=1 + i % 3, user_turns=1 + i % 2) for i in range(30)]
    real = export_dataset(tmp_path / "real", source=SourceKind.all, trajectories=trajs)
    fake = export_dataset(tmp_path / "placebo", source=SourceKind.all, trajectories=trajs, placebo=True,
                          placebo_seed=11, placebo_window=8)  # several windows
    assert fake.records == real.records == 30
    assert fake.tasks == real.tasks
    r_recs = read_jsonl(tmp_path / "real" / "data.jsonl")
    p_recs = read_jsonl(tmp_path / "placebo" / "data.jsonl")
    assert all(openai_errors(p) == [] for p in p_recs)
    pairs = list(zip(r_recs, p_recs, strict=True))
    assert all(r["messages"][-1]["content"] != p["messages"][-1]["content"] for r, p in pairs)
    for r, p in zip(r_recs, p_recs, strict=True):
        users = [m for m in r["messages"] if m["role"] == "user"]
        assert users == [m for m in p["messages"] if m["role"] == "user"]
    meta = read_jsonl(tmp_path / "placebo" / "metadata.jsonl")
    assert [m["task_id"] for m in meta] == [t.task_id for t in trajs] and all(m["placebo"] for m in meta)
    card = (tmp_path / "placebo" / "README.md").read_text()
    assert "placebo control set" in card and "- placebo" in card and "seed 11" in card
    assert "placebo control" not in (tmp_path / "real" / "README.md").read_text()
