"""`diagnose | label | import` of a demo or run directory read the run's trajectories.jsonl, not its records:
`diagnose demo-out/<time>` stopped with 'evidence.jsonl: empty file' (the analyst's evidence snapshot of a run
given none), and without it on 'harness_evidence.json: unrecognised format'."""

from __future__ import annotations

from evoharness.cli import main
from evoharness.traces.importers import iter_files
from tests.reports.conftest import finished_run


def test_a_demo_or_run_directory_is_read_as_its_trajectories(tmp_path, capsys):
    settings, outcome = finished_run(tmp_path / "demo")
    root, run_dir = tmp_path / "demo", outcome.run_dir
    capsys.readouterr()  # the run's own log
    (run_dir / "evidence.jsonl").write_text("")  # a run started with no --evidence
    (run_dir / "ablation.json").write_text('{"run_id": "x", "edits": []}')
    assert {p.name for p in run_dir.iterdir()} >= {"settings.json", "summary.json", "harness_evidence.json",
                                                    "trajectories.jsonl"}
    for where in (root, run_dir, root / "state"):
        assert list(iter_files([where])) == [run_dir / "trajectories.jsonl"], where
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(root), "--out", str(out)]) == 0, capsys.readouterr().err
    n = sum(1 for _ in (run_dir / "trajectories.jsonl").open())
    assert capsys.readouterr().out == f"wrote {n} labels to {out}\n"
    assert main(["diagnose", str(root)]) == 0
    # named on the command line, a record is still read (and refused) as the file it is
    assert main(["diagnose", str(run_dir / "evidence.jsonl")]) == 2
    assert capsys.readouterr().err.endswith("evidence.jsonl: empty file\n")


def test_the_same_names_elsewhere_are_still_traces(tmp_path):
    """Only beside a run's settings.json (or a demo's state/runs and harness) are these names records."""
    (tmp_path / "summary.json").write_text("[]")
    (tmp_path / "evidence.jsonl").write_text("{}\n")
    assert sorted(p.name for p in iter_files([tmp_path])) == ["evidence.jsonl", "summary.json"]
