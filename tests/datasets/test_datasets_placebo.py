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


def _wide(tid: str, widths: tuple[int, ...]) -> dict:
    """A record whose call turns make ``widths`` calls each (several calls a turn), then a reply."""
    messages: list[dict] = [{"role": "system", "content": "You are the agent."},
                            {"role": "user", "content": f"{tid}: look these up"}]
    for t, width in enumerate(widths):
        ids = [f"o{t}_{i}" for i in range(width)]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"k": cid})}}
            for cid in ids]})
        messages += [{"role": "tool", "tool_call_id": cid, "name": "lookup", "content": f"{tid} {cid}"} for cid in ids]
    messages.append({"role": "assistant", "content": f"done {tid}"})
    return to_record(make_traj(tid, f"task-{tid}").model_copy(update={"messages": messages}))


def test_a_placebo_record_past_max_calls_is_none_not_a_ten_character_id(monkeypatch):
    """A placebo record takes its call turns from other records, so it can hold more calls than any record it came
    from: `rekey` wrote ``call100000`` on (ten characters, which Mistral's templates refuse), the limit cleaning keeps
    (``MAX_CALLS``) not applied. Now the one id function holds it for both, and such a record is None. (The limit is
    lowered to 300 here: two turns of 200 calls land in one record for some seeds.)"""
    from evoharness.datasets import chat

    records = [_wide("a", (200, 1)), _wide("b", (200, 1)), _wide("c", (1, 1))]
    assert permute(records, seed=0)[0].count(None) == 0  # under the real limit
    monkeypatch.setattr(chat, "MAX_CALLS", 300)
    nones = 0
    for seed in range(20):
        out, _ = permute(records, seed=seed)
        nones += out.count(None)
        for rec in (r for r in out if r is not None):
            ids = [c["id"] for m in rec["messages"] for c in m.get("tool_calls") or []]
            assert len(ids) <= 300 and all(len(i) == 9 for i in ids) and openai_errors(rec) == []
        assert sum(r is None for r in out) <= 1  # 402 calls in all: one record at most can pass 300
    assert nones > 0


def test_the_placebo_export_skips_such_a_record_as_too_many_tool_calls(tmp_path, monkeypatch):
    from evoharness.datasets import chat
    from evoharness.traces.models import Trajectory

    monkeypatch.setattr(chat, "MAX_CALLS", 300)
    widths = {"a": (200, 1), "b": (200, 1), "c": (1, 1)}
    trajs = []
    for tid, w in widths.items():
        rec = _wide(tid, w)
        base = make_traj(tid, f"task-{tid}")
        trajs.append(Trajectory.model_validate({**base.model_dump(), "messages": rec["messages"],
                                                "final_answer": f"done {tid}"}))
    skipped = set()
    for seed in range(20):
        out = tmp_path / f"p{seed}"
        summary = export_dataset(out, source=SourceKind.all, trajectories=trajs, placebo=True, placebo_seed=seed)
        n = summary.skipped.get("too_many_tool_calls", 0)
        assert summary.records + n == 3 and len(read_jsonl(out / "data.jsonl")) == summary.records, summary.skipped
        skipped.add(n)
    assert skipped == {0, 1}
