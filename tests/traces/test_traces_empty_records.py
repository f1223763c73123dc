"""A record that holds no run (no message, no event) is kept, and said once: not imported silently (fuzz's find:
a tau-bench ``traj: []`` imported as a trajectory with no step, exit 0, no word; with reward 1 it read as Healthy)."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "tau_bench_airline_gpt4o"


def _records(tmp_path, empty: int):
    records = json.loads((SAMPLE / "gpt-4o-airline.json").read_text())[:2]
    for k in range(empty):
        records.append({**records[0], "task_id": 900 + k, "traj": []})
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(records))
    return path


def test_import_and_diagnose_say_once_how_many_records_held_no_run(tmp_path, capsys):
    path = _records(tmp_path, empty=2)
    assert main(["import", str(path), "--out", str(tmp_path / "t.jsonl")]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "no message and no event" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: 2 trajectories hold no message")
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 4  # kept, every one
    assert main(["diagnose", str(path)]) == 0
    assert sum("no message and no event" in line for line in capsys.readouterr().err.splitlines()) == 1


def test_records_that_hold_runs_get_no_such_line(tmp_path, capsys):
    path = _records(tmp_path, empty=0)
    assert main(["import", str(path), "--out", str(tmp_path / "t.jsonl")]) == 0
    assert "no message and no event" not in capsys.readouterr().err
