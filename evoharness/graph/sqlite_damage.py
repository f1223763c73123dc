"""A checkpoint database SQLite finds damaged: the one error line that names it (`evoharness.graph.checkpoint`)."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

from evoharness.errors import InputError


class CheckpointDamaged(InputError):
    """The checkpoint database ``path`` is damaged: no retry mends it (the service pauses the run, `Daemon._drive`),
    a person restores or moves the file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(str(path), reason)
        self.path = path


def damaged_error(path: Path, spec: str, e: sqlite3.DatabaseError) -> CheckpointDamaged:
    """A checkpoint database SQLite finds damaged (cut short by a crash or a full disk, a page overwritten): it was a
    DatabaseError traceback from `approve`, `reject`, `run --resume` and a new run alike. The reason gives the exact
    command that moves it aside: its -wal and -shm files with it (a copy put back beside the damaged file's
    write-ahead log would have that log's pages played over it)."""
    aside = (f"cd {shlex.quote(str(path.parent))} && for f in {shlex.quote(path.name)}*; "
             'do mv -- "$f" "$f.damaged"; done')
    return CheckpointDamaged(path, f"the checkpoint database of run.checkpointer {spec!r} is damaged ({e}): the runs "
                             "it holds cannot be read (their run directories and the harness repository are "
                             f"untouched). Move it aside with its -wal and -shm files (`{aside}`), then put a whole "
                             "copy of it in its place; without a copy the runs it holds cannot go on (new runs start "
                             "afresh)")


def is_intact(conn: sqlite3.Connection) -> bool:
    """Whether SQLite's quick check finds the checkpoint database whole (so a 'malformed' error came from another
    database: the queue's, a cache's)."""
    try:
        return conn.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False
