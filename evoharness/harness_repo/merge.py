"""The verified merge: main moves only to a no-ff merge of exactly the commit a verdict accepted."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

import git

from evoharness.errors import EditRejected, InfraError, MergeRefused
from evoharness.harness_repo import gitops
from evoharness.harness_repo.models import Verdict
from evoharness.logging import get_logger

if TYPE_CHECKING:
    from evoharness.harness_repo.repo import HarnessRepo

log = get_logger(__name__)


def merge_message(branch: str, verdict: Verdict) -> str:
    lines = [
        f"Merge verified candidate {branch}",
        "",
        f"Verdict: accepted ({verdict.strategy}, decided by {verdict.decided_by})",
        f"Verified-Commit: {verdict.commit}",
        f"Verified-Base: {verdict.base}",
    ]
    if verdict.measurements.get("cost_target"):  # accepted on cost (verification/cost.py), not on a score gain
        unit = "tokens" if verdict.measurements.get("cost_in_tokens") else "steps"
        lines.append(f"Verified-Objective: cost (fewer {unit}, score non-inferior)")
    if verdict.reason:
        lines.append(f"Reason: {verdict.reason}")
    if verdict.approval:
        lines.append(f"Approval: {verdict.approval}")
    if verdict.gates:
        lines += ["", verdict.table()]
    if verdict.measurements:
        lines += ["", "Measurements: " + ", ".join(f"{k}={v}" for k, v in verdict.measurements.items())]
    return "\n".join(lines) + "\n"


def check_mergeable(hr: HarnessRepo, branch: str, verdict: Verdict,
                    human_approved: bool = False) -> tuple[str, str]:
    """(main head, candidate head) if ``verdict`` allows merging ``branch`` now, else MergeRefused.

    A candidate whose middleware or tools use process-level tricks (``static_review``) needs
    ``human_approved``."""
    def refuse(reason: str) -> MergeRefused:
        return MergeRefused(reason, branch)

    if verdict.candidate != branch:
        raise refuse(f"the verdict is for {verdict.candidate}, not this branch")
    if not verdict.accepted:
        raise refuse(f"the verdict did not accept the candidate: {verdict.reason or 'no reason given'}")
    from evoharness.harness_repo.signing import is_signed

    if not is_signed(hr.repo, verdict):
        raise refuse("the verdict is not signed by this repository's verifier (a hand-built or altered verdict); "
                     "verify the candidate")
    head = gitops.ref_sha(hr.repo, f"refs/heads/{branch}")
    if head is None:
        raise refuse("no such candidate branch")
    main = hr.main_head()
    if _full(hr, verdict.commit) != head:
        raise refuse(f"branch moved after verification (verified {verdict.commit[:10]}, head is {head[:10]});"
                     " re-verify")
    if _full(hr, verdict.base) != main:
        raise refuse(f"main moved since verification (verified against {verdict.base[:10]}, main is"
                     f" {main[:10]}); re-verify")
    if hr.repo.git.merge_base(main, head) != main:
        raise refuse("candidate is not based on main's head; rebase it and re-verify")
    if head == main:
        raise refuse("candidate is already merged")
    note = hr.notes().get(head) or {}
    if note.get("status") == "rejected" or note.get("verdict", {}).get("accepted") is False:
        raise refuse("the verdict recorded on this commit rejected it")
    bad = [p for p in hr.changed_paths(main, head) if not hr.manifest.editable(p)]
    if bad:
        raise refuse(f"candidate changes paths a candidate may not touch: {', '.join(bad[:5])}")
    try:  # the same guard as candidate creation, on what the branch changes (it may not have been made by us)
        check_change(hr, main, head)
    except EditRejected as e:
        raise refuse(f"candidate fails the edit guard: {e.reason}" + (f" ({e.path})" if e.path else "")) from None
    if not human_approved:
        from evoharness.harness_repo.static_review import review_change

        findings = review_change(hr, main, head)
        if findings:
            shown = "; ".join(str(f) for f in findings[:3]) + (f"; +{len(findings) - 3} more" if len(findings) > 3
                                                                 else "")
            raise refuse(f"static review: {shown} -- a human must approve this merge (run --review, then approve)")
    return main, head


def check_change(hr: HarnessRepo, base: str, head: str) -> None:
    """``EditRejected`` unless the change ``base..head`` passes ``validate.resolve_edit`` as one edit
    (paths, sizes, parse, instructions that subvert evaluation), whoever made the branch."""
    from evoharness.harness_repo.models import Edit, FileChange
    from evoharness.harness_repo.validate import resolve_edit

    changes = []
    tree = hr.repo.commit(head).tree
    for path in hr.changed_paths(base, head):
        try:
            blob = tree / path
        except KeyError:
            changes.append(FileChange(path=path, delete=True))
            continue
        changes.append(FileChange(path=path, content=blob.data_stream.read().decode("utf-8", "replace")))
    if not changes:
        return
    edit = Edit(message="merge check", targets="merge-check", changes=changes)  # the files, not the trailers
    limits = hr.config.model_copy(update={"max_files": max(hr.config.max_files, len(changes))})
    resolve_edit(hr.repo, hr.manifest, hr.repo.commit(base), edit, limits)


def _full(hr: HarnessRepo, sha: str) -> str | None:
    try:
        return hr.repo.commit(sha).hexsha
    except (git.BadName, ValueError):
        return None


def verified_merge(hr: HarnessRepo, branch: str, verdict: Verdict, human_approved: bool = False) -> str:
    with gitops.repo_lock(hr.repo, hr.config.lock_timeout_s):
        main, head = check_mergeable(hr, branch, verdict, human_approved)
        tree = hr.tree_hash(head)
        _check_worktree(hr, main, tree)
        merge = gitops.make_commit(hr.repo, tree, merge_message(branch, verdict), [main, head])
        if not gitops.cas_ref(hr.repo, hr.main_ref, merge, main):
            raise MergeRefused("main moved during the merge; re-verify", branch)
        payload = verdict.model_dump(mode="json")
        gitops.write_note(hr.repo, hr.config.notes_ref, merge,
                          {"status": "merged", "verdict": payload, "candidate": branch, "merged": head})
        gitops.write_note(hr.repo, hr.config.notes_ref, head,
                          {"status": "merged", "verdict": payload, "merge_commit": merge})
        _sync_worktree(hr, main, merge)
    log.info("candidate_merged", candidate=branch, commit=head, merge=merge)
    return merge


_LOCK_GRACE_S = 2.0  # how long a round's start waits for an index lock to go (`git status` holds one a moment)


def _main_checked_out(hr: HarnessRepo) -> bool:
    repo = hr.repo
    return not (repo.bare or repo.head.is_detached or repo.head.ref.path != hr.main_ref)


def _index_locked(hr: HarnessRepo) -> InfraError:
    lock = Path(hr.repo.git_dir) / "index.lock"
    return InfraError(f"the harness repository {hr.repo.working_dir}: its index is locked ({lock} exists): a git "
                      "command is running there, or one was killed and left the lock; when none runs, remove the "
                      "lock and resume", retryable=False)


def _in_progress(hr: HarnessRepo, why: str | None) -> InfraError | None:
    """A git merge, cherry-pick or revert in progress on main (its conflicts are no edit of the user's to commit or
    discard); None when none is."""
    git_dir = Path(hr.repo.git_dir)
    for name, command in (("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert")):
        if (git_dir / name).exists():
            return InfraError(f"the harness repository {hr.repo.working_dir}: a git {command} is in progress on main"
                              f"{f' ({why})' if why else ''}: finish it (git {command} --continue) or abort it (git "
                              f"{command} --abort), then resume", retryable=False)
    return None


def check_worktree_clear(hr: HarnessRepo) -> None:
    """InfraError when main is checked out and a verified merge could not update its files: the index is locked
    (after ``_LOCK_GRACE_S`` for a git that is running to let go), or a merge, cherry-pick or revert is in progress.
    Asked before each round (``graph/nodes``): until 2026-12-06 these were found only at the merge, after the
    round's verification rollouts had been spent."""
    if not _main_checked_out(hr):
        return
    lock = Path(hr.repo.git_dir) / "index.lock"
    deadline = time.monotonic() + _LOCK_GRACE_S
    while lock.exists():
        if time.monotonic() >= deadline:
            raise _index_locked(hr)
        time.sleep(0.1)
    if (busy := _in_progress(hr, None)) is not None:
        raise busy


def _check_worktree(hr: HarnessRepo, main: str, tree: str) -> None:
    """InfraError, before main moves, when main is checked out with uncommitted changes the merge would overwrite.
    Main moved anyway and the files could not follow: the index kept the old tree, so `git diff --cached` showed the
    merge reversed and the user's next `git commit -a` reverted the verified merge without a word."""
    repo = hr.repo
    if not _main_checked_out(hr):
        return
    with contextlib.suppress(git.GitCommandError):  # stale stat data (a copied repository) is no change; exit 1
        repo.git.update_index("-q", "--refresh")    # when files are modified, which the dry run below judges
    try:
        repo.git.read_tree("-n", "-m", "-u", main, tree)  # the two-tree merge _sync_worktree does, as a dry run
    except git.GitCommandError as e:
        why = next((line.strip() for line in str(e.stderr or "").splitlines() if line.strip()), str(e))
        why = why.removeprefix("stderr: ").strip("'")
        if (Path(repo.git_dir) / "index.lock").exists() or "index.lock" in why:  # another git holds the index
            raise _index_locked(hr) from e
        if (busy := _in_progress(hr, why)) is not None:
            raise busy from e
        raise InfraError(f"the harness repository {repo.working_dir} has main checked out with uncommitted changes "
                         f"that merging the verified candidate would overwrite ({why}): "
                         "commit or discard them", retryable=False) from e


def _sync_worktree(hr: HarnessRepo, old: str, new: str) -> None:
    """If main is checked out, fast-forward the index and files as `git merge` would."""
    repo = hr.repo
    if repo.bare or repo.head.is_detached or repo.head.ref.path != hr.main_ref:
        return
    try:
        repo.git.read_tree("-m", "-u", old, new)
    except git.GitCommandError as e:
        log.warning("worktree_not_updated", reason=str(e).splitlines()[-1], main=new)
