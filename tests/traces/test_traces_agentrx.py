"""AgentRx Magentic-One message lists: auto-detected, roles become agents, human labels joined."""

from __future__ import annotations

import json

import pytest

from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_paths

RUN = "5f982798-16b9-4051-ab57-cfc7ebdb2a91"


def test_agentrx_runs_import_with_agents_and_human_steps(shared_data):
    root = shared_data / "agentrx_magentic_one"
    trajs = list(load_paths([root]))  # sidecars (ground_truth.json, steps_by_id.json, ...) are skipped
    assert len(trajs) == 4  # the vendored sample: 3 runs with human labels, 1 without
    assert sum("human_failures" in t.meta for t in trajs) == 3
    [t] = [t for t in trajs if t.task_id == RUN]
    assert detect_format(root / "trajectories" / f"{RUN}.json") == "agentrx"
    raw = json.loads((root / "trajectories" / f"{RUN}.json").read_text())
    assert len(t.messages) == len(raw) and t.messages[0]["role"] == "user"
    assert {m["name"] for m in t.messages if m["role"] == "assistant"} == {"Orchestrator", "WebSurfer", "FileSurfer"}
    # AgentRx step_number 13 (1-based) is message 12, a WebSurfer turn
    first = t.meta["human_failures"][0]
    assert first["step"] == 12 and t.messages[12]["name"] == "WebSurfer"
    assert t.score is None and t.meta["failure_only"]


def test_who_and_when_magentic_roles_become_agents(shared_data):
    hc = shared_data / "who_and_when" / "Who&When" / "Hand-Crafted"
    t = next(iter(load_paths([next(hc.iterdir())])))
    names = {m.get("name") for m in t.messages if m["role"] == "assistant"}
    assert "Orchestrator" in names and not any("(" in n or n.endswith("_") for n in names)


@pytest.mark.parametrize("content, match", [
    ('[{"role": "WebSurfer", "content": "hi"}, 3]', "message 1 has no string 'role'"),
    ('[{"role": "WebSurfer", "content": "hi"}, {"content": "x"}]', "message 1 has no string 'role'"),
])
def test_bad_message_list_names_the_file(tmp_path, content, match):
    p = tmp_path / "run.json"
    p.write_text(content)
    with pytest.raises(InputError, match=match):
        list(load_paths([p]))


def test_message_list_without_labels(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps([{"role": "human", "content": "2+2?"},
                             {"role": "Orchestrator (thought)", "content": "FINAL ANSWER: 4"}]))
    [t] = list(load_paths([p]))
    assert t.final_answer == "4" and "human_failures" not in t.meta and t.task == "2+2?"
