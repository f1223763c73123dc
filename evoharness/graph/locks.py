"""Process locks of a run: one driver at a time, one review decision at a time.

Both are ``flock`` locks on files in the run directory, taken without waiting: a second process is refused
with an InputError (one ``error:`` line) instead of queueing behind the first. The kernel drops a lock when
its process dies, so a SIGKILLed driver never leaves its run locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evoharness.errors import InputError


class RunLocked(InputError):
    """Another process drives the run (``run_lock`` refused): the service says so in the run's phase."""


@contextmanager
def run_lock(run_dir: Path, run_id: str) -> Iterator[None]:
    """Hold ``<run dir>/run.lock`` while the run's graph is driven (start, resume, a review decision, the
    service's loop). Two drivers of one run each ran its rounds: its trajectories were written twice and its
    candidates made twice (``-2`` branches)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd, holder = try_lock(run_dir / "run.lock")
    if fd is None:
        raise RunLocked(run_id, f"the run is being driven by another process{holder}: wait for it to end "
                         "or stop it (two drivers would run its rounds twice)")
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def try_lock(path: Path) -> tuple[int | None, str]:
    """Take an exclusive ``flock`` on ``path`` without waiting: (its descriptor, "") with this process's pid
    written in the file, or (None, " (pid N)") naming the holder ("" when it cannot be read). Closing the
    descriptor, or the process ending, releases it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            pid = os.pread(fd, 32, 0).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            pid = ""
        os.close(fd)
        return None, f" (pid {pid})" if pid.isdigit() else ""
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd, ""


@contextmanager
def decision_lock(run_dir: Path, run_id: str) -> Iterator[None]:
    """Hold ``<run dir>/decision.lock`` while a review decision is read and applied (approve | reject)."""
    fd = os.open(run_dir / "decision.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(run_id, "a review decision for this run is already being applied") from None
        yield
    finally:
        os.close(fd)
