"""Verdicts the verifier signed: a merge needs one, not just any ``Verdict`` object.

The verifier (``verification.Verifier.evaluate``) signs each verdict it reaches with an HMAC-SHA256
keyed by a secret of the harness repository: 32 random bytes in ``<git dir>/evoharness/verdict.key``
(mode 0600, created on first use; outside the working tree, so no candidate, checkout or sandbox sees
it, and found by every process that works on the repo whatever its home or cwd). The signature covers
what a merge relies on: candidate, commit, base, accepted, strategy and who decided. ``verified_merge``
refuses a verdict whose signature does not check, and ``review`` shows a note whose verdict is not
signed (a forged git note) as unverified.

This stops a hand-built ``Verdict`` (the Python API, a role, a forged note) from merging; it does not
stop code that can read the key file, i.e. code running as the service's user outside the sandbox.
Inside a sandbox the key is not visible: bwrap and Docker show the harness as an exported tree (no git
directory), and ``key_exposed`` (checked by the executor before any rollout) refuses a run whose sandbox
would bind the repository's git directory read-only (a harness repo inside the evoharness checkout of an
editable install, or under a ``ro_paths`` entry). A key file that others can read is narrowed to 0600
when it is read.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

import git

from evoharness.harness_repo.models import Verdict

KEY_FILE = Path("evoharness") / "verdict.key"
SIGNED_FIELDS = ("candidate", "commit", "base", "accepted", "strategy", "decided_by")


def key_path(repo: git.Repo) -> Path:
    return Path(repo.common_dir) / KEY_FILE


def key_exposed(repo_path: Path | str, visible: list[Path] | tuple[Path, ...]) -> Path | None:
    """The entry of ``visible`` (host paths a sandbox binds) under which the git directory of the
    repository at ``repo_path`` lies, i.e. where sandboxed code could read its verdict key; None if none."""
    try:
        common = Path(git.Repo(repo_path).common_dir).resolve()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    for p in visible:
        p = Path(p).resolve()
        if common == p or p in common.parents:
            return p
    return None


def _key(repo: git.Repo, create: bool) -> bytes | None:
    path = key_path(repo)
    try:
        if path.stat().st_mode & 0o077:  # readable by others: narrowed before use
            path.chmod(0o600)
        return path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_bytes()
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(32))
    return path.read_bytes()


def _mac(key: bytes, verdict: Verdict) -> str:
    payload = json.dumps({f: getattr(verdict, f) for f in SIGNED_FIELDS}, sort_keys=True).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def sign(repo: git.Repo, verdict: Verdict) -> Verdict:
    """``verdict`` with its signature (only the verifier calls this)."""
    return verdict.model_copy(update={"signature": _mac(_key(repo, create=True) or b"", verdict)})


def is_signed(repo: git.Repo, verdict: Verdict) -> bool:
    """Whether ``verdict`` carries this repository's verifier's signature over its signed fields."""
    key = _key(repo, create=False)
    if key is None or not verdict.signature:
        return False
    return hmac.compare_digest(verdict.signature, _mac(key, verdict))


class VerdictSigner:
    """What the ``Verifier`` is given to sign its verdicts for one harness repository."""

    def __init__(self, repo: git.Repo) -> None:
        self.repo = repo

    def __call__(self, verdict: Verdict) -> Verdict:
        return sign(self.repo, verdict)
