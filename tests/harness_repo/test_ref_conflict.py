"""A branch in the way of a candidate's ref: git cannot make ``refs/heads/candidate/r0-x`` while a branch named
``candidate`` exists (a ref cannot be a file and a directory). The refusal said '(if no git command is running
there, remove the stale lock file it names)' -- there is no lock file; the user was sent looking for one. It names
the branch in the way now, and keeps the lock hint for a lock."""

from __future__ import annotations

import git as gitpython
import pytest

from evoharness.cli import main
from evoharness.errors import InfraError
from evoharness.harness_repo import gitops
from evoharness.harness_repo.init import init_harness

from .helpers import git

EDIT = '{"message": "Add a loop lesson", "targets": "F3.repeated_action", "changes": [{"path": "lessons.md", ' \
       '"content": "- Never repeat a failing call.\\n"}]}'


def test_a_branch_in_the_way_of_a_candidate_ref_is_named_not_a_lock(tmp_path):
    init_harness(tmp_path / "h")
    git(tmp_path / "h", "branch", "candidate")
    repo = gitpython.Repo(tmp_path / "h")
    with pytest.raises(InfraError) as e:
        gitops.cas_ref(repo, "refs/heads/candidate/r0-x", repo.head.commit.hexsha, gitops.ZERO)
    assert "lock file" not in str(e.value), e.value
    assert "the branch 'candidate' is in the way" in str(e.value), e.value


def test_a_stale_lock_keeps_its_hint(tmp_path):
    init_harness(tmp_path / "h")
    repo = gitpython.Repo(tmp_path / "h")
    (tmp_path / "h" / ".git" / "refs" / "heads" / "main.lock").touch()
    with pytest.raises(InfraError) as e:
        gitops.cas_ref(repo, "refs/heads/main", repo.head.commit.hexsha, repo.head.commit.hexsha)
    assert "remove the stale lock file it names" in str(e.value) and "main.lock" in str(e.value), e.value


def test_candidate_new_with_a_branch_in_the_way_says_which_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EVOHARNESS_HOME", str(tmp_path / "home"))
    init_harness(tmp_path / "h")
    git(tmp_path / "h", "branch", "candidate")
    (tmp_path / "edit.json").write_text(EDIT)
    capsys.readouterr()
    assert main(["candidate", "new", "--harness", str(tmp_path / "h"), "--edit", str(tmp_path / "edit.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "the branch 'candidate' is in the way" in err[0], err
    assert git(tmp_path / "h", "branch", "--list", "candidate/*") == ""  # nothing made
