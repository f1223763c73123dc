"""`import` and `label` replace their --out only when they succeed: bad input never costs an earlier output."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.fixture
def sample(shared_data):
    return shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


@pytest.mark.parametrize("cmd", ["import", "label"])
def test_bad_input_leaves_the_earlier_output_as_it_was(cmd, sample, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main([cmd, str(sample), "--out", str(out)]) == 0
    before = out.read_bytes()
    assert len(before.splitlines()) == 12
    truncated = tmp_path / "in" / "cut.jsonl"  # a canonical JSONL whose second line was cut short
    truncated.parent.mkdir()
    assert main(["import", str(sample), "--out", str(truncated)]) == 0
    lines = truncated.read_text().splitlines()
    truncated.write_text(f"{lines[0]}\n{lines[1][:40]}\n")
    capsys.readouterr()
    assert main([cmd, str(sample), str(truncated), "--out", str(out)]) == 2  # fails after 13 were written
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {truncated}")
    assert out.read_bytes() == before  # was emptied (import) or deleted (label)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out.jsonl"]  # no temporary left behind


def test_import_of_an_empty_directory_is_an_error_not_an_empty_output(sample, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["import", str(sample), "--out", str(out)]) == 0
    (tmp_path / "empty").mkdir()
    capsys.readouterr()
    assert main(["import", str(tmp_path / "empty"), "--out", str(out)]) == 2  # was "wrote 0 trajectories", exit 0
    assert capsys.readouterr().err.splitlines() == [f"error: {tmp_path / 'empty'}: no trajectories found"]
    assert len(out.read_text().splitlines()) == 12


def test_import_into_the_input_directory_reads_no_temporary_file(sample, tmp_path, capsys):
    (tmp_path / "t.json").write_bytes(sample.read_bytes())
    for _ in range(2):  # the second run replaces the first one's output
        assert main(["import", str(tmp_path), "--out", str(tmp_path / "all.jsonl")]) == 0
        assert "wrote 12 trajectories" in capsys.readouterr().out


@pytest.mark.parametrize(("cmd", "name"), [("import", "trajectories.jsonl"), ("label", "labels.jsonl")])
def test_out_naming_a_directory_writes_a_file_inside_it(cmd, name, sample, tmp_path, capsys):
    """`--out runs/` wrote a FILE named runs (typer's Path drops the slash); an existing directory failed."""
    assert main([cmd, str(sample), "--out", f"{tmp_path / 'new'}/"]) == 0
    assert len((tmp_path / "new" / name).read_text().splitlines()) == 12
    (tmp_path / "old").mkdir()
    assert main([cmd, str(sample), "--out", str(tmp_path / "old")]) == 0
    assert len((tmp_path / "old" / name).read_text().splitlines()) == 12
    assert f"to {tmp_path / 'old' / name}" in capsys.readouterr().out
    assert main([cmd, str(sample), "--out", ""]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith("invalid value for option --out: an empty path"), err  # (7283052)


def test_export_otel_and_rollout_out_directory(sample, tmp_path, capsys, monkeypatch):
    pytest.importorskip("opentelemetry")
    monkeypatch.chdir(tmp_path)
    assert main(["export-otel", str(sample), "--out", "spans/"]) == 0
    assert (tmp_path / "spans" / "spans.otlp.jsonl").stat().st_size > 0
    assert main(["init", "h"]) == 0
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "1", "--sandbox", "inprocess",
                 "--out", "r/"]) == 0
    assert len((tmp_path / "r" / "trajectories.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize(("name", "text", "where"), [("list.json", "[" + "1" * 5000 + "]", ":line 1"),
                                                     # one line that does not parse: one document (traces/layout.py)
                                                     ("lines.jsonl", '{"id": ' + "1" * 5000 + "}\n", ": ")])
def test_an_integer_too_long_is_one_line_without_pythons_advice(tmp_path, capsys, name, text, where):
    """'use sys.set_int_max_str_digits() to increase the limit' told a user of the CLI to call a Python API."""
    (tmp_path / name).write_text(text)
    assert main(["diagnose", str(tmp_path / name)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {tmp_path / name}{where}")
    assert line.endswith("unreadable JSON: Exceeds the limit (4300 digits) for integer string conversion: value has "
                         "5000 digits"), line


@pytest.mark.parametrize(("cmd", "name"), [("import", "trajectories.jsonl"), ("label", "labels.jsonl")])
def test_out_directory_never_replaces_its_existing_file(cmd, name, sample, tmp_path, capsys):
    """`--out RUN_DIR` silently replaced the run's own trajectories.jsonl (a directory's implied file name)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text("precious\n")
    for out in (str(run), f"{run}/"):
        assert main([cmd, str(sample), "--out", out]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("error:"), err
        assert str(run / name) in err[0] and f"--out {run / name}" in err[0]
        assert (run / name).read_text() == "precious\n"
    assert sorted(p.name for p in run.iterdir()) == [name]  # no work done: no temporary file left either
    assert main([cmd, str(sample), "--out", str(run / name)]) == 0  # explicit: replaced, as documented
    assert len((run / name).read_text().splitlines()) == 12


@pytest.mark.parametrize("cmd", ["import", "label", "export-otel"])
def test_out_dash_is_refused_not_a_file_named_dash(cmd, sample, tmp_path, capsys, monkeypatch):
    """A trace argument '-' reads standard input; '--out -' wrote a file named '-' in the working directory."""
    monkeypatch.chdir(tmp_path)
    assert main([cmd, str(sample), "--out", "-"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'-' (standard output) is not supported for --out" in err[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["dataset", "export", "--source", "all", "-t", "{t}", "--out", "-"],
                                  ["report", "run-x", "--out", "-"], ["demo", "--out", "-"]])
def test_out_dash_for_a_directory_is_refused_not_a_directory_named_dash(argv, sample, tmp_path, capsys, monkeypatch):
    """8040adf refused '--out -' for the commands that write a file; those that write a directory made one named '-'
    (dataset export wrote its data.jsonl, manifest.json, README.md into it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOHARNESS_HOME", str(tmp_path / "home"))
    assert main([a.replace("{t}", str(sample)) for a in argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'-' (standard output) is not supported for --out" in err[0], err
    assert not (tmp_path / "-").exists()
