"""Leave-one-out ablation of a run's merged edits.

For each merge the run made, build main's head with that merge reverted -- ``git revert -m 1`` in
a throwaway detached worktree of the harness repo, so no branch (main included) ever moves --
roll that tree out, and report how much the score drops without the edit. A revert that does not
apply cleanly (a later edit built on this one) is reported as such, with the conflicting paths.
The reverted commits are left unreferenced in the object store (git gc removes them).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import git
from pydantic import BaseModel, Field

from evoharness.harness_repo import gitops
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.reports.measure import Evaluation, Measurer, compare

HELPS = {"better": "the edit helps", "worse": "the edit hurts", "within noise": "within noise"}


class Revert(BaseModel):
    """One merged edit, removed from main's head."""

    branch: str
    merge_commit: str
    targets: str | None = None
    round: int | None = None
    applies: bool
    reason: str | None = Field(None, description="why the revert did not apply (conflicting paths)")
    commit: str | None = Field(None, description="the throwaway commit: main's head with this merge reverted")
    results: dict[str, Evaluation] = Field(
        default_factory=dict,
        description="per split: baseline = without the edit, candidate = main's head; difference = the drop",
    )

    def drop(self, split: str) -> float | None:
        ev = self.results.get(split)
        return None if ev is None else ev.difference


class Ablation(BaseModel):
    run_id: str
    harness: str
    main: str = Field(description="main's head the edits were removed from (the run's final main)")
    k: int
    seed: int
    splits: list[str]
    edits: list[Revert]


def revert_merge(repo: HarnessRepo, head: str, merge: str) -> tuple[str | None, str | None]:
    """``head`` with ``merge`` reverted: (commit, None), or (None, reason) when it does not apply.

    Works in a detached worktree under a temporary directory, removed afterwards; no ref moves.
    """
    g = repo.repo
    try:
        g.commit(merge)
    except (ValueError, git.BadName):
        return None, f"merge commit {merge[:10]} is not in {repo.path}"
    tmp = Path(tempfile.mkdtemp(prefix="evoharness-ablate-"))
    wt = tmp / "tree"
    env = gitops.identity_env(g)
    try:
        g.git.worktree("add", "--detach", "--quiet", str(wt), head)
        w = git.Repo(wt)
        try:
            w.git.revert("--no-edit", "-m", "1", merge, env=env)
        except git.GitCommandError as e:
            conflicts = [p for p in w.git.diff("--name-only", "--diff-filter=U").splitlines() if p]
            if conflicts:
                w.git.revert("--abort")
                return None, "revert does not apply cleanly: conflicts in " + ", ".join(conflicts)
            detail = (e.stderr or e.stdout or str(e)).strip().splitlines()
            return None, "revert failed: " + (detail[-1] if detail else str(e)).strip()
        return w.head.commit.hexsha, None
    finally:
        try:
            g.git.worktree("remove", "--force", str(wt))
        except git.GitCommandError:
            pass
        g.git.worktree("prune")
        shutil.rmtree(tmp, ignore_errors=True)


def ablate(measurer: Measurer, run_id: str, main: str, merged: list[dict[str, Any]], splits: list[str], k: int,
           seed: int, tasks: dict[str, list[str]], z: float, sigma_floor: float) -> Ablation:
    """Leave each merged edit out of ``main`` in turn and measure the drop on each split."""
    edits = []
    progress = measurer.progress
    for m in merged:
        sha = m.get("merge_commit") or ""
        commit, reason = revert_merge(measurer.repo, main, sha)
        item = Revert(branch=m.get("branch", sha), merge_commit=sha, targets=m.get("targets"), round=m.get("round"),
                      applies=commit is not None, reason=reason, commit=commit)
        if commit is None:
            progress.note(f"{item.branch}: {reason}; skipped")
        else:
            progress.note(f"{item.branch}: main {main[:10]} without merge {sha[:10]} = {commit[:10]}")
            for split in splits:
                item.results[split] = compare(measurer, f"without {item.branch}", "main", split, k, seed,
                                              tasks=tasks[split], z=z, sigma_floor=sigma_floor,
                                              baseline_commit=commit, candidate_commit=main)
                progress.note("  " + _drop_line(item.results[split]))
        edits.append(item)
    return Ablation(run_id=run_id, harness=str(measurer.repo.path), main=main, k=k, seed=seed, splits=splits,
                    edits=edits)


def _drop_line(ev: Evaluation) -> str:
    return (f"{ev.split}: with {ev.candidate.mean:.3f}, without {ev.baseline.mean:.3f}, drop "
            f"{ev.difference:+.3f} (resolvable {ev.resolvable:.3f}): {HELPS[ev.verdict]}")
