"""Text-action agents (mini-swe-agent, SWE-agent, nebius' SWE-agent rows) act by writing a fenced command in the reply
and read the result as a user message. Their importers give each command a ``bash`` call and each result a ``tool``
message (what labelling reads); an export wrote both, so a model fine-tuned on it learnt to write every action twice,
once as a tool call its own scaffold never parses. The exported row is what the model saw and wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.datasets.chat import clean_messages, to_record
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind
from evoharness.datasets.validate import openai_errors, sharegpt_errors
from evoharness.traces.importers import load_paths
from evoharness.traces.importers.mini_swe import action_blocks

from .helpers import offline_hf, read_jsonl  # noqa: F401 (offline_hf: the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MINI = FIXTURES / "data" / "mini_swe_agent_sample"
V2 = FIXTURES / "traces" / "mini_swe_v2"
TAU = FIXTURES / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def _openai_rows(out: Path, fmt: str, files: list[str]) -> list[dict]:
    """The exported rows as OpenAI chat records, whatever the format."""
    if fmt == "openai":
        return read_jsonl(out / "data.jsonl")
    if fmt == "sharegpt":
        rows = read_jsonl(out / "data.jsonl")
        assert all(sharegpt_errors(r) == [] for r in rows)
        roles = {"system": "system", "human": "user", "gpt": "assistant", "function_call": "tool_call",
                 "observation": "tool"}
        return [{"messages": ([{"role": "system", "content": r["system"]}] if r.get("system") else [])
                 + [{"role": roles[c["from"]], "content": c["value"]} for c in r["conversations"]]} for r in rows]
    pq = pytest.importorskip("pyarrow.parquet")
    rows = pq.read_table(out / files[0]).to_pylist()
    return [{"messages": [{k: v for k, v in m.items() if v is not None} for m in r["messages"]],
             "tools": json.loads(r["tools"])} for r in rows]


@pytest.mark.parametrize("placebo", [False, True])
@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "hf"])
def test_a_mini_swe_agent_row_is_what_the_model_saw_and_wrote(tmp_path, fmt, placebo):
    trajs = list(load_paths([MINI]))
    assert trajs and all(t.meta["actions_from_text"] is True for t in trajs)
    assert all(t.tool_calls() for t in trajs)  # labelling still reads the calls
    s = export_dataset(tmp_path, fmt=ExportFormat(fmt), source=SourceKind.all, trajectories=trajs, placebo=placebo)
    assert s.records == len(trajs) and not s.skipped
    rows = _openai_rows(tmp_path, fmt, s.files)
    observations = {m["content"] for t in trajs for m in t.messages if m["role"] == "tool"}
    replies = {m["content"]: bool(m.get("tool_calls")) for t in trajs for m in t.messages if m["role"] == "assistant"}
    for r in rows:
        if fmt != "sharegpt":
            assert openai_errors(r) == [] and r["tools"] == []
        roles = [m["role"] for m in r["messages"]]
        assert "tool" not in roles and "tool_call" not in roles
        assert all("tool_calls" not in m for m in r["messages"])
        acting = [m for m in r["messages"] if m["role"] == "assistant"]
        assert acting and all(m["content"] in replies for m in acting)
        # the block written once, in the reply's text; its result the user turn after it, as the file has it
        actions = [m for m in acting if replies[m["content"]]]  # a reply of no or two blocks had a format error
        assert len(actions) > len(acting) / 2
        assert all(len(action_blocks(m["content"])) == 1 for m in actions)
        seen = [m for m in r["messages"] if m["role"] == "user" and m["content"] in observations]
        assert len(seen) >= len(actions) - 1 or placebo  # (a placebo row's replies come from other rows)
        assert seen[0]["content"].startswith("<returncode>")
        assert r["messages"][-1]["role"] == "assistant"


def test_a_mini_swe_agent_row_keeps_each_turn_in_its_place():
    [t] = [t for t in load_paths([MINI]) if t.task_id == "django__django-11477"]
    messages = to_record(t)["messages"]
    expected = [{"role": "user" if m["role"] == "tool" else m["role"], "content": m["content"]}
                for m in t.messages]
    assert messages == expected[:len(messages)] and len(messages) >= len(expected) - 1


@pytest.mark.parametrize("style", ["text", "toolcall"])
def test_mini_swe_agent_v2_exports_its_text_actions_as_text_and_its_tool_calls_as_calls(style):
    for t in load_paths([V2 / style]):
        rec = to_record(t)
        calls = [m for m in rec["messages"] if m.get("tool_calls")]
        if style == "text":
            assert t.meta["actions_from_text"] is True and not calls
        else:
            assert "actions_from_text" not in t.meta and calls
            assert rec["messages"] == clean_messages(t.messages)  # as before


def test_a_stored_trajectory_without_the_marker_exports_as_before():
    [t] = [t for t in load_paths([MINI]) if t.task_id == "django__django-11477"]
    older = t.model_copy(update={"meta": {k: v for k, v in t.meta.items() if k != "actions_from_text"}})
    rec = to_record(older)
    assert rec["messages"] == clean_messages(t.messages)
    assert any(m.get("tool_calls") for m in rec["messages"]) and rec["tools"][0]["function"]["name"] == "bash"


def test_a_tool_calling_export_is_unchanged(tmp_path):
    """tau-bench's rows: the trajectory's calls and results, cleaned as ever (``clean_messages`` of its messages)."""
    trajs = list(load_paths([TAU]))[:20]
    assert not any("actions_from_text" in t.meta for t in trajs)
    s = export_dataset(tmp_path, fmt=ExportFormat.openai, source=SourceKind.all, trajectories=trajs)
    rows = read_jsonl(tmp_path / "data.jsonl")
    assert len(rows) == s.records > 10
    kept = [t for t in trajs if t.id in {m["id"] for m in read_jsonl(tmp_path / "metadata.jsonl")}]
    for t, r in zip(kept, rows, strict=True):
        assert r["messages"] == clean_messages(t.messages)
    assert sum(any(m["role"] == "tool" for m in r["messages"]) for r in rows) > len(rows) / 2
    assert sum(any("tool_calls" in m for m in r["messages"]) for r in rows) > len(rows) / 2


def test_swe_agent_and_nebius_text_runs_are_marked_and_function_calling_runs_are_not(tmp_path):
    from tests.traces.test_traces_swe_agent import RUN, _run

    for style, marked in (("thought_action", True), ("function_calling", False)):
        p = tmp_path / style / f"{RUN}.traj"
        p.parent.mkdir()
        p.write_text(json.dumps(_run(style)))
        [t] = list(load_paths([p]))
        assert t.meta.get("actions_from_text", False) is marked
        if marked:
            rec = to_record(t)
            assert openai_errors(rec) == [] and not any(m.get("tool_calls") for m in rec["messages"])
            assert [m["role"] for m in rec["messages"][:4]] == ["system", "user", "assistant", "user"]
    nebius = list(load_paths([FIXTURES / "traces" / "nebius_swe_agent" / "sample.jsonl"]))
    assert nebius and all(t.meta["actions_from_text"] is True for t in nebius)
    for t in nebius:
        rec = to_record(t)
        assert openai_errors(rec) == [] and not any(m.get("tool_calls") for m in rec["messages"])
        assert [m["role"] for m in rec["messages"] if m["role"] not in ("system",)][:3] == ["user", "assistant",
                                                                                            "user"]
