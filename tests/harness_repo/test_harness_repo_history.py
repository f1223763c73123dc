"""Harness history: the bisect finds the commit after which a value rose; the revert undoes only that commit."""

from __future__ import annotations

import subprocess

import pytest

from evoharness.harness_repo.history import bisect, main_history, revert_changes
from evoharness.harness_repo.init import init_harness


@pytest.mark.parametrize("values,culprit", [
    ([0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9], 3),
    ([0.1, 0.9], 1),
    ([0.9, 0.1, 0.1, 0.1, 0.1, 0.8], 5),   # the oldest commit is high too: the most recent rise counts
    ([0.8, 0.8, 0.8, 0.8], None),
])
def test_bisect_finds_the_most_recent_rise_in_log_measurements(values, culprit):
    commits = [f"c{i}" for i in range(len(values))]
    asked: list[str] = []

    def measure(c: str) -> float:
        asked.append(c)
        return values[commits.index(c)]

    found, seen = bisect(commits, measure, values[-1], min_rise=0.25)
    assert found == (None if culprit is None else commits[culprit])
    assert commits[-1] not in asked and len(asked) == len(set(asked)) <= 2 * len(values).bit_length() + 1
    assert all(seen[c] == values[commits.index(c)] for c in seen)


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def commit(root, files, msg):
    for rel, text in files.items():
        p = root / rel
        if text is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", msg)
    return git(root, "rev-parse", "HEAD")


def test_revert_undoes_one_commit_and_keeps_later_ones(tmp_path):
    repo = init_harness(tmp_path / "h")
    root = repo.path
    body = "one\ntwo\nthree\nfour\n"
    commit(root, {"lessons.md": body}, "lessons")
    bad = commit(root, {"middleware/cut.py": "def after_tool(c, r):\n    return r[:5]\n",
                        "lessons.md": "Line A\n" + body}, "bad")
    later = commit(root, {"lessons.md": "Line A\n" + body + "Line B\n", "tools/x.py": "TOOLS = []\n"}, "later")
    assert main_history(repo.repo, later)[-2:] == [bad, later]
    changes = {c.path: c for c in revert_changes(repo.repo, bad, later)}
    assert changes["middleware/cut.py"].delete
    assert changes["lessons.md"].content == body + "Line B\n"  # three-way: the later line stays
    assert "tools/x.py" not in changes
    first = main_history(repo.repo, later)[0]
    assert revert_changes(repo.repo, first, later) is None  # the root commit has no parent to go back to
