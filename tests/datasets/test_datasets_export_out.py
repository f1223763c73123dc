"""`dataset export --out DIR` replaces an earlier export's files, never someone else's."""

from __future__ import annotations

from evoharness.cli import main


def test_export_into_a_directory_with_a_readme_of_its_own_is_refused(shared_data, tmp_path, capsys):
    canon = tmp_path / "canon.jsonl"
    assert main(["import", str(shared_data / "tau_bench_airline_gpt4o"), "--out", str(canon)]) == 0
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project\n")
    capsys.readouterr()
    assert main(["dataset", "export", "--out", str(project), "--source", "healthy", "-t", str(canon)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: --out: {project} holds README.md, which no earlier export wrote (no export "
                   "manifest.json): export into a new or empty directory"]
    assert (project / "README.md").read_text() == "my project\n"  # was replaced by the dataset card
    assert sorted(p.name for p in project.iterdir()) == ["README.md"]
    out = tmp_path / "export"  # an earlier export's own files are replaced, as before
    for fmt in ("openai", "sharegpt"):
        assert main(["dataset", "export", "--out", str(out), "--source", "healthy", "-t", str(canon),
                     "--format", fmt]) == 0
    assert "sharegpt" in (out / "manifest.json").read_text()


def test_a_bad_filter_value_names_its_option_and_an_unreachable_queue_is_one_line(shared_data, tmp_path, capsys):
    canon = tmp_path / "canon.jsonl"
    assert main(["import", str(shared_data / "tau_bench_airline_gpt4o"), "--out", str(canon)]) == 0
    capsys.readouterr()
    for opt, value, message in (("--min-score", "nan", "Input should be a finite number from 0 to 1 (got nan)"),
                                ("--max-per-task", "0", "Input should be greater than or equal to 1 (got 0)")):
        assert main(["dataset", "export", "--out", str(tmp_path / "x"), "-t", str(canon), opt, value]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {opt}: {message}"]  # was "1 validation error for"
    (tmp_path / "adir").mkdir()
    url = f"sqlite:///{tmp_path / 'adir'}"  # a directory: SQLite cannot open it
    assert main(["dataset", "status", "--url", url]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {tmp_path / 'adir'}: not a file, so no training queue"]  # status opens, never creates
