"""Ids and revisions a user types (a run id, a candidate branch, a git revision) that hold a line break, an escape
or another control character: the error is still one `error:` line, exit 2, never a traceback (found by fuzzing the
entry points with hostile ids)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.cli import main

HOSTILE = ["main\nerror: forged second line", "run\x1b[2J", "a\u2028b", "a\rb"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("h") / "harness"
    assert main(["init", str(root)]) == 0
    return root


def _commands(harness: Path, value: str, out: Path) -> list[list[str]]:
    return [
        ["show", value, "--harness", str(harness)],
        ["pr", value, "--harness", str(harness), "--remote", "origin"],
        ["report", value, "--out", str(out / "rep")],
        ["ablate", value],
        ["evaluate", "--run", value],
        ["evaluate", "--harness", str(harness), "--baseline", value, "--rollouts", "1", "--tasks", "1",
         "--out", str(out / "e.json")],
        ["rollout", "--harness", str(harness), "--env", "synthetic", "--commit", value, "--tasks", "1",
         "--rollouts", "1", "--out", str(out / "r.jsonl"), "--sandbox", "inprocess"],
    ]


@pytest.mark.parametrize("value", HOSTILE, ids=["newline", "escape", "line-separator", "carriage-return"])
def test_an_id_with_a_control_character_is_named_in_one_error_line(harness, tmp_path, monkeypatch, capsys, value):
    """`show 'main<newline>foo'` printed `error: main` and `foo: no such candidate` on two lines (a second line of
    the user's choosing, `error: ...` included); an escape sequence reached the terminal as it was."""
    monkeypatch.chdir(tmp_path)
    for argv in _commands(harness, value, tmp_path):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and err.endswith("\n"), (argv, err)
        assert not any(ch in err[:-1] for ch in "\n\r\x1b\u2028"), (argv, err)
        assert ascii(value)[1:-1].split("\\")[1][:3] in err, (argv, err)  # the character is shown escaped


@pytest.mark.parametrize(("rev", "export_too"), [("@{-1}", True), ("main@{1}", True), ("a\x00b", True),
                                                ("HEAD@{yesterday}", False)])  # which git itself reads
def test_a_revision_git_python_cannot_read_is_one_error_line(harness, tmp_path, monkeypatch, capsys, rev,
                                                             export_too):
    """`rollout --commit @{-1}` was an IndexError traceback (`main@{1}` too; `HEAD@{yesterday}` NotImplementedError),
    and `dataset export --harness DIR@REV` with a NUL in REV a ValueError (embedded null byte) traceback."""
    monkeypatch.chdir(tmp_path)
    traces = tmp_path / "t.jsonl"
    assert main(["rollout", "--harness", str(harness), "--env", "synthetic", "--tasks", "1", "--rollouts", "1",
                 "--out", str(traces), "--sandbox", "inprocess"]) == 0
    capsys.readouterr()
    for argv in (["rollout", "--harness", str(harness), "--env", "synthetic", "--commit", rev, "--tasks", "1",
                  "--rollouts", "1", "--out", str(tmp_path / "r.jsonl"), "--sandbox", "inprocess"],
                 ["dataset", "export", "-t", str(traces), "--harness", f"{harness}@{rev}", "--out", str(tmp_path / "x")]
                 )[:1 + export_too]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: "), (argv, err)
        assert "unknown harness commit" in err or "cannot resolve" in err or "holds a NUL" in err, (argv, err)
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "x").exists()


def test_a_very_long_id_is_shortened_in_the_error_line(harness, tmp_path, monkeypatch, capsys):
    """A 100,000-character id was echoed whole: a 100 KB error line (show, report, diagnose, schema, --env ...).
    The line keeps the id's start and end and says how much it cut, and still says what was wrong."""
    monkeypatch.chdir(tmp_path)
    value = "a" * 50_000 + "b" * 50_000
    for argv, reason in (
            (["show", value, "--harness", str(harness)], "no such candidate"),
            (["report", value, "--out", str(tmp_path / "rep")], ""),
            (["diagnose", value], ""),
            (["schema", value], "unknown record"),
            (["rollout", "--harness", str(harness), "--env", value, "--out", str(tmp_path / "r.jsonl")],
             "unknown environment"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and len(err) < 2_000, (argv, len(err))
        assert "aaaaaaaaaa" in err and "bbbbbbbbbb" in err and "characters cut]" in err, (argv, err)
        assert reason in err, (argv, err)


def test_a_harness_with_an_empty_revision_after_its_at_is_refused(harness, tmp_path, monkeypatch, capsys):
    """`dataset export --harness DIR@` (a revision variable left empty: `DIR@$REV`) rendered under main's head
    without a word, as if no revision had been asked for."""
    monkeypatch.chdir(tmp_path)
    traces = tmp_path / "t.jsonl"
    assert main(["rollout", "--harness", str(harness), "--env", "synthetic", "--tasks", "1", "--rollouts", "1",
                 "--out", str(traces), "--sandbox", "inprocess"]) == 0
    capsys.readouterr()
    argv = ["dataset", "export", "-t", str(traces), "--harness", f"{harness}@", "--out", str(tmp_path / "x")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: --harness: {str(harness) + '@'!r}: no revision after '@' (DIR for main's head, or DIR@REV)\n"
    assert not (tmp_path / "x").exists()


def test_an_argument_holding_a_nul_is_one_error_line(tmp_path, monkeypatch, capsys):
    """No shell passes a NUL in an argument (argv is C strings), but a program calling `main(argv)` or an
    `os.execv` with a Python string can: `import x --out $'\\x00'` was a ValueError (embedded null byte) traceback
    from Path.resolve (found by scripts/fuzz_cli.py)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("")
    for argv in (["import", "t.jsonl", "--out", "\x00"], ["diagnose", "a\x00b"], ["--set", "run.seed=1\x00", "noise"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and "NUL" in err, (argv, err)


def test_a_path_that_is_a_symlink_loop_is_one_error_line(tmp_path, monkeypatch, capsys):
    """`demo --out loop` (loop -> loop) was Python's RuntimeError 'Symlink loop from ...' traceback from Path.resolve
    (found by scripts/fuzz_cli.py)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to("loop")
    assert main(["demo", "--out", "loop", "--rounds", "1"]) == 2
    err = capsys.readouterr().err  # a usage error of --out since 0b3d166, in the wording every command uses
    assert err.splitlines() == [err.strip()] and err.startswith("error: ")
    assert "--out: loop: a symlink loop (too many levels of symbolic links)" in err, err


def test_an_argument_holding_half_a_surrogate_pair_is_one_error_line(tmp_path, monkeypatch, capsys):
    """No shell passes half a UTF-16 surrogate pair either (a shell's bytes that are not UTF-8 arrive as
    ``\\udc80``-``\\udcff``, which name those bytes again), but ``main(argv)`` can: `label t.jsonl --out '\\ud800'`
    was a UnicodeEncodeError traceback from Path.resolve (found by scripts/fuzz_cli.py). Bytes a shell passed that
    are not UTF-8 still reach the command (``\\udced\\udca0\\udc80``, the bytes of an encoded ``\\ud800``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("")
    for argv in (["label", "t.jsonl", "--out", "\ud800.jsonl"], ["diagnose", "a\udfffb"],
                 ["--set", "run.seed=\udbff", "noise"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and "half a UTF-16 surrogate pair" in err, (
            argv, err)
    assert main(["label", "t.jsonl", "--out", "\ud800.jsonl"]) == 2
    assert "argument 4 (after --out)" in capsys.readouterr().err
    assert main(["diagnose", "\udced\udca0\udc80"]) == 2  # a shell's bytes: the command ran, the file is missing
    assert capsys.readouterr().err.startswith("error: \\xed\\xa0\\x80: no such file or directory")


def test_a_symlink_loop_refused_as_any_python_refuses_it_is_the_same_line(tmp_path, monkeypatch, capsys):
    """Python 3.11's Path.resolve says 'Symlink loop from ...' (a RuntimeError, raised while it handled ELOOP);
    3.13 raises the OSError ELOOP itself. Either is the same one line, read from the error's errno, not its text."""
    import errno

    import evoharness.diagnosis.cli as diagnosis_cli

    monkeypatch.chdir(tmp_path)

    def elooping(message):
        def raise_(*args, **kwargs):
            try:
                raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(tmp_path / "loop"))
            except OSError:
                if message is None:
                    raise
                raise RuntimeError(message)  # noqa: B904 -- as 3.11 raises it: while handling the OSError
        return raise_

    for message in (None, f"Symlink loop from {str(tmp_path / 'loop')!r}", "a future wording"):
        monkeypatch.setattr(diagnosis_cli, "output_apart", elooping(message))
        (tmp_path / "t.jsonl").write_text("")
        assert main(["label", "t.jsonl", "--out", "loop"]) == 2, message
        assert capsys.readouterr().err == (
            f"error: {tmp_path / 'loop'}: a symlink loop (too many levels of symbolic links)\n"), message
