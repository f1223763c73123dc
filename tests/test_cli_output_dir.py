"""An `--out DIR` option (report, dataset export, demo) given a file's name: `report --out x/report.md` made a
directory named report.md and wrote report.md inside it. Now one usage error says --out is a directory, before any
work; a directory whose name has no file suffix, or one that exists, is taken as before."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize("argv", [
    ["report", "RUN", "--out", "OUT/report.md"],
    ["report", "RUN", "--out", "OUT/page.HTML"],
    ["dataset", "export", "-t", "RUN", "--out", "OUT/train.jsonl"],
])
def test_a_files_name_given_for_an_output_directory_is_one_usage_error(tmp_path, capsys, argv):
    argv = [a.replace("RUN", str(tmp_path / "run")).replace("OUT", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "names a file; --out is the directory" in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_existing_directory_with_a_suffix_is_still_an_output_directory(tmp_path):
    from evoharness.cli_support import output_dir

    (tmp_path / "v1.json").mkdir()
    assert output_dir(str(tmp_path / "v1.json")) == tmp_path / "v1.json"
    assert output_dir(str(tmp_path / "report")) == tmp_path / "report"
    assert output_dir(str(tmp_path / "data.v2")) == tmp_path / "data.v2"


@pytest.mark.parametrize("under", ["t.jsonl", "loop"])
def test_an_out_under_a_file_or_a_loop_is_refused_before_any_rollout(tmp_path, monkeypatch, capsys, under):
    """`evaluate --harness h --out loop/x` ran its 12 rollouts, then said `error: loop: file exists` (found by
    scripts/fuzz_cli.py); an --out whose nearest existing parent is no directory is a usage error before any work."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    (tmp_path / "t.jsonl").write_text("")
    (tmp_path / "loop").symlink_to("loop")
    capsys.readouterr()
    assert main(["evaluate", "--harness", "h", "--env", "synthetic", "--tasks", "2", "--rollouts", "1",
                 "--out", f"{under}/x/e.json"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and "rollouts" not in err, err  # one line, no progress before it
    why = "a symlink loop (too many levels of symbolic links)" if under == "loop" else "is not a directory"
    assert f"--out: {under}/x/e.json: {under}" in err and why in err, err


@pytest.mark.parametrize("argv", [
    ["import", "t.jsonl", "--out", "h/.git/x/t.jsonl"],
    ["import", "t.jsonl", "--out", "h/.GIT/x/"],
    ["import", "t.jsonl", "--out", "git-link/t.jsonl"],  # a symlink to h/.git
    ["label", "t.jsonl", "--out", "h/.git/labels.jsonl"],
    ["dataset", "export", "-t", "t.jsonl", "--out", "h/.git/export"],
    ["init", "h/.git/h2"],
    ["pr", "main", "--harness", "h", "--remote", "origin", "--allow-unverified", "--body-out", "h/.git/body.md"],
])
def test_an_output_inside_a_git_directory_is_refused(tmp_path, monkeypatch, capsys, argv):
    """`import --out h/.git/x` wrote its trajectories into the harness repo's git directory (found by
    scripts/fuzz_cli.py); every output inside a .git (as typed, in any case, or through a symlink) is one error
    line, and nothing is written there."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "2", "--rollouts", "1",
                 "--out", "t.jsonl", "--sandbox", "inprocess"]) == 0
    (tmp_path / "git-link").symlink_to("h/.git")
    before = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "h" / ".git").rglob("*"))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and "inside a git directory (.git)" in err, err
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "h" / ".git").rglob("*")) == before


@pytest.mark.parametrize("argv", [
    ["demo", "--sandbox", "inprocess", "--out", "t.jsonl/x"],
    ["demo", "--sandbox", "inprocess", "--out", "loop/x"],
    ["dataset", "export", "-t", "t.jsonl", "--out", "t.jsonl/x"],
    ["demo", "--sandbox", "inprocess", "--out", "t.jsonl"],
    ["demo", "--sandbox", "inprocess", "--out", "loop"],
])
def test_an_out_dir_under_a_file_or_a_loop_is_one_usage_error_before_any_work(tmp_path, monkeypatch, capsys, argv):
    """`demo --out t.jsonl/x` printed `demo: a fresh demo in t.jsonl/x` and then `error: ...: not a directory`, two
    lines, and so did `demo --out full` (a link to /dev/full: `error: /dev/full: file exists`; found by
    scripts/fuzz_cli.py); an --out DIR that is, or whose nearest existing parent is, no directory is now the same
    usage error as an --out FILE's, before any work."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("")
    (tmp_path / "loop").symlink_to("loop")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and "invalid value for option --out" in err, err
    assert "name a file" not in err, err  # an --out DIR under a file was told to 'name a file in a directory'
