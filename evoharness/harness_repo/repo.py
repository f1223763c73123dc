"""`HarnessRepo`: the harness git repository (candidates, verdict notes, verified merges)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import git

from evoharness.errors import EditRejected, InputError, missing_reason
from evoharness.harness_repo import gitops
from evoharness.harness_repo.candidates import BRANCH_PREFIX, branch_name, candidate_from_message, commit_message
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.manifest import MANIFEST_NAME, Manifest
from evoharness.harness_repo.models import Candidate, Edit, Verdict
from evoharness.harness_repo.validate import resolve_edit
from evoharness.logging import get_logger

if TYPE_CHECKING:
    from evoharness.harness_repo.review import CandidateInfo

log = get_logger(__name__)


def _not_a_repository(path: Path) -> str:
    """Why git would not open ``path`` (as typed, not resolved: a link that leads nowhere is said to be one):
    nothing there (``missing_reason``), a damaged repository (``gitops.damaged_repository``), or none at all."""
    if not path.exists():
        return missing_reason(path)
    return gitops.damaged_repository(path) or "not a git repository"


class HarnessRepo:
    """An existing harness repo: a git repo whose main branch holds a ``harness.toml``.

    The manifest is read from main's head commit (not the working tree), so an uncommitted
    edit to ``harness.toml`` cannot widen what candidates may touch.
    """

    def __init__(self, path: Path | str, config: HarnessRepoConfig | None = None) -> None:
        self.path = Path(path).resolve()
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InputError(str(path), _not_a_repository(Path(path))) from None
        self.config = config or HarnessRepoConfig()
        self.manifest = self._read_manifest()
        self._trees: dict[str, str] = {}  # full commit sha -> its tree sha (a commit never changes)

    # ---- opening ---------------------------------------------------------------------------

    def _read_manifest(self) -> Manifest:
        """The manifest on main: tried on main, master and the checked-out branch, in that order."""
        tried = ["main", "master"]
        if not self.repo.head.is_detached:
            tried.append(self.repo.head.ref.name)
        for branch in tried:
            m = self._manifest_on(branch)
            if m is not None and m.main_branch != branch:
                named, m = m.main_branch, self._manifest_on(m.main_branch)
                if m is None and gitops.ref_target(self.repo, f"refs/heads/{named}") is None:
                    # main deleted under a HEAD on another branch: until 2026-12-07 'no harness.toml on the main branch'
                    raise InputError(str(self.path), f"harness.toml on branch {branch!r} names {named!r} as the main "
                                     "branch, which the repository lacks (deleted or renamed?): make it again where it "
                                     f"was (`git branch {named} COMMIT`; `git reflog` shows where)")
            if m is not None:
                return m
        raise InputError(str(self.path), "no harness.toml on the main branch (run `evoharness init` or adopt)")

    def _manifest_on(self, branch: str) -> Manifest | None:
        sha = gitops.ref_sha(self.repo, f"refs/heads/{branch}")
        if sha is None:  # no such branch, or one git cannot read (its commit gone, a .git/config git cannot parse):
            # until 2026-12-07 the second was 'no harness.toml on the main branch (run `evoharness init` or adopt)'
            why = gitops.ref_target(self.repo, f"refs/heads/{branch}") and (
                gitops.refused_repository(self.path) or gitops.unreadable_ref(self.repo, f"refs/heads/{branch}"))
            if why:
                raise InputError(str(self.path), why)
            return None
        try:
            blob = self.repo.commit(sha).tree[MANIFEST_NAME]
        except KeyError:
            return None
        except (ValueError, git.GitCommandError) as e:  # the branch names an object the repository lacks
            raise InputError(str(self.path), gitops.unreadable_commit(f"refs/heads/{branch}", sha,
                                                                      gitops.damaged_object(e))) from None
        return Manifest.parse(blob.data_stream.read().decode("utf-8"), f"{self.path}/{MANIFEST_NAME}@{branch}")

    @classmethod
    def adopt(cls, path: Path | str, manifest: Manifest | None = None,
              config: HarnessRepoConfig | None = None) -> HarnessRepo:
        """Add a ``harness.toml`` to an existing git repo, committed on its current branch."""
        given, path = Path(path), Path(path).resolve()
        try:
            repo = git.Repo(path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InputError(str(path), _not_a_repository(given)) from None
        if repo.head.is_detached:
            raise InputError(str(path), "HEAD is detached; check out the branch to adopt as main")
        if (path / MANIFEST_NAME).exists():
            raise InputError(str(path / MANIFEST_NAME), "already exists; open the repo instead")
        manifest = (manifest or Manifest()).model_copy(update={"main_branch": repo.active_branch.name})
        (path / MANIFEST_NAME).write_text(manifest.to_toml(), encoding="utf-8")
        env = gitops.identity_env(repo)
        repo.git.add("--", MANIFEST_NAME)
        repo.git.commit("-q", "-m", "evoharness: adopt this repo as a harness", "--", MANIFEST_NAME, env=env)
        return cls(path, config)

    # ---- refs -----------------------------------------------------------------------------

    @property
    def main_ref(self) -> str:
        return f"refs/heads/{self.manifest.main_branch}"

    def main_head(self) -> str:
        sha = gitops.ref_sha(self.repo, self.main_ref)
        if sha is None:
            raise InputError(str(self.path), f"branch {self.manifest.main_branch} does not exist")
        return sha

    def head_of(self, branch: str) -> str:
        sha = gitops.ref_sha(self.repo, f"refs/heads/{branch}")
        if sha is None:
            raise InputError(branch, "no such candidate branch")
        return sha

    def branches(self) -> list[str]:
        out = self.repo.git.for_each_ref("--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}")
        return sorted(line for line in out.splitlines() if line)

    def resolve(self, name: str) -> str:
        """A candidate branch from its name (``candidate/`` optional), a unique prefix of it, or a commit."""
        branches = self.branches()
        for b in (name, BRANCH_PREFIX + name):
            if b in branches:
                return b
        hits = [b for b in branches if self.head_of(b).startswith(name.lower())] if len(name) >= 7 else []
        hits = hits or [b for b in branches if b.removeprefix(BRANCH_PREFIX).startswith(name)]
        if len(hits) == 1:
            return hits[0]
        reason = "ambiguous: " + ", ".join(hits) if hits else "no such candidate"
        raise InputError(name, reason)

    # ---- candidates ------------------------------------------------------------------------

    def create_candidate(self, edit: Edit, round: int = 0, base: str | None = None) -> Candidate:
        """Validate ``edit`` against main (or ``base``) and commit it on a new candidate branch.

        Raises EditRejected with the reason; nothing is written on rejection.
        """
        with gitops.repo_lock(self.repo, self.config.lock_timeout_s):
            base_sha = base or self.main_head()
            files = resolve_edit(self.repo, self.manifest, self.repo.commit(base_sha), edit, self.config)
            tree = gitops.rewrite_tree(self.repo, self.repo.commit(base_sha).tree, files)
            if tree == self.repo.commit(base_sha).tree.hexsha:
                raise EditRejected("edit changes nothing")
            branch = self._free_branch(branch_name(round, edit.message))
            sha = gitops.make_commit(self.repo, tree, commit_message(edit, round, base_sha), [base_sha])
            if not gitops.cas_ref(self.repo, f"refs/heads/{branch}", sha, gitops.ZERO):
                raise EditRejected(f"branch {branch} appeared while creating it; try again")
        log.info("candidate_created", candidate=branch, commit=sha, targets=edit.targets)
        return self.candidate(branch)

    def revise(self, branch: str, edit: Edit) -> Candidate:
        """Add a validated commit to an existing candidate branch (its verdict becomes stale)."""
        with gitops.repo_lock(self.repo, self.config.lock_timeout_s):
            head = self.head_of(branch)
            old = self.candidate(branch)
            files = resolve_edit(self.repo, self.manifest, self.repo.commit(head), edit, self.config)
            tree = gitops.rewrite_tree(self.repo, self.repo.commit(head).tree, files)
            if tree == self.repo.commit(head).tree.hexsha:
                raise EditRejected("edit changes nothing")
            sha = gitops.make_commit(self.repo, tree, commit_message(edit, old.round, old.base), [head])
            if not gitops.cas_ref(self.repo, f"refs/heads/{branch}", sha, head):
                raise EditRejected(f"branch {branch} moved while revising it; try again")
        return self.candidate(branch)

    def _free_branch(self, wanted: str) -> str:
        existing = set(self.branches())
        name, n = wanted, 2
        while name in existing:
            name, n = f"{wanted}-{n}", n + 1
        return name

    def candidates(self) -> list[CandidateInfo]:
        """Every candidate branch: status (pending|verified|merged|rejected), verdict summary, diffstat."""
        from evoharness.harness_repo.review import list_candidates

        return list_candidates(self)

    def candidate(self, branch: str) -> Candidate:
        """The candidate on ``branch``: its head, with the trailers of its latest described commit."""
        head = self.head_of(branch)
        for c in self.repo.iter_commits(head, max_count=50):
            cand = candidate_from_message(branch, head, c.message)
            if cand is not None:
                return cand
        raise InputError(branch, "branch has no commit with a Targets: trailer")

    def open_candidate(self, round: int, signal: str) -> Candidate | None:
        """The candidate of round ``round`` for ``signal`` cut from main's head and not yet verified (a run's node
        re-run after a crash finds its own). Another run's branch of the same round number and signal is none: cut
        from an older main it would be verified on a tree without main's new commits (and its merge refused), and one
        already verified (rejected, merged) would be verified again."""
        prefix, main = f"candidate/r{round}-", self.main_head()
        for branch in self.branches():
            if branch.startswith(prefix):
                cand = self.candidate(branch)
                if cand.targets == signal and cand.base == main and self.verdict_of(self.head_of(branch)) is None:
                    return cand
        return None

    def diff_base(self, branch: str) -> str:
        """Where the candidate forked from main (merge base), or its head when already merged."""
        return self.repo.git.merge_base(self.main_head(), self.head_of(branch))

    def diff(self, candidate: str | Candidate) -> str:
        branch = candidate.branch if isinstance(candidate, Candidate) else candidate
        head = self.head_of(branch)
        base = self._fork_point(branch)
        return self.repo.git.diff(base, head)

    def _fork_point(self, branch: str) -> str:
        head = self.head_of(branch)
        merge_base = self.diff_base(branch)
        if merge_base == head:  # merged: show what the candidate changed over its own base
            base = self.candidate(branch).base
            return base if base and gitops.ref_sha(self.repo, base) else f"{head}^"
        return merge_base

    def changed_paths(self, old: str, new: str) -> list[str]:
        out = self.repo.git.diff("--name-only", "--no-renames", "-z", old, new)
        return [p for p in out.split("\x00") if p]

    def diffstat(self, branch: str) -> dict[str, int | list[str]]:
        head = self.head_of(branch)
        out = self.repo.git.diff("--numstat", "--no-renames", self._fork_point(branch), head)
        files, ins, dels = [], 0, 0
        for line in out.splitlines():
            a, d, path = line.split("\t", 2)
            files.append(path)
            ins += int(a) if a.isdigit() else 0
            dels += int(d) if d.isdigit() else 0
        return {"files": files, "insertions": ins, "deletions": dels}

    # ---- checkouts -------------------------------------------------------------------------

    def holds(self, commit: str) -> bool:
        """Whether the repository holds ``commit`` (a sha): a deleted candidate's commit is pruned by git in time.
        ``repo.commit(sha)`` does not say: for a full sha it never asks whether the object exists."""
        return gitops.ref_sha(self.repo, commit) is not None

    def tree_hash(self, commit: str) -> str:
        """The tree sha of ``commit`` (remembered for full commit shas: the rollout cache asks per request)."""
        tree = self._trees.get(commit)
        if tree is None:
            tree = self.repo.commit(commit).tree.hexsha
            if len(commit) == 40 and commit == commit.lower() and all(c in "0123456789abcdef" for c in commit):
                self._trees[commit] = tree
        return tree

    def export_tree(self, commit: str, dest: Path) -> Path:
        """Write the files of ``commit`` under ``dest`` (created; must be empty or absent)."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise InputError(str(dest), "export destination is not empty")
        for obj in self.repo.commit(commit).tree.traverse():
            target = dest / obj.path
            if obj.type == "tree":
                target.mkdir(parents=True, exist_ok=True)
            elif obj.type == "blob" and obj.mode == gitops.LINK_MODE:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(obj.data_stream.read().decode("utf-8"), target)
            elif obj.type == "blob":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(obj.data_stream.read())
                if obj.mode == gitops.EXEC_MODE:
                    target.chmod(0o755)
        return dest

    @contextlib.contextmanager
    def worktree(self, commit: str) -> Iterator[Path]:
        """A read-only checkout of ``commit`` in a temporary directory, removed afterwards."""
        tmp = Path(tempfile.mkdtemp(prefix=f"harness-{commit[:10]}-"))
        root = self.export_tree(commit, tmp / "tree")
        _chmod_tree(root, writable=False)
        try:
            yield root
        finally:
            _chmod_tree(root, writable=True)
            shutil.rmtree(tmp, ignore_errors=True)

    # ---- verdicts and merges ---------------------------------------------------------------

    def notes(self) -> dict[str, dict]:
        return gitops.read_notes(self.repo, self.config.notes_ref)

    def verdict_of(self, commit: str) -> tuple[str, Verdict] | None:
        """(status, verdict) from the note on ``commit``: status is verdict | rejected | merged."""
        note = self.notes().get(self.repo.commit(commit).hexsha)
        if not note or "verdict" not in note:
            return None
        return note.get("status", "verdict"), Verdict.model_validate(note["verdict"])

    def record_verdict(self, verdict: Verdict) -> None:
        """Attach ``verdict`` as a git note to the commit it verified."""
        commit = self.repo.commit(verdict.commit).hexsha
        with gitops.repo_lock(self.repo, self.config.lock_timeout_s):
            gitops.write_note(self.repo, self.config.notes_ref, commit,
                              {"status": "verdict", "verdict": verdict.model_dump(mode="json")})

    def reject(self, candidate_branch: str, verdict: Verdict) -> None:
        """Mark a candidate rejected; its branch stays, with the verdict in a note on its head. A branch deleted since
        it was verified (while its run waited for review) gets the note on the commit verified, if the repository
        still holds it: 'no such candidate branch' here wedged the run (every resume stopped at this rejection)."""
        head = gitops.ref_sha(self.repo, f"refs/heads/{candidate_branch}")
        if head is None:
            head = verdict.commit if self.holds(verdict.commit) else None
            if head is None:
                log.warning("candidate_rejected_without_note", candidate=candidate_branch, commit=verdict.commit,
                            why="the branch and the commit verified are both gone")
                return
        with gitops.repo_lock(self.repo, self.config.lock_timeout_s):
            gitops.write_note(self.repo, self.config.notes_ref, head,
                              {"status": "rejected", "verdict": verdict.model_dump(mode="json")})
        log.info("candidate_rejected", candidate=candidate_branch, reason=verdict.reason)

    def check_worktree_clear(self) -> None:
        """InfraError when a verified merge could not update main's checked-out files (its index locked, a merge in
        progress): asked before a round's work is spent (``merge.check_worktree_clear``)."""
        from evoharness.harness_repo.merge import check_worktree_clear

        check_worktree_clear(self)

    def merge_verified(self, candidate_branch: str, verdict: Verdict, human_approved: bool = False) -> str:
        """Merge a verified candidate into main (no-ff); return the merge commit's sha.

        Refuses (MergeRefused) unless the verdict accepted exactly the branch's head, measured
        against main's current head, and the candidate touches only editable paths.
        """
        from evoharness.harness_repo.merge import verified_merge

        return verified_merge(self, candidate_branch, verdict, human_approved)


def _chmod_tree(root: Path, writable: bool) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath, name)
            if p.is_symlink():
                continue
            mode = p.stat().st_mode
            p.chmod(mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        Path(dirpath).chmod(0o755 if writable else 0o555)  # top-down: r-x still lets walk descend
