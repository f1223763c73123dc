"""Harness history as evidence: main's commits, a bisect for the commit after which a signal rose, and
the file changes that revert one commit on top of main's head.

`bisect(commits, measure, head_value, min_rise)` is pure: ``commits`` oldest first (the last is main's
head, already measured), ``measure(commit)`` a signal's incidence there (the caller runs the rollouts,
through the rollout cache, so a re-run after a crash pays nothing).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import git

from evoharness.harness_repo.models import FileChange


def main_history(repo: git.Repo, head: str, limit: int = 16) -> list[str]:
    """Main's first-parent commits up to ``head``, oldest first (at most ``limit``)."""
    shas = [c.hexsha for c in repo.iter_commits(head, first_parent=True, max_count=limit)]
    return list(reversed(shas))


def bisect(commits: list[str], measure: Callable[[str], float], head_value: float,
           min_rise: float) -> tuple[str | None, dict[str, float]]:
    """The most recent commit of ``commits`` (oldest first; the last is main's head, measured as
    ``head_value``) after which the measured value rose by at least ``min_rise``, and every value
    measured {commit: value}. None when no earlier commit was that much lower.

    Galloping back from the head (1, 2, 4, ... commits) finds a low commit, then halving the range
    finds the first commit whose value is nearer the head's than the low one's: O(log n) measurements.
    """
    seen: dict[str, float] = {commits[-1]: head_value} if commits else {}
    n = len(commits)
    if n < 2:
        return None, seen
    hi, step, lo = n - 1, 1, None
    while True:
        j = max(n - 1 - step, 0)
        v = seen[commits[j]] = measure(commits[j])
        if head_value - v >= min_rise:
            lo = j
            break
        hi = j if v > head_value - min_rise / 2 else hi
        if j == 0:
            return None, seen
        step *= 2
    low_value = seen[commits[lo]]
    mid_value = (low_value + head_value) / 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = seen[commits[mid]] = measure(commits[mid])
        if v > mid_value:
            hi = mid
        else:
            lo = mid
    return commits[hi], seen


def revert_changes(repo: git.Repo, commit: str, onto: str) -> list[FileChange] | None:
    """The changes that undo ``commit`` on top of ``onto`` (a three-way merge per file: the commit's
    version as base, ``onto``'s as ours, the parent's as theirs). None when a file conflicts or the
    commit has no parent; [] when there is nothing left to undo."""
    c = repo.commit(commit)
    if not c.parents:
        return None
    parent = c.parents[0]
    out: list[FileChange] = []
    for d in parent.diff(c):
        path = d.b_path or d.a_path
        old = _blob(parent, path)   # before the commit
        new = _blob(c, path)        # the commit's version
        cur = _blob(repo.commit(onto), path)
        if cur == old:
            continue
        if cur == new:
            merged = old
        else:
            merged = _merge3(new, cur, old)
            if merged is None:
                return None
        if merged is None:
            out.append(FileChange(path=path, delete=True))
        else:
            out.append(FileChange(path=path, content=merged))
    return out


def _blob(commit: git.Commit, path: str) -> str | None:
    try:
        return commit.tree[path].data_stream.read().decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


def _merge3(base: str | None, ours: str | None, theirs: str | None) -> str | None:
    if ours is None or theirs is None or base is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            p = Path(d) / name
            p.write_text(text)
            paths.append(str(p))
        r = subprocess.run(["git", "merge-file", "-p", *paths], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None
