"""A dev label that cannot be scored -- no such run among the runs read, a step past its run's end, a SWE run not
scored unresolved -- was left out of its set unsaid, so a set was scored on fewer records than its file holds. Now
each is one `warning:` line and the output counts them per file."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import dev_labelled_records, read_dev_labels, read_swe_dev_labels, swe_dev_records
from evoharness.traces.models import Trajectory

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data"
MSGS = [{"role": "system", "content": "p"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "bye"}]
ROW = {"quote": "q", "reason": "r", "confidence": "high", "category": "Invalid Invocation", "party": "agent"}


def _file(tmp_path, rows, name="dev.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"about": "dev labels, not human labels", "labels": rows}))
    return p


def test_tau_dev_labels_without_a_run_or_past_its_end_are_said(tmp_path):
    labels = read_dev_labels(_file(tmp_path, [
        {**ROW, "task_id": 1, "trial": 0, "half": "tune", "step": 2},
        {**ROW, "task_id": 1, "trial": 1, "half": "test", "step": 4},  # past the end: 4 messages, steps 0..3
        {**ROW, "task_id": 7, "trial": 0, "half": "test2", "step": 1}]))  # no such run
    runs = [Trajectory(id=f"f:{k}:{r}", task_id=str(k), rollout=r, messages=MSGS) for k, r in [(1, 0), (1, 1), (2, 0)]]
    dropped: list[str] = []
    sets = dev_labelled_records(labels, runs, dropped)
    assert {k: [t.id for t, _ in v] for k, v in sets.items()} == {"tau-airline-dev/tune": ["f:1:0"]}
    assert dropped == ["task 1 trial 1 (test): step 4 is past the run's end (4 messages)",
                       "task 7 trial 0 (test2): no such run among the runs read"]
    assert dev_labelled_records(labels, runs) == sets  # the list is optional


def test_swe_dev_labels_of_a_resolved_missing_or_too_short_run_are_said(tmp_path):
    labels = read_swe_dev_labels(_file(tmp_path, [
        {**ROW, "instance_id": "a__a-1", "half": "tune", "step": 2},
        {**ROW, "instance_id": "b__b-2", "half": "tune", "step": 2},  # its run is resolved
        {**ROW, "instance_id": "c__c-3", "half": "test", "step": 9},  # past the end
        {**ROW, "instance_id": "d__d-4", "half": "test", "step": 1}]))  # no such run
    runs = [Trajectory(id=i, task_id=i, messages=MSGS, score=s) for i, s in
            [("a__a-1", 0.0), ("b__b-2", 1.0), ("c__c-3", 0.0)]]
    dropped: list[str] = []
    sets = swe_dev_records(labels, runs, dropped)
    assert {k: [t.id for t, _ in v] for k, v in sets.items()} == {"swe-mini-dev/tune": ["a__a-1"]}
    assert dropped == ["b__b-2 (tune): its run is not scored unresolved (score 1.0)",
                       "c__c-3 (test): step 9 is past the run's end (4 messages)",
                       "d__d-4 (test): no such run among the runs read"]


def test_the_script_warns_once_per_left_out_label_and_counts_them(tmp_path, capsys, monkeypatch):
    if not (DATA / "who_and_when").is_dir():
        pytest.skip(f"public data not found under {DATA.resolve()} (CI lays shared/ beside the clone)")
    real = json.loads((ROOT / "benchmarks" / "data" / "tau_airline_dev_labels.json").read_text())["labels"]
    two = [r for r in real if r["half"] == "tune"][:2]
    rows = [two[0], {**two[1], "step": 10_000}, {**two[0], "task_id": 99_999}]
    path = _file(tmp_path, rows)
    script = ROOT / "benchmarks" / "label_accuracy.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--dev-labels", str(path), "--swe-dev-labels", "",
                                      "--swe-fresh-labels", "", "--swe-blind2-labels", "",
                                      "--only", "tau-airline-dev/tune"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 0
    out, err = capsys.readouterr()
    warned = [ln for ln in err.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 2
    assert warned[0].startswith(f"warning: {path}: dev label of task {two[1]['task_id']} trial {two[1]['trial']} "
                                "(tune): step 10000 is past the run's end (")
    assert warned[0].endswith(" messages); left out")
    assert warned[1] == (f"warning: {path}: dev label of task 99999 trial {two[0]['trial']} (tune): no such run "
                         "among the runs read; left out")
    assert "| tau-airline-dev/tune (n=1) | evoharness |" in out
    last = out.rstrip().splitlines()[-1]
    assert last == "dev labels dev.json: 1 of 3 joined to a run, 2 left out (warnings on stderr)"
