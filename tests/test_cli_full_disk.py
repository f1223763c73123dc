"""A command whose output cannot be written whole (a full disk; here the file size limit, RLIMIT_FSIZE, which fails
writes as a full disk does, without root) is one `error:` line, exit 2, and leaves nothing half-made where its output
goes: no half a harness repo, no export's staging directory, and an earlier export as it was."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.cli import main


def _env() -> dict[str, str]:  # this tree's package, not whichever one is installed
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    return {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


@pytest.mark.parametrize("limit", [100, 1000], ids=["python-writes-fail", "git-init-fails"])
def test_init_on_a_full_disk_is_one_line_and_leaves_no_half_made_repo(tmp_path, limit):
    """`init` on a full disk was a GitCommandError traceback (git init could not copy its templates), exit 1, and the
    directory stayed, holding the seed files and half a .git: a second `init` then said it was not empty."""

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    target = tmp_path / "new" / "h"
    p = subprocess.run([sys.executable, "-m", "evoharness", "init", str(target)], cwd=tmp_path, env=_env(),
                       preexec_fn=small_files, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith(f"error: {target}"), p.stderr
    assert not (tmp_path / "new").exists()  # the directories init made are gone, its missing parent too
    assert main(["init", str(target)]) == 0  # with room again, the same command works


def test_init_into_an_empty_directory_that_fails_leaves_it_empty(tmp_path, monkeypatch, capsys):
    import git

    target = tmp_path / "h"
    target.mkdir()

    def no_room(*args, **kwargs):
        raise git.GitCommandError(["git", "init"], 128, b"error: copy-fd: write returned: No space left on device\n"
                                  b"fatal: cannot copy 'hooks/x' to 'h/.git/hooks/x': No space left on device")

    monkeypatch.setattr(git.Repo, "init", no_room)
    assert main(["init", str(target)]) == 2
    assert capsys.readouterr().err == (f"error: {target}: could not create the harness repo (git: copy-fd: write "
                                       "returned: No space left on device); nothing was left there\n")
    assert target.is_dir() and not any(target.iterdir())  # the user's directory stays, as empty as it was


def test_an_export_whose_card_cannot_be_written_leaves_the_earlier_export_and_no_staging(tmp_path, monkeypatch,
                                                                                         capsys):
    """The manifest and README are written after the records: on a full disk there the export said `error: no
    space left on device` (no path) and left `.export-XXXX/` with an empty manifest.json inside the --out."""
    import evoharness.datasets.export as export

    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "4", "--rollouts", "1", "--out",
                 "t.jsonl", "--sandbox", "inprocess"]) == 0
    assert main(["dataset", "export", "-t", "t.jsonl", "--out", "out"]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    capsys.readouterr()
    real = export.write_card

    def full(stage, summary):
        real(stage, summary)
        (stage / "manifest.json").write_bytes((stage / "manifest.json").read_bytes()[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(export, "write_card", full)
    assert main(["dataset", "export", "-t", "t.jsonl", "--out", "out"]) == 2
    assert capsys.readouterr().err == "error: out: no space left on device\n"
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert main(["dataset", "export", "-t", "t.jsonl", "--out", "new/out"]) == 2
    capsys.readouterr()
    assert not Path("new").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_an_output_written_through_a_link_to_a_full_device_names_it(tmp_path, monkeypatch, capsys):
    """An output that is a symlink or a device is written through, not replaced; on a full one (`--out full`, full ->
    /dev/full) `label` said `error: no space left on device`, naming no output (found by scripts/fuzz_cli.py)."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "2", "--rollouts", "1", "--out",
                 "t.jsonl", "--sandbox", "inprocess"]) == 0
    (tmp_path / "full").symlink_to("/dev/full")
    capsys.readouterr()
    for argv in (["label", "t.jsonl", "--out", "full"], ["import", "t.jsonl", "--out", "full"]):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == "error: full: no space left on device\n", argv
    assert os.path.realpath(tmp_path / "full") == "/dev/full"  # the link stays a link


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("argv", [["diagnose", "t.jsonl"], ["diagnose", "t.jsonl", "--json"],
                                  ["schema", "trajectory"], ["--help"]])
def test_standard_output_on_a_full_disk_is_named(tmp_path, monkeypatch, argv):
    """`diagnose t.jsonl > /dev/full` said `error: no space left on device`, which did not say it was standard output
    the disk refused (a write on an open stream carries no file name); typer's echo, `diagnose --json`'s own writes
    and the help's console each name it now, in one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "2", "--rollouts", "1", "--out",
                 "t.jsonl", "--sandbox", "inprocess"]) == 0
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "evoharness", *argv], cwd=tmp_path, env=_env(), stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr == "error: standard output: no space left on device\n", p.stderr
