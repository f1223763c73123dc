"""AgentRx Magentic-One message lists: auto-detected, roles become agents, human labels joined."""

from __future__ import annotations

import json
import runpy
import shutil
import sys
from pathlib import Path

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


def test_an_ag2_chat_history_keeps_who_spoke(tmp_path):
    # AG2 / AutoGen 0.2's ChatResult.chat_history: `role` is the initiator's view (the other agent's turns are "user"),
    # `name` who spoke. Before, the names were dropped: the assistant's code was the "task" and a user message, the
    # user_proxy's run report an agent named "assistant"
    p = tmp_path / "chat_history.json"
    p.write_text(json.dumps([
        {"content": "How many athletes did the smallest team send?", "role": "assistant", "name": "user_proxy"},
        {"content": "```python\nprint(team_sizes('1928.csv'))\n```", "role": "user", "name": "assistant"},
        {"content": "exitcode: 1 (execution failed)\nCode output: NameError", "role": "assistant",
         "name": "user_proxy"},
        {"content": "The smallest team sent 1 athlete. TERMINATE", "role": "user", "name": "assistant"}]))
    [t] = list(load_paths([p]))
    assert [m.get("name") for m in t.messages if m["role"] == "assistant"] == [
        "user_proxy", "assistant", "user_proxy", "assistant"]
    assert len(t.messages) == 4
    assert t.task == "How many athletes did the smallest team send?"
    assert t.meta["failure_only"] is False  # nothing in a chat history says the run failed
    from evoharness.diagnosis.labeller import Labeller
    t.meta["failure_only"] = True  # known to have failed
    lab = Labeller().label(t)  # read as a multi-agent log: the code whose run failed, by its author
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 1, "assistant")


SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"
GOOD_TRUTH = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "agentrx_magentic_one" / "ground_truth.json"


def _broken_truth(tmp_path: Path, how: str, monkeypatch) -> Path:
    """The vendored Magentic-One runs with their ground truth broken ``how``."""
    root = tmp_path / "m"
    shutil.copytree(GOOD_TRUTH.parent, root)
    gt = root / "ground_truth.json"
    text = GOOD_TRUTH.read_text()
    if how == "truncated":
        gt.write_text(text[:500])
    elif how == "an object":
        gt.write_text(json.dumps({"trajectories": json.loads(text)}))
    elif how == "records of another shape":
        gt.write_text(json.dumps([{"id": r["trajectory_id"], "labels": r["failures"]} for r in json.loads(text)]))
    elif how == "permission denied":  # chmod 000 does not stop root: the reads fail as they would for a user
        real_open, real_read = Path.open, Path.read_bytes

        def denied(real):
            def read(self, *a, **kw):
                if self.name == "ground_truth.json" and self.parent == root:
                    raise PermissionError(13, "Permission denied", str(self))
                return real(self, *a, **kw)
            return read

        monkeypatch.setattr(Path, "open", denied(real_open))
        monkeypatch.setattr(Path, "read_bytes", denied(real_read))
    return root


@pytest.mark.parametrize("how, says", [
    ("truncated", "is not valid JSON"), ("an object", "is an object, not a list"),
    ("records of another shape", "3 of 3 records"), ("permission denied", "unreadable (Permission denied)")])
def test_a_broken_ground_truth_is_one_warning_naming_it_and_label_accuracy_refuses_it(
        tmp_path, capsys, monkeypatch, how, says):
    """Was: no labels and not a word (label_accuracy then scored the folder without those runs, or said it held
    no labelled runs)."""
    from evoharness.cli import main

    root = _broken_truth(tmp_path, how, monkeypatch)
    trajs = list(load_paths([root]))
    assert len(trajs) == 4 and not any("human_failures" in t.meta for t in trajs)
    capsys.readouterr()
    for argv in (["import", str(root), "--out", str(tmp_path / "t.jsonl")],
                 ["label", str(root), "--out", str(tmp_path / "l.jsonl")]):
        assert main(argv) == 0
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"warning: {root / 'ground_truth.json'}: AgentRx ground truth ") and says in line
        assert line.endswith("(4 trajectories)")
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--data", str(root), "--json"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and err.startswith(f"error: {root / 'ground_truth.json'}: ")


def test_a_good_ground_truth_gives_no_warning(tmp_path, capsys):
    from evoharness.cli import main

    root = tmp_path / "m"
    shutil.copytree(GOOD_TRUTH.parent, root)
    assert main(["import", str(root), "--out", str(tmp_path / "t.jsonl")]) == 0
    assert capsys.readouterr().err == ""
    assert sum("human_failures" in t.meta and "import_warnings" not in t.meta for t in load_paths([root])) == 3


def test_a_ground_truth_rewritten_in_place_is_read_again(tmp_path):
    """A long-lived process (the service, a run loop) remembered a ground truth by its path alone: a file fixed
    or rewritten later kept giving the old labels (or none) until the process restarted."""
    root = tmp_path / "m"
    shutil.copytree(GOOD_TRUTH.parent, root)
    gt = root / "ground_truth.json"
    good = gt.read_text()
    gt.write_text("[")
    assert not any("human_failures" in t.meta for t in load_paths([root]))
    gt.write_text(good)
    assert sum("human_failures" in t.meta for t in load_paths([root])) == 3
