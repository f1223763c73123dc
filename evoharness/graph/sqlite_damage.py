"""A checkpoint database SQLite finds damaged: the one error line that names it (`evoharness.graph.checkpoint`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from evoharness.errors import InputError


def damaged_error(path: Path, spec: str, e: sqlite3.DatabaseError) -> InputError:
    """A checkpoint database SQLite finds damaged (cut short by a crash or a full disk, a page overwritten): it was a
    DatabaseError traceback from `approve`, `reject`, `run --resume` and a new run alike."""
    return InputError(str(path), f"the checkpoint database of run.checkpointer {spec!r} is damaged ({e}): the runs "
                      "it holds cannot be read; restore it from a copy, or move it aside (their checkpoints are lost: "
                      "new runs start afresh)")


def is_intact(conn: sqlite3.Connection) -> bool:
    """Whether SQLite's quick check finds the checkpoint database whole (so a 'malformed' error came from another
    database: the queue's, a cache's)."""
    try:
        return conn.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False
