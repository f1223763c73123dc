"""scripts/human_labels.py writes `calibrate --human` input; `--dev-labels` does so from a tuning set's dev labels."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main
from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[1]
TAU = ROOT / "tests/fixtures/data/tau_bench_airline_gpt4o/gpt-4o-airline.json"


def _human_labels():
    return load_file(ROOT / "scripts" / "human_labels.py", "human_labels")


def test_dev_labels_of_a_tuning_set_are_what_calibrate_reads(tmp_path, capsys):
    """The calibrate example ran the labeller on AgentRx, the only public set whose humans name a class and this
    project's held-out test set; the tau-bench airline dev labels (a tuning set) could not be written as input."""
    labels = tmp_path / "dev.json"
    row = {"half": "tune", "trial": 0, "quote": "", "reason": "", "confidence": "high"}
    labels.write_text(json.dumps({"labels": [
        {**row, "task_id": 1, "step": 4, "category": "Instruction/Plan Adherence Failure", "party": "agent"},
        {**row, "task_id": 3, "step": 40, "category": "Intent / Plan Misalignment", "party": "user"}]}))
    assert _human_labels().main(["--dev-labels", str(labels), str(TAU)]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(x) for x in out.splitlines()] == [
        {"trajectory_id": "gpt-4o-airline:1:0", "failure_class": "F4", "step": 4},
        {"trajectory_id": "gpt-4o-airline:3:0", "failure_class": "E", "step": 40}]  # the user failed: E
    assert err.strip() == "2 dev labels"
    (tmp_path / "dev.jsonl").write_text(out)
    assert main(["label", str(TAU), "--out", str(tmp_path / "labels.jsonl")]) == 0
    capsys.readouterr()
    assert main(["calibrate", str(tmp_path / "labels.jsonl"), "--human", str(tmp_path / "dev.jsonl")]) == 0
    assert "2 trajectories labelled by both" in capsys.readouterr().out


def test_a_dev_label_file_with_no_paths_or_of_another_shape_is_one_error_line(tmp_path, capsys):
    mod = _human_labels()
    assert mod.main(["--dev-labels", str(tmp_path / "dev.json")]) == 2
    assert capsys.readouterr().err.startswith("error: --dev-labels FILE PATH...")
    (tmp_path / "other.json").write_text("[]")
    assert mod.main(["--dev-labels", str(tmp_path / "other.json"), str(TAU)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "not a dev-label file" in err[0]
