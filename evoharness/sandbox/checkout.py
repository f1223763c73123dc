"""Read-only exports of harness commits, cached per commit for the life of an executor."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
from pathlib import Path

import git

from evoharness.errors import InputError, missing_reason
from evoharness.harness_repo.gitops import (
    damaged_object,
    damaged_repository,
    refused_repository,
    unreadable_ref,
)


class CheckoutCache:
    """Exports ``commit``'s tree of the harness repo at ``repo_path`` once, read-only.

    A plain directory (not a git repository) is used as it is, whatever commit is asked for;
    its ``commit`` is then reported as ``None``. Call ``close()`` to delete the exports.
    """

    def __init__(self, repo_path: Path | str) -> None:
        self.repo_path = Path(repo_path).resolve()
        if not self.repo_path.is_dir():
            raise InputError(str(repo_path), missing_reason(repo_path) if not self.repo_path.exists() else
                             "not a directory (a harness repo is one)")
        try:
            self.repo: git.Repo | None = git.Repo(self.repo_path)
        except git.InvalidGitRepositoryError:
            # a .git git cannot read (HEAD damaged): until 2026-12-06 the work tree was used as a plain directory,
            # whatever commit was asked for, and the trajectories carried no commit
            if (damaged := damaged_repository(self.repo_path)) is not None:
                raise InputError(str(repo_path), damaged) from None
            self.repo = None
        self._root: Path | None = None
        self._trees: dict[str, Path] = {}
        self._shas: dict[str, str] = {}
        self._lock = threading.Lock()

    def resolve(self, commit: str | None) -> str | None:
        """The full sha of ``commit`` (default: HEAD); None for a plain directory."""
        if self.repo is None:
            return None
        ref = commit or "HEAD"
        with self._lock:  # GitPython's persistent cat-file pipes are not safe across threads
            if ref in self._shas:
                return self._shas[ref]
            try:
                sha = self.repo.commit(ref).hexsha
            except (git.BadName, ValueError, LookupError, NotImplementedError, OSError) as e:
                # GitPython's own rev parser: IndexError for `@{-1}` / `main@{1}` (no reflog entry),
                # NotImplementedError for `HEAD@{yesterday}` -- each was a traceback. A repository git refuses (a
                # .git/config it cannot parse: its cat-file died, a BrokenPipeError that click ended in a silent exit
                # 1) or a branch at a commit it lacks is named as such: until 2026-12-07 GitPython's words
                why = refused_repository(self.repo_path) or unreadable_ref(self.repo, f"refs/heads/{ref}")
                raise InputError(str(self.repo_path), why or f"unknown harness commit {commit!r}: {e}") from None
            if sha == ref:  # only full shas are cached: a branch name may move
                self._shas[ref] = sha
            return sha

    def get(self, commit: str | None) -> Path:
        """A directory holding the harness at ``commit`` (exported on first use)."""
        sha = self.resolve(commit)
        if sha is None:
            return self.repo_path
        with self._lock:
            if sha not in self._trees:
                if self._root is None:
                    self._root = Path(tempfile.mkdtemp(prefix="evoharness-harness-"))
                    self._root.chmod(0o755)
                self._trees[sha] = self._export(sha, self._root / sha[:12])
            return self._trees[sha]

    def _export(self, sha: str, dest: Path) -> Path:
        buf = io.BytesIO()
        try:
            self.repo.archive(buf, treeish=sha, format="tar")
        except (git.GitCommandError, ValueError) as e:  # a ref to an object the repository lacks: was a traceback
            raise InputError(str(self.repo_path), refused_repository(self.repo_path) or (
                f"commit {sha[:10]} cannot be read from the repository ({damaged_object(e)}): a damaged or partly "
                "copied repository")) from None
        buf.seek(0)
        dest.mkdir()
        with tarfile.open(fileobj=buf) as tar:
            extract_tree(tar, dest)
        _make_read_only(dest)
        return dest

    def close(self) -> None:
        with self._lock:
            if self._root is not None:
                for tree in self._trees.values():
                    _make_writable(tree)
                shutil.rmtree(self._root, ignore_errors=True)
            self._root, self._trees = None, {}


def _make_read_only(root: Path) -> None:
    """World-readable, nobody-writable (the sandboxed uid is not the owner)."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath, name)
            if not p.is_symlink():
                exe = p.stat().st_mode & stat.S_IXUSR
                p.chmod(0o555 if exe else 0o444)
        Path(dirpath).chmod(0o555)


def _make_writable(root: Path) -> None:
    for dirpath, _dirs, _files in os.walk(root):
        Path(dirpath).chmod(0o755)


def extract_tree(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract a harness tree, refusing members that escape ``dest`` (absolute, ``..``, links out).

    Python >= 3.11.4 (and 3.12) has extraction filters; Debian 12's Python 3.11.2 does not, so there
    the same check is made by hand before extracting.
    """
    if hasattr(tarfile, "tar_filter"):
        tar.extractall(dest, filter="tar")
        return
    root = dest.resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if target != root and root not in target.parents:
            raise ValueError(f"tar member {member.name!r} escapes the checkout")
        if member.issym() or member.islnk():
            link = (target.parent / member.linkname).resolve() if member.issym() else (root / member.linkname).resolve()
            if link != root and root not in link.parents:
                raise ValueError(f"tar member {member.name!r} links outside the checkout")
        if member.isdev():
            raise ValueError(f"tar member {member.name!r} is a device")
    tar.extractall(dest)  # noqa: S202 -- every member checked above
