"""Why a drive stopped, as the one line a paused run prints: an infrastructure failure, or the run's storage
(its disk full, read-only, failing) -- which was a traceback (exit 1): a sqlite3 'database or disk is full' out of
the rollout cache, an OSError out of a trajectory write. Nothing is lost: the node that was running is not
checkpointed and re-runs on resume (every node's side effects are idempotent)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from evoharness.errors import InfraError

# full, over quota or the file size limit (RLIMIT_FSIZE), read-only, failing, not writable
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})
SQLITE_STORAGE = ("disk is full", "readonly database", "read-only", "disk i/o error", "unable to open database")


def paused(e: BaseException, run_id: str, home: Path, hint: str | None) -> InfraError | None:
    """The error a drive that failed with ``e`` raises (one line, with how to resume), or None: not ours to say."""
    hint = hint or f"`evoharness run --resume {run_id}`"
    if isinstance(e, InfraError):
        return type(e)(f"run {run_id} paused: {e.reason}; fix the cause, then {hint}", retryable=e.retryable)
    reason = storage_reason(e, home)
    if reason is None:
        return None
    return InfraError(f"run {run_id} paused: {reason}; fix the cause, then {hint}", retryable=True)


def storage_reason(e: BaseException, home: Path) -> str | None:
    if isinstance(e, OSError) and e.errno in STORAGE_ERRNOS:
        return f"cannot write {e.filename or 'a file of the run'}: {e.strerror}"
    if isinstance(e, sqlite3.OperationalError) and any(s in str(e).lower() for s in SQLITE_STORAGE):
        return f"a SQLite database under {home} cannot be written ({e})"
    return None
