"""Verified merges: main moves only to exactly what a verdict accepted; concurrent merges are safe."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.errors import MergeRefused
from evoharness.harness_repo.models import Edit
from evoharness.harness_repo.repo import HarnessRepo

from .helpers import git, lesson_edit, verdict_for


def test_verified_merge_is_no_ff_with_the_verdict_in_message_and_note(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit(), 1)
    verdict = verdict_for(harness, cand.branch)
    harness.record_verdict(verdict)
    assert [i.status for i in harness.candidates()] == ["verified"]
    seed = harness.main_head()
    merge = harness.merge_verified(cand.branch, verdict)
    assert harness.main_head() == merge
    assert git(harness.path, "rev-list", "--parents", "-n1", merge).split()[1:] == [seed, cand.commit]
    assert harness.tree_hash(merge) == harness.tree_hash(cand.commit)
    message = git(harness.path, "log", "-1", "--format=%B", merge)
    assert f"Verified-Commit: {cand.commit}" in message and "| behaviour | pass |" in message
    note = json.loads(git(harness.path, "notes", "--ref=evoharness", "show", merge))
    assert note["status"] == "merged" and note["verdict"]["commit"] == cand.commit
    info = harness.candidates()[0]
    assert (info.status, info.branch) == ("merged", cand.branch)
    # main was checked out: the working tree follows, as after `git merge`
    assert (harness.path / "lessons.md").read_text() == "- Stop after two identical tool calls.\n"
    assert git(harness.path, "status", "--porcelain") == ""


def test_merge_refuses_without_an_accepted_verdict(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit(), 1)
    seed = harness.main_head()
    with pytest.raises(MergeRefused, match="did not accept"):
        harness.merge_verified(cand.branch, verdict_for(harness, cand.branch, accepted=False))
    with pytest.raises(MergeRefused, match="verdict is for"):
        harness.merge_verified(cand.branch, verdict_for(harness, cand.branch, candidate="candidate/other"))
    assert harness.main_head() == seed


def test_merge_refuses_when_the_branch_moved_after_verification(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit(), 1)
    verdict = verdict_for(harness, cand.branch)
    harness.record_verdict(verdict)
    harness.revise(cand.branch, lesson_edit("- something else\n"))
    with pytest.raises(MergeRefused, match="branch moved after verification.*re-verify"):
        harness.merge_verified(cand.branch, verdict)
    info = harness.candidates()[0]
    assert info.status == "pending" and info.verdict.startswith("stale")


def test_merge_refuses_when_main_moved(harness: HarnessRepo) -> None:
    a = harness.create_candidate(lesson_edit("- a\n", message="a"), 1)
    b = harness.create_candidate(Edit(message="b", targets="F2.format_rejected",
                                      changes=[{"path": "prompts/extra.md", "content": "b\n"}]), 1)
    va, vb = verdict_for(harness, a.branch), verdict_for(harness, b.branch)
    harness.record_verdict(vb)
    harness.merge_verified(a.branch, va)
    with pytest.raises(MergeRefused, match="main moved since verification.*re-verify"):
        harness.merge_verified(b.branch, vb)
    info = next(i for i in harness.candidates() if i.branch == b.branch)
    assert info.status == "verified" and info.needs_reverify


def test_merge_refuses_a_verified_commit_that_touches_protected_paths(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit(), 1)
    # someone commits straight onto the branch, bypassing validation
    git(harness.path, "checkout", "-q", cand.branch)
    (harness.path / "harness.toml").write_text('surfaces = ["**"]\n')
    git(harness.path, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qam", "widen surfaces")
    git(harness.path, "checkout", "-q", "main")
    with pytest.raises(MergeRefused, match="may not touch: harness.toml"):
        harness.merge_verified(cand.branch, verdict_for(harness, cand.branch))


def test_rejected_candidates_keep_their_branch_and_verdict(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit(), 1)
    harness.reject(cand.branch, verdict_for(harness, cand.branch, accepted=False))
    info = harness.candidates()[0]
    assert (info.branch, info.status, info.verdict) == (cand.branch, "rejected", "rejected, gates 0/2: no gain")
    assert harness.head_of(cand.branch) == cand.commit


def test_worktree_is_a_read_only_checkout_of_the_commit(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(lesson_edit("- lesson\n"), 1)
    with harness.worktree(cand.commit) as root:
        assert (root / "lessons.md").read_text() == "- lesson\n"
        assert (root / "prompts" / "system.md").is_file()
        assert not (root / ".git").exists()
        assert (root / "lessons.md").stat().st_mode & 0o222 == 0
        assert (root / "prompts").stat().st_mode & 0o222 == 0
        if os.geteuid() != 0:  # root ignores mode bits
            with pytest.raises(PermissionError):
                (root / "lessons.md").write_text("tampered")
    assert not root.exists()
    assert (harness.path / "lessons.md").read_text() == ""  # main's checkout untouched


_MERGER = """
import json, sys, time
from evoharness.errors import MergeRefused
from evoharness.harness_repo.models import Verdict
from evoharness.harness_repo.repo import HarnessRepo
path, branch, verdict_json, start_at = sys.argv[1:5]
hr = HarnessRepo(path)
verdict = Verdict.model_validate_json(verdict_json)
while time.time() < float(start_at):
    pass
try:
    print(json.dumps({"merged": hr.merge_verified(branch, verdict)}))
except MergeRefused as e:
    print(json.dumps({"refused": e.reason}))
"""


def test_two_processes_merging_at_once(harness: HarnessRepo) -> None:
    import time

    a = harness.create_candidate(lesson_edit("- a\n", message="a"), 1)
    b = harness.create_candidate(lesson_edit("- b\n", message="b"), 1)
    verdicts = [verdict_for(harness, a.branch), verdict_for(harness, b.branch)]
    for v in verdicts:
        harness.record_verdict(v)
    start_at = str(time.time() + 1.5)  # both spin until the same instant, then merge
    procs = [subprocess.Popen([sys.executable, "-c", _MERGER, str(harness.path), v.candidate,
                               v.model_dump_json(), start_at], stdout=subprocess.PIPE, text=True)
             for v in verdicts]
    results = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    merged = [r for r in results if "merged" in r]
    refused = [r for r in results if "refused" in r]
    assert len(merged) == 1 and len(refused) == 1
    assert "re-verify" in refused[0]["refused"]
    assert harness.main_head() == merged[0]["merged"]
    assert git(harness.path, "rev-list", "--count", "main") == "3"  # seed, one candidate, one merge
    fsck = subprocess.run(["git", "-C", str(harness.path), "fsck", "--strict", "--no-dangling"],
                          capture_output=True, text=True)
    assert fsck.returncode == 0 and fsck.stdout.strip() == "", fsck.stdout + fsck.stderr
    statuses = sorted(i.status for i in harness.candidates())
    assert statuses == ["merged", "verified"]


def test_concurrent_verdict_notes_are_not_lost(harness: HarnessRepo) -> None:
    cands = [harness.create_candidate(lesson_edit(f"- {i}\n", message=f"c{i}"), 1) for i in range(4)]
    verdicts = [verdict_for(harness, c.branch) for c in cands]
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.starmap(_record, [(str(harness.path), v.model_dump_json()) for v in verdicts])
    assert sorted(i.status for i in harness.candidates()) == ["verified"] * 4


def _record(path: str, verdict_json: str) -> None:
    from evoharness.harness_repo.models import Verdict

    HarnessRepo(Path(path)).record_verdict(Verdict.model_validate_json(verdict_json))


def test_a_locked_index_is_named_as_such_not_as_uncommitted_changes(harness: HarnessRepo) -> None:
    """A `.git/index.lock` (a git process running in the harness repo, or one killed that left it) paused the run
    with 'has main checked out with uncommitted changes that merging the verified candidate would overwrite (fatal:
    Unable to create ...index.lock ...): commit or discard them', on a clean work tree: the user was told to commit
    what was not there. Now the error says the index is locked, names the lock and what to do; main does not move,
    and once the lock is gone the same merge goes through."""
    from evoharness.errors import InfraError

    cand = harness.create_candidate(lesson_edit(), 1)
    verdict = verdict_for(harness, cand.branch)
    harness.record_verdict(verdict)
    seed = harness.main_head()
    lock = harness.path / ".git" / "index.lock"
    lock.write_text("")
    with pytest.raises(InfraError) as e:
        harness.merge_verified(cand.branch, verdict)
    message = str(e.value)
    assert "uncommitted" not in message and "its index is locked" in message and str(lock) in message, message
    assert harness.main_head() == seed and lock.exists()
    lock.unlink()
    assert harness.merge_verified(cand.branch, verdict) == harness.main_head() != seed
    assert git(harness.path, "status", "--porcelain") == ""


def test_a_merge_in_progress_on_main_is_named_as_such(harness: HarnessRepo) -> None:
    """main checked out in the middle of a conflicted `git merge` paused the run with 'uncommitted changes that merging
    the verified candidate would overwrite (fatal: You need to resolve your current index first): commit or discard
    them'; now it names the merge in progress and its two ways out, and main does not move."""
    from evoharness.errors import InfraError

    me = ("-c", "user.name=me", "-c", "user.email=me@example.com")
    for branch, checkout in (("side", ("-b", "side")), ("main", ("main",))):  # two commits that conflict
        git(harness.path, "checkout", "-q", *checkout)
        (harness.path / "lessons.md").write_text(f"- {branch}\n")
        git(harness.path, *me, "commit", "-qam", branch)
    cand = harness.create_candidate(lesson_edit(), 1)
    verdict = verdict_for(harness, cand.branch)
    harness.record_verdict(verdict)
    seed = harness.main_head()
    subprocess.run(["git", "-C", str(harness.path), *me, "merge", "side"], capture_output=True)  # conflicts: exit 1
    assert (harness.path / ".git" / "MERGE_HEAD").exists()
    with pytest.raises(InfraError, match=r"a git merge is in progress on main .*git merge --abort") as e:
        harness.merge_verified(cand.branch, verdict)
    assert "commit or discard" not in str(e.value)
    assert harness.main_head() == seed
