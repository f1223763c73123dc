"""`diagnose | label | import` of a demo or run directory read the run's trajectories.jsonl, not its records:
`diagnose demo-out/<time>` stopped with 'evidence.jsonl: empty file' (the analyst's evidence snapshot of a run
given none), and without it on 'harness_evidence.json: unrecognised format'."""

from __future__ import annotations

import pytest

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


def _just_started_run(run_dir):
    """What a run's directory holds before its first rollout is written: `evoharness serve` then `POST /runs`
    made settings.json, the evidence snapshot (empty) and the driver's lock, and no trajectories.jsonl."""
    run_dir.mkdir(parents=True)
    (run_dir / "settings.json").write_text('{"run": {"env": "synthetic"}}')
    (run_dir / "evidence.jsonl").write_text("")
    (run_dir / "run.lock").write_text("12345\n")


def test_a_run_with_no_trajectories_yet_is_said_as_such(tmp_path, capsys, monkeypatch):
    """A new user's walk through docs/service.md: `diagnose first` right after `POST /runs` said
    'error: .evoharness/runs/first/evidence.jsonl: empty file' (a run started by `evoharness run` without the
    snapshot: 'settings.json: unrecognised format'), records of the run read as its traces."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOHARNESS_HOME", ".evoharness")  # the default home, as the user had it
    _just_started_run(tmp_path / ".evoharness" / "runs" / "first")
    for argv in (["diagnose", "first"], ["diagnose", ".evoharness/runs/first"],
                 ["label", "first", "--out", "labels.jsonl"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert "first: a run that has written no trajectories yet" in err, err
    (tmp_path / ".evoharness" / "runs" / "first" / "run.lock").unlink()  # no driver's lock: a plain directory
    assert main(["diagnose", ".evoharness/runs/first"]) == 2
    assert "evidence.jsonl: empty file" in capsys.readouterr().err  # its files read as traces, as before


def test_every_command_that_takes_a_run_says_a_run_with_no_trajectories_is_one(tmp_path, capsys, monkeypatch):
    """`export-otel RUN_DIR` of a run that has rolled nothing out said 'not a run directory (no settings.json, ...)'
    of a directory holding settings.json, where `dataset export -t` said what it is (2026-12-07, the review helper):
    the three commands and the scan decide it in one place now (``run_dirs.run_trajectories``), in the same words."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOHARNESS_HOME", ".evoharness")
    _just_started_run(tmp_path / ".evoharness" / "runs" / "first")
    for argv in (["export-otel", ".evoharness/runs/first", "--out", "spans.jsonl"],
                 ["export-otel", "first", "--out", "spans.jsonl"],
                 ["dataset", "export", "-t", "first", "--source", "all", "--out", "sft"],
                 ["diagnose", "first"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a run that has written no trajectories yet (no trajectories.jsonl): try " \
            "again once its first rollouts are done" in err, (argv, err)
    assert not (tmp_path / "spans.jsonl").exists() and not (tmp_path / "sft").exists()


def test_a_scan_over_a_run_not_yet_rolled_out_reads_the_others(tmp_path, capsys):
    settings, outcome = finished_run(tmp_path / "home")
    runs = outcome.run_dir.parent
    _just_started_run(runs / "run-new")
    assert list(iter_files([runs])) == [outcome.run_dir / "trajectories.jsonl"]


def test_a_resumed_demo_is_read_as_its_latest_run_as_report_reads_it(tmp_path, capsys):
    """A new user's walk: after the demo's own next command, `demo --resume --out DIR`, `diagnose DIR` read both
    runs' trajectories (1,868: 'warning: 160 of 1868 trajectories have the id of an earlier one', the held-out
    rollouts both runs made of one commit), while `report DIR` and `export-otel DIR` read the run summary.json
    names (428). docs/cli.md: a demo directory 'reads the run's trajectories.jsonl'."""
    import json
    import shutil

    settings, outcome = finished_run(tmp_path / "demo")
    root, first = tmp_path / "demo", outcome.run_dir
    capsys.readouterr()
    later = first.parent / "run-later"  # what `demo --resume` adds: a second run; summary.json names it
    shutil.copytree(first, later)
    with (later / "trajectories.jsonl").open() as f:
        kept = [next(f) for _ in range(3)]
    (later / "trajectories.jsonl").write_text("".join(kept))
    summary = json.loads((root / "summary.json").read_text())
    (root / "summary.json").write_text(json.dumps({**summary, "run_id": "run-later"}))
    assert list(iter_files([root])) == [later / "trajectories.jsonl"]
    assert main(["diagnose", str(root), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n"] == 3 and "earlier one" not in err, err
    # named under state/ (or state/runs), every run there is read, as any folder of runs is
    assert list(iter_files([root / "state" / "runs"])) == [first / "trajectories.jsonl", later / "trajectories.jsonl"]


def test_labels_beside_their_trajectories_are_not_read_as_traces(shared_data, tmp_path, capsys):
    """docs/datasets.md's `import --out DIR` then `label --out DIR` put labels.jsonl beside trajectories.jsonl (the
    pair `dataset export -t DIR/trajectories.jsonl` reads together); `diagnose DIR` then stopped with
    'DIR/labels.jsonl:line 1: unrecognised JSONL record (formats: ...)'. Named on its own, a labels file is said to
    be one, not an unknown format."""
    import json

    d = tmp_path / "d"
    d.mkdir()
    assert main(["import", str(shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"), "--out", str(d)]) == 0
    assert main(["label", str(d / "trajectories.jsonl"), "--out", str(d)]) == 0
    assert sorted(p.name for p in d.iterdir()) == ["labels.jsonl", "trajectories.jsonl"]
    assert list(iter_files([d])) == [d / "trajectories.jsonl"]
    capsys.readouterr()
    assert main(["diagnose", str(d), "--json"]) == 0
    n = sum(1 for _ in (d / "trajectories.jsonl").open())
    assert json.loads(capsys.readouterr().out)["n"] == n > 0
    assert main(["diagnose", str(d / "labels.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {d / 'labels.jsonl'}:line 1: a labels file"), err
    assert "unrecognised" not in err
    (d / "trajectories.jsonl").unlink()  # labels alone in a folder: read, and said to be labels
    assert main(["diagnose", str(d)]) == 2
    assert "a labels file" in capsys.readouterr().err


@pytest.mark.parametrize(("out", "written"), [("", "labels.jsonl"), ("judge.jsonl", "judge.jsonl")])
def test_labels_written_beside_the_traces_they_label_are_not_read_as_traces(out, written, shared_data, tmp_path,
                                                                          capsys):
    """`label DIR --out DIR` writes DIR/labels.jsonl beside the trace files it labelled (a directory --out means a file
    inside it); `diagnose DIR`, `import DIR` and `label DIR` again then stopped: 'DIR/labels.jsonl:line 1: a labels
    file (what `evoharness label` writes), not traces'. Labels were left out only beside a trajectories.jsonl. A labels
    file of another name (`label DIR --out DIR/judge.jsonl`) was stopped on until the twenty-second session. Named, a
    labels file is still that error."""
    import json
    import shutil

    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    shutil.copy(shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json", d / "sub" / "runs.json")
    assert main(["label", str(d), "--out", str(d / out)]) == 0
    assert sorted(p.name for p in d.iterdir()) == [written, "sub"]
    assert list(iter_files([d])) == [d / "sub" / "runs.json"]
    capsys.readouterr()
    assert main(["diagnose", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 12
    assert main(["import", str(d), "--out", str(tmp_path / "t.jsonl")]) == 0
    assert main(["label", str(d), "--out", str(tmp_path / "again.jsonl")]) == 0
    assert (tmp_path / "again.jsonl").read_bytes() == (d / written).read_bytes()
    capsys.readouterr()
    assert main(["diagnose", str(d / written)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {d / written}:line 1: a labels file")
