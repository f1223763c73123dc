"""AgentRx's tau-bench runs (``data/tau_dataset/<id>.json``): auto-detected, steps line up with the messages'
own ``index``, AgentRx-style ground truth joined, and ``label_accuracy.py --data DIR`` scores such a folder."""

from __future__ import annotations

import json
import runpy
import shutil
import sys
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import crosswalk, human_label, labelled_records
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_paths

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "agentrx_tau"
FIXTURES_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"


def _agentrx_layout(tmp_path: Path, record: dict | None = None, truth: list | None = None) -> Path:
    """AgentRx's repository layout: data/tau_dataset/<id>.json, data/ground_truth/{tau_ground_truth,
    magentic_star_ids}.json."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "tau_dataset", data / "tau_dataset")
    shutil.copytree(FIXTURE / "ground_truth", data / "ground_truth")
    (data / "ground_truth" / "magentic_star_ids.json").write_text(json.dumps(["5f982798", "0a3cd321"]))
    if record is not None:
        (data / "tau_dataset" / "2.json").write_text(json.dumps(record))
    if truth is not None:
        (data / "ground_truth" / "tau_ground_truth.json").write_text(json.dumps(truth))
    return data


def test_a_tau_dataset_run_is_detected_and_keeps_its_own_step_index():
    path = FIXTURE / "tau_dataset" / "2.json"
    raw = json.loads(path.read_text())
    assert detect_format(path) == "agentrx-tau"
    [t] = list(load_paths([FIXTURE]))  # the ground truth and the licence are no traces
    assert t.id == "agentrx-tau:2" and t.task_id == "2" and t.score == 0.0 and t.rollout == 2
    assert t.meta["source_format"] == "agentrx-tau"
    assert t.meta["source_index"] == [m["index"] for m in raw["traj"]] == list(range(1, 27))
    assert t.meta["user_instruction"].startswith("You are Yusuf Rossi")
    # the human label's step_number 7 is the message whose index is 7: our step 6, the wrong count
    [label] = t.meta["human_failures"]
    assert label["step"] == 6 and t.messages[6]["index"] == 7 and "11 available" in t.messages[6]["content"]
    assert [c["function"]["name"] for c in t.messages[22]["tool_calls"]] == ["return_delivered_order_items"]


def test_agentrx_repository_layout_imports_runs_only_and_joins_the_labels(tmp_path):
    data = _agentrx_layout(tmp_path)
    [t] = list(load_paths([data]))  # tau_ground_truth.json and magentic_star_ids.json are skipped
    assert t.meta["human_failures"][0]["category"] == "Misinterpretation of Tool Output"


def test_step_numbers_follow_the_index_not_the_position(tmp_path):
    record = json.loads((FIXTURE / "tau_dataset" / "2.json").read_text())
    for i, m in enumerate(record["traj"]):
        m["index"] = 10 + 2 * i  # gaps: index 24 is message 7
    truth = [{"trajectory_id": "2", "failures": [
        {"failure_id": 1, "step_number": 24, "failure_category": "Invention of New Information", "failed_agent": "x"},
        {"failure_id": 2, "step_number": 25, "failure_category": "System Failure", "failed_agent": "x"}]}]
    [t] = list(load_paths([_agentrx_layout(tmp_path, record, truth)]))
    assert [f["step"] for f in t.meta["human_failures"]] == [7]
    assert t.meta["source_index"][7] == 24
    assert t.meta["human_failures_unplaced"] == [25]  # names no message: left out, said so
    h = human_label(t)
    assert h.step == 7 and h.failure_class == "F1"
    assert h.agent is None  # one agent, no names: no agent figure


@pytest.mark.parametrize("written", [7, "7", 7.0, " 7"])
def test_a_step_number_written_as_text_or_a_whole_float_is_that_step(tmp_path, written):
    """AgentRx's own scorers read step_number with int(): a label written "7" or 7.0 was dropped silently."""
    truth = [{"trajectory_id": "2", "failures": [
        {"failure_id": 1, "step_number": written, "failure_category": "Invalid Invocation", "failed_agent": "x"},
        {"failure_id": 2, "step_number": "seven", "failure_category": "System Failure", "failed_agent": "x"}]}]
    [t] = list(load_paths([_agentrx_layout(tmp_path, truth=truth)]))
    assert [f["step"] for f in t.meta["human_failures"]] == [6]  # index 7 is our step 6; "seven" is no step


def test_a_list_of_indexed_records_imports_each(tmp_path):
    record = json.loads((FIXTURE / "tau_dataset" / "2.json").read_text())
    p = tmp_path / "runs.json"
    p.write_text(json.dumps([record, {**record, "task_id": 3, "reward": 1.0}]))
    trajs = list(load_paths([p]))
    assert [(t.id, t.task_id, t.score) for t in trajs] == [("agentrx-tau:runs:0", "2", 0.0),
                                                          ("agentrx-tau:runs:1", "3", 1.0)]


def test_a_bad_run_names_the_file(tmp_path):
    record = json.loads((FIXTURE / "tau_dataset" / "2.json").read_text())
    record["traj"][3] = {"content": "no role", "index": 4}
    p = tmp_path / "2.json"
    p.write_text(json.dumps(record))
    with pytest.raises(InputError, match=r"2\.json.*message 3 has no string 'role'"):
        list(load_paths([p]))


@pytest.mark.parametrize(("category", "cls"), [
    ("Instruction / Plan Adherence Failure", "F4"), ("Intent / Plan Misalignment", "F4"),
    ("Intent-Plan Misalignment", "F4"), ("Invocation Failure", "F2"), ("Instruction Adherence Failure", "F4"),
    ("Misinterpretation of Tool Output / Handoff Failure", "F1"), ("invention of new information", "F1"),
    ("Inconclusive", None)])
def test_agentrx_category_spellings_crosswalk_alike(category, cls):
    assert crosswalk(category) == cls


def test_label_accuracy_scores_a_labelled_folder_given_on_the_command_line(tmp_path, capsys, monkeypatch):
    data = _agentrx_layout(tmp_path)
    assert list(labelled_records(load_paths([data]))) == ["agentrx/tau-bench"]
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--data", str(data), "--json"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    scored = out["agentrx/tau-bench"]
    assert scored["n"] == 1
    assert set(scored["labellers"]) == {"evoharness", "last message", "first tool error", "all F4",
                                        "most frequent agent"}
    assert scored["labellers"]["most frequent agent"] == {}  # one unnamed agent: no agent figure
    # the trivial labellers on the same record: the last message is step 25, the human step 6
    assert scored["labellers"]["last message"]["step_within_3"]["hits"] == 0


@pytest.mark.parametrize("make", ["missing", "unlabelled"])
def test_label_accuracy_refuses_a_folder_without_labelled_runs(tmp_path, capsys, monkeypatch, make):
    data = tmp_path / "d"
    if make == "unlabelled":
        shutil.copytree(FIXTURE / "tau_dataset", data / "tau_dataset")
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--data", str(data)])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_agentrx_magentic_layout_joins_its_ground_truth_and_is_scored_by_folder(tmp_path, capsys, monkeypatch):
    """AgentRx's repository: data/magentic_dataset/<id>.json with data/ground_truth/magentic_one_ground_truth.json
    (and the tau runs' ground truth beside it)."""
    src = FIXTURES_DATA / "agentrx_magentic_one"
    data = _agentrx_layout(tmp_path)
    shutil.copytree(src / "trajectories", data / "magentic_dataset")
    shutil.copy(src / "ground_truth.json", data / "ground_truth" / "magentic_one_ground_truth.json")
    trajs = list(load_paths([data]))
    magentic = [t for t in trajs if t.meta["source_format"] == "agentrx"]
    assert len(magentic) == 4 and sum("human_failures" in t.meta for t in magentic) == 3
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--data", str(data), "--json"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: v["n"] for k, v in out.items()} == {"agentrx/Magentic-One": 3, "agentrx/tau-bench": 1}


def test_a_list_of_tau_dataset_runs_is_read_record_by_record(tmp_path):
    """A JSON list of AgentRx tau-bench records is streamed (memory flat in their number: 10,000 records, an
    89 MB file, peaked at 445 MB read whole, 40 MB streamed): the records before a truncation are imported,
    then one error names the line where the file breaks."""
    record = json.loads((FIXTURE / "tau_dataset" / "2.json").read_text())
    path = tmp_path / "runs.json"
    text = json.dumps([{**record, "task_id": i} for i in range(3)], indent=1)
    path.write_text(text[: text.rindex('"task_id": 2')])  # cut inside the third record
    errors: list[InputError] = []
    got = [t.id for t in load_paths([path], skip_invalid=True, on_invalid=errors.append)]
    assert got == ["agentrx-tau:runs:0", "agentrx-tau:runs:1"]  # read whole, none came before the error
    assert len(errors) == 1 and errors[0].source == str(path) and errors[0].where.startswith("line ")
    with pytest.raises(InputError, match="invalid JSON"):
        list(load_paths([path]))
