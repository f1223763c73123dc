"""The checkout's .gitignore keeps a virtual environment out of git in any form: a `.venv` symlink too. The team's
worktrees link the main checkout's `.venv` (`ln -s /work/main/.venv .venv`); `.venv/` matched only a directory, so the
link showed as untracked, `git add -A` committed it, and fast-forwarding the main checkout onto that commit made git
delete the ignored files of the real `.venv` directory there to put the link in their place (2026-12-07, the review
helper: every helper's interpreter gone at once)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", ["symlink", "directory", "file"])
def test_a_venv_of_any_kind_is_ignored(tmp_path, kind):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    venv = tmp_path / ".venv"
    if kind == "symlink":
        (tmp_path / "elsewhere").mkdir()
        venv.symlink_to(tmp_path / "elsewhere")
    elif kind == "directory":
        venv.mkdir()
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    else:
        venv.write_text("")
    done = subprocess.run(["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True)
    assert ".venv" not in done.stdout, done.stdout
