"""`evoharness demo`: a fresh directory per run, --resume to continue, next commands that run as printed."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from evoharness.cli import main


@pytest.fixture
def demos(monkeypatch, tmp_path):
    """run_demo replaced by a stand-in that makes the harness directory and records where it ran."""
    calls: list[Path] = []

    def fake_run_demo(settings, out, env="synthetic", rounds=3, sandbox="bwrap"):
        (out / "harness" / ".git").mkdir(parents=True, exist_ok=True)
        calls.append(out)
        return SimpleNamespace(interrupted=[], done=False)

    monkeypatch.setattr("evoharness.graph.demo.run_demo", fake_run_demo)
    monkeypatch.chdir(tmp_path)
    return calls


def test_each_demo_gets_a_fresh_directory_and_resume_continues_the_latest(demos, capsys):
    assert main(["demo"]) == 0 and main(["demo"]) == 0
    first, second = demos
    assert first != second and first.parent == second.parent == Path("demo-out")
    assert "a fresh demo in" in capsys.readouterr().err
    assert main(["demo", "--resume"]) == 0
    assert demos[-1] == max(demos[:2], key=lambda d: d.stat().st_mtime)
    assert f"continuing {demos[-1]}" in capsys.readouterr().err


def test_explicit_out_is_never_reused_silently(demos, capsys):
    assert main(["demo", "--out", "mine"]) == 0
    capsys.readouterr()
    assert main(["demo", "--out", "mine"]) == 2
    err = capsys.readouterr().err
    assert err == "error: mine: already holds a demo: add --resume to continue it, or give another --out\n"
    assert main(["demo", "--out", "mine", "--resume"]) == 0 and demos == [Path("mine"), Path("mine")]
    assert main(["demo", "--resume", "--out", "other"]) == 2
    assert "no demo to resume here" in capsys.readouterr().err


@pytest.mark.parametrize("mine", ["summary.json", "state"])
def test_out_holding_what_a_demo_writes_is_refused_not_replaced(demos, capsys, tmp_path, mine):
    # a directory with no demo in it but a summary.json (or state/) of its own: the demo copied its summary over
    # that file (and ran its home in that state/)
    (tmp_path / "proj").mkdir()
    if mine == "state":
        (tmp_path / "proj" / "state").mkdir()
    else:
        (tmp_path / "proj" / "summary.json").write_text('{"mine": true}')
    assert main(["demo", "--out", "proj"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"error: proj: holds {mine}, which a demo writes, and no demo: give an empty or new --out "
                    "(or --resume for a demo's directory)")
    assert demos == [] and not (tmp_path / "proj" / "harness").exists()
    if mine == "summary.json":
        assert (tmp_path / "proj" / "summary.json").read_text() == '{"mine": true}'
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("kept")  # a directory with other files is fine
    assert main(["demo", "--out", "other"]) == 0 and demos == [Path("other")]


def test_out_that_is_a_harness_repo_is_refused_and_left_as_it_was(demos, capsys, tmp_path):
    """README's walk makes `harness` with `evoharness init harness`; `demo --out harness` then made a second harness
    at harness/harness and its run's state/ and summary.json in the first's work tree, and evolved neither."""
    assert main(["init", "harness"]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in (tmp_path / "harness").iterdir())
    assert main(["demo", "--out", "harness"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: harness: is a git repository (a harness repo?)")
    assert line.endswith("(to evolve this harness: `evoharness run --set run.harness=harness`)")
    assert demos == [] and sorted(p.name for p in (tmp_path / "harness").iterdir()) == before


def _started_from_a_venv(folder: str, tmp_path, monkeypatch) -> None:
    """The CLI started as ``FOLDER/bin/evoharness`` of a virtualenv (an ``activate`` beside it), not on PATH."""
    venv_bin = tmp_path / folder / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "activate").write_text("")
    (venv_bin / "evoharness").write_text("")
    monkeypatch.setattr(sys, "argv", [f"{folder}/bin/evoharness", "demo", "--out", "d"])
    monkeypatch.setenv("PATH", "/nonexistent")


def test_next_commands_use_the_path_the_cli_was_started_by(demos, capsys, monkeypatch, tmp_path):
    _started_from_a_venv(".venv", tmp_path, monkeypatch)
    assert main(["demo", "--out", "d"]) == 0
    out = capsys.readouterr().out
    assert "  .venv/bin/evoharness report d --out d/report" in out
    assert "  .venv/bin/evoharness demo --resume --out d" in out
    assert "source .venv/bin/activate" in out


def test_the_command_itself_runs_as_printed_from_a_venv_the_shell_would_split(demos, capsys, monkeypatch, tmp_path):
    """A virtualenv in a folder with a space (or a `&`): the next commands and the activate hint named its script
    bare, so pasted they ran `my` (a8c2c16 quoted the arguments, not the command)."""
    import shlex

    _started_from_a_venv("my venv & co", tmp_path, monkeypatch)
    assert main(["demo", "--out", "d"]) == 0
    out = capsys.readouterr().out
    lines = [line.split("#")[0].strip() for line in out.splitlines() if line.startswith("  ")]
    assert [shlex.split(line) for line in lines[:3]] == [
        ["my venv & co/bin/evoharness", "report", "d", "--out", "d/report"],
        ["my venv & co/bin/evoharness", "review", "--harness", "d/harness"],
        ["my venv & co/bin/evoharness", "demo", "--resume", "--out", "d"]]
    hint = lines[3].split("`")[1]  # (or run `source PATH` once, ...)
    assert shlex.split(hint) == ["source", "my venv & co/bin/activate"]


def test_bad_values_leave_no_demo_directory_behind(demos, capsys, tmp_path):
    for opts, message in ((["--env", "bogus"], "error: env: unknown environment 'bogus'"),
                          (["--env", "agentdojo:nope"], "error: env: unknown AgentDojo suite 'nope'"),
                          (["--rounds", "0"], "error: --rounds must be 1 to 100, not 0"),
                          (["--rounds", "101"], "error: --rounds must be 1 to 100, not 101")):
        assert main(["demo", *opts]) == 2, opts
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(message), line
    assert demos == [] and not (tmp_path / "demo-out").exists()  # nothing for --resume to take up


def test_next_commands_run_as_printed_for_an_out_the_shell_would_split(demos, capsys, monkeypatch):
    """`demo --out "my demo & co"`: the next commands printed the path bare, so pasted they ran `report my` and sent
    `demo & co/report` to the shell -- README: "printing the next commands as they run in your shell"."""
    import shlex

    monkeypatch.setattr(sys, "argv", ["pytest"])  # an embedding program: the command is `evoharness`
    out = "my demo & co"
    assert main(["demo", "--out", out]) == 0
    lines = [line.split("#")[0].strip() for line in capsys.readouterr().out.splitlines()
             if line.startswith("  ") and not line.startswith("  (")]
    assert [shlex.split(line) for line in lines] == [
        ["evoharness", "report", out, "--out", f"{out}/report"],
        ["evoharness", "review", "--harness", f"{out}/harness"],
        ["evoharness", "demo", "--resume", "--out", out]]
