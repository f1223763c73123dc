"""Why a drive stopped, as the one line a paused run prints: an infrastructure failure, or the run's storage
(its disk full, read-only, failing) -- which was a traceback (exit 1): a sqlite3 'database or disk is full' out of
the rollout cache, an OSError out of a trajectory write. Nothing is lost: the node that was running is not
checkpointed and re-runs on resume (every node's side effects are idempotent)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from evoharness.errors import InfraError

# full, over quota or the file size limit (RLIMIT_FSIZE), read-only, failing, not writable (under the home)
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})
SQLITE_STORAGE = ("disk is full", "readonly database", "read-only", "disk i/o error", "unable to open database")


def paused(e: BaseException, run_id: str, home: Path, hint: str | None) -> InfraError | None:
    """The error a drive that failed with ``e`` raises (one line, with how to resume), or None: not ours to say."""
    hint = hint or f"`evoharness run --resume {run_id}`"
    if isinstance(e, InfraError):
        return type(e)(f"run {run_id} paused: {e.reason}; fix the cause, then {hint}", retryable=e.retryable)
    reason = storage_reason(e, home)
    if reason is None and isinstance(e, OSError) and e.errno in PERMISSION_ERRNOS:  # not the run's storage
        where = e.filename if e.filename is not None else "an operation"
        return InfraError(f"run {run_id} paused: permission denied: {where} ({e.strerror}; not the run's storage "
                          f"under {home}); fix the cause, then {hint}", retryable=False)
    if reason is None:
        return None
    return InfraError(f"run {run_id} paused: {reason}; fix the cause, then {hint}", retryable=True)


# Permission refused: the run's storage only when the path is under its home. Elsewhere (a sandbox binary that may
# not run, a file the agent's tool may not read, a bwrap that may not create a namespace) it is no storage fault:
# 'paused: cannot write /usr/bin/bwrap' sent the user to free space; it says 'permission denied: PATH' instead.
PERMISSION_ERRNOS = frozenset({errno.EACCES, errno.EPERM})


def storage_reason(e: BaseException, home: Path) -> str | None:
    if isinstance(e, OSError) and e.errno in PERMISSION_ERRNOS:
        path = next((f for f in (e.filename, e.filename2) if _under(f, home)), None)
        return None if path is None else f"cannot access {path}: {e.strerror}"
    if isinstance(e, OSError) and e.errno in STORAGE_ERRNOS:
        return f"cannot write {e.filename or 'a file of the run'}: {e.strerror}"
    if isinstance(e, sqlite3.OperationalError) and any(s in str(e).lower() for s in SQLITE_STORAGE):
        return f"a SQLite database under {home} cannot be written ({e})"
    return None


def _under(name: object, home: Path) -> bool:
    """Whether the path ``name`` (an OSError's filename: str, bytes, a path or None) lies under ``home``."""
    if name is None or isinstance(name, int):
        return False
    try:
        path = Path(name.decode(errors="replace") if isinstance(name, bytes) else name)
        return path.absolute().resolve().is_relative_to(home.absolute().resolve())
    except (OSError, ValueError, TypeError, RuntimeError):
        return False
