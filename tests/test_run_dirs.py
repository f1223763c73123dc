"""`diagnose` and `export-otel` take a run id as `report` does (``run_dirs.run_dir_of``): before, they took a run
directory only, and `diagnose run-abc` said 'run-abc: no such file or directory'."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evoharness.cli import main
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.store import write_trajectories


def _home_with_a_run(tmp_path):
    """``tmp_path/home`` holding run ``run-abc`` (its settings, trajectories and summary), the cwd elsewhere."""
    run = tmp_path / "home" / "runs" / "run-abc"
    run.mkdir(parents=True)
    (run / "settings.json").write_text("{}")
    traces = [TraceBuilder("t1").user("hi").deliver("hello").build(score=1.0, harness_commit="c0ffee"),
              TraceBuilder("t2").user("hi").build(score=0.0, harness_commit="c0ffee")]
    write_trajectories(run / "trajectories.jsonl", traces)
    (run / "summary.json").write_text(json.dumps({"merged": [], "rejected": [
        {"branch": "candidate/r1-x", "commit": "c0ffee", "reason": "no gain"}]}))
    (tmp_path / "cwd").mkdir()
    return ["--set", f"home={tmp_path / 'home'}"], run


def test_diagnose_takes_a_run_id_and_reads_what_its_directory_gives(tmp_path, capsys, monkeypatch):
    home, run = _home_with_a_run(tmp_path)
    monkeypatch.chdir(tmp_path / "cwd")
    assert main([*home, "diagnose", str(run), "--json"]) == 0
    by_dir = capsys.readouterr().out
    assert main([*home, "diagnose", "run-abc", "--json"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == by_dir and json.loads(by_dir)["n"] == 2


def test_export_otel_takes_a_run_id_and_writes_what_its_directory_gives(tmp_path, capsys, monkeypatch):
    home, run = _home_with_a_run(tmp_path)
    monkeypatch.chdir(tmp_path / "cwd")
    assert main([*home, "export-otel", str(run), "-o", "by-dir.jsonl"]) == 0
    assert main([*home, "export-otel", "run-abc", "-o", "by-id.jsonl"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines()[-1] == "exported 2 trajectories as 2 traces to by-id.jsonl"
    spans = [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
             for line in (tmp_path / "cwd" / "by-id.jsonl").read_text().splitlines()]
    attrs = {a["key"]: next(iter(a["value"].values())) for s in spans for sp in s for a in sp["attributes"]}
    assert attrs["evoharness.verdict"] == "rejected"  # the run's summary.json was read, as for its directory
    assert len(spans) == len((tmp_path / "cwd" / "by-dir.jsonl").read_text().splitlines())


def test_an_unknown_run_id_is_one_error_line_naming_the_home_and_its_runs(tmp_path, capsys, monkeypatch):
    home, _ = _home_with_a_run(tmp_path)
    monkeypatch.chdir(tmp_path / "cwd")
    runs = tmp_path / "home" / "runs"
    for argv in (["diagnose", "run-nope"], ["export-otel", "run-nope", "-o", "out.jsonl"]):
        assert main([*home, *argv]) == 2, argv
        assert capsys.readouterr().err.splitlines() == [
            f"error: run-nope: no such file or directory, nor a run of that id under {runs} (known: run-abc)"], argv
    assert not (tmp_path / "cwd" / "out.jsonl").exists()


def test_a_bare_name_that_is_a_run_under_home_and_traces_here_is_ambiguous_as_report_says(tmp_path, capsys,
                                                                                           monkeypatch):
    """`diagnose run-abc` beside a trace file ./run-abc read the file and passed over the run under the home, where
    `report` calls a name that is both ambiguous: one error line now asks for a path, and the path reads."""
    home, run = _home_with_a_run(tmp_path)
    cwd = tmp_path / "cwd"
    monkeypatch.chdir(cwd)
    write_trajectories(cwd / "run-abc", [TraceBuilder("here").user("hi").deliver("x").build(score=1.0)])
    for argv in (["diagnose", "run-abc", "--json"], ["export-otel", "run-abc", "-o", "out.jsonl"]):
        assert main([*home, *argv]) == 2, argv
        assert capsys.readouterr().err.splitlines() == [
            f"error: run-abc: ambiguous: both {run} (a run under the home) and ./run-abc (a file here); name one by "
            f"its path ({run} or ./run-abc)"], argv
    assert not (cwd / "out.jsonl").exists()
    assert main([*home, "diagnose", "./run-abc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 1
    assert main([*home, "diagnose", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 2
    (cwd / "run-abc").unlink()
    (cwd / "run-abc").mkdir()  # a directory here is a rival too: diagnose reads a directory of traces
    assert main([*home, "diagnose", "run-abc"]) == 2
    assert "(a directory here)" in capsys.readouterr().err


def test_a_bare_name_read_from_the_homes_runs_directory_is_the_one_run(tmp_path, capsys, monkeypatch):
    home, _ = _home_with_a_run(tmp_path)
    monkeypatch.chdir(tmp_path / "home" / "runs")  # ./run-abc is the run under the home: no rival
    assert main([*home, "diagnose", "run-abc", "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["n"] == 2


def test_label_takes_a_run_id_and_reads_what_its_directory_gives(tmp_path, capsys, monkeypatch):
    """`label run-abc` said 'no such file or directory' where `diagnose run-abc` read the run; by the same rule, a
    name that is also a file here is ambiguous."""
    home, run = _home_with_a_run(tmp_path)
    cwd = tmp_path / "cwd"
    monkeypatch.chdir(cwd)
    assert main([*home, "label", str(run), "-o", "by-dir.jsonl"]) == 0
    assert main([*home, "label", "run-abc", "-o", "by-id.jsonl"]) == 0, capsys.readouterr().err
    by_id = (cwd / "by-id.jsonl").read_text()
    assert by_id == (cwd / "by-dir.jsonl").read_text() and len(by_id.splitlines()) == 2
    write_trajectories(cwd / "run-abc", [TraceBuilder("here").user("hi").deliver("x").build(score=1.0)])
    capsys.readouterr()
    assert main([*home, "label", "run-abc", "-o", "out.jsonl"]) == 2
    assert capsys.readouterr().err.startswith("error: run-abc: ambiguous: ")
    assert not (cwd / "out.jsonl").exists()
    assert main([*home, "label", "./run-abc", "-o", "out.jsonl"]) == 0
    assert len((cwd / "out.jsonl").read_text().splitlines()) == 1


def test_import_refuses_a_run_id_naming_the_runs_file_and_still_reads_no_settings_for_paths(tmp_path, capsys,
                                                                                           monkeypatch):
    """`import` takes paths only (a run's trajectories are canonical already; it reads no settings): `import run-abc`
    said 'run-abc: no such file or directory' where `diagnose run-abc` read the run. Now it says it is a run id and
    names the run's trajectories.jsonl, which `import` takes; a path still imports with no settings read."""
    home, run = _home_with_a_run(tmp_path)
    cwd = tmp_path / "cwd"
    monkeypatch.chdir(cwd)
    assert main([*home, "import", "run-abc", "-o", "out.jsonl"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: run-abc: a run id; import reads paths, never a run id (a run's trajectories are canonical already: "
        f"{run / 'trajectories.jsonl'}; give that path to set --split or join runs)"]
    assert not (cwd / "out.jsonl").exists()
    assert main([*home, "import", str(run / "trajectories.jsonl"), "-o", "out.jsonl"]) == 0
    assert len((cwd / "out.jsonl").read_text().splitlines()) == 2
    for argv in (["run-nope"], ["./run-abc"]):  # no run of that id; written as a path: the importer's own line
        assert main([*home, "import", *argv, "-o", "x.jsonl"]) == 2
        [err] = capsys.readouterr().err.splitlines()
        assert err.startswith("error: ") and err.endswith(f"{argv[0]}: no such file or directory")  # as typed
    (cwd / "evoharness.toml").write_text("[run\n")  # broken: a path is imported without reading it
    (cwd / "traces.jsonl").write_text((run / "trajectories.jsonl").read_text())
    assert main(["import", "traces.jsonl", "-o", "again.jsonl"]) == 0, capsys.readouterr().err


def _copied_demo(tmp_path):
    """A demo directory (``finished_run``) copied to ``tmp_path/copy``, the copy's run cut to 3 trajectories so
    the two runs read differently; the original stays where it was, as summary.json's ``files.run_dir`` records."""
    from tests.reports.conftest import finished_run

    settings, outcome = finished_run(tmp_path / "demo")
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "demo", copy)
    run = copy / "state" / "runs" / outcome.run_id
    kept = (run / "trajectories.jsonl").read_text().splitlines(keepends=True)[:3]
    (run / "trajectories.jsonl").write_text("".join(kept))
    return copy, run, outcome.run_dir


_EVERY_COMMAND = (["import", "copy", "-o", "i.jsonl"], ["diagnose", "copy", "--json"],
                  ["label", "copy", "-o", "l.jsonl"], ["report", "copy", "--out", "rep"],
                  ["export-otel", "copy", "-o", "o.jsonl"])


def test_a_copied_demo_directory_is_the_copys_run_in_every_command(tmp_path, capsys, monkeypatch):
    """import / diagnose / label read a demo directory's run through the importer, report and export-otel through
    run_dirs, and each had its own rule: report fell back to summary.json's absolute files.run_dir (the original's
    run, perhaps gone or another machine's) when the copy's own was missing, import / diagnose / label walked the
    whole directory on a bad summary.json. One rule now (``run_dirs.demo_run``): the copy's own run, or one
    error line naming the copy, the same in every command."""
    copy, run, original = _copied_demo(tmp_path)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    for argv in _EVERY_COMMAND:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    out = capsys.readouterr().out
    assert "wrote 3 trajectories" in out and "wrote 3 labels" in out and "exported 3 trajectories" in out, out
    assert len((tmp_path / "i.jsonl").read_text().splitlines()) == 3
    assert str(original) not in (tmp_path / "rep" / "report.md").read_text()
    # the copy's run gone (a partial copy), the original still there: every command says so, none reads it
    shutil.rmtree(run)
    for argv in _EVERY_COMMAND:
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.splitlines() == [
            f"error: copy: summary.json names run {run.name!r} but its run directory is gone "
            f"(no {Path('copy') / 'state' / 'runs' / run.name})"], argv
    # a summary.json that cannot be read: one error line naming it in every command, no run guessed
    (copy / "summary.json").write_text("{")
    for argv in _EVERY_COMMAND:
        assert main(argv) == 2, argv
        [err] = capsys.readouterr().err.splitlines()
        assert err.startswith(f"error: {Path('copy') / 'summary.json'}: unreadable: "), (argv, err)
