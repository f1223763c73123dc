"""Checkpointer factory: SQLite embedded by default, Postgres by URL, memory for tests."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evoharness.errors import InfraError, InputError
from evoharness.graph.sqlite_damage import damaged_error, is_intact
from evoharness.graph.threads import RUN_THREADS_TABLE


def _pipeline_teardown(record: logging.LogRecord) -> bool:
    """Drop psycopg's 'error ignored terminating <psycopg.Pipeline ...>' warning: the lost connection it is about
    is the CheckpointerLost error line, and the warning was a second line on stderr beside it."""
    return not str(record.msg).startswith("error ignored terminating")


class CheckpointerLost(InfraError):
    """The checkpointer's database went away (Postgres down, restarted, the connection cut). Nothing written is
    lost: the node that was running is not checkpointed and re-runs on resume (every node's side effects are
    idempotent). The service retries the run after its back-off instead of pausing it. ``why``: the driver's
    first line."""

    def __init__(self, reason: str, retryable: bool = True, why: str | None = None) -> None:
        super().__init__(reason, retryable)
        self.why = why or reason


def check_checkpointer(spec: str, run_dir: Path) -> None:
    """Open the checkpointer once before a new run is made (its settings.json written): one that cannot be opened
    is an ``InputError`` and no run exists. A run keeps the settings it started with, so a run made with a wrong
    Postgres URL (password, port, database) paused, and `run --resume` after fixing the setting still read the
    run's saved URL: the run could never go on. A run directory the attempt made (a relative 'sqlite:PATH' is
    read against it) is removed when it fails: no empty run is left behind (the service retried with a new id
    each time, one more each)."""
    made = not run_dir.exists()
    try:
        _open_once(spec, run_dir)
    except BaseException:
        if made:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _open_once(spec: str, run_dir: Path) -> None:
    try:
        with open_checkpointer(spec, run_dir):
            pass
    except CheckpointerLost as e:
        raise InputError("run.checkpointer", f"its database cannot be reached ({e.why}): no run was started (a run "
                         "keeps the checkpointer it starts with); fix it or the database, then start the run "
                         "again") from None
    except sqlite3.Error as e:  # a directory, a file that may not be opened, a full disk
        raise InputError("run.checkpointer", f"{sqlite_path(spec, run_dir)} cannot be used as the checkpoint "
                         f"database ({e}): no run was started; fix it, then start the run again") from None


@contextmanager
def open_checkpointer(spec: str, run_dir: Path) -> Iterator[object]:
    """Yield a LangGraph checkpointer for ``spec``: 'sqlite', 'sqlite:PATH', 'memory' or a postgres URL."""
    if spec == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if spec == "sqlite" or spec.startswith("sqlite:"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = sqlite_path(spec, run_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                saver = SqliteSaver(conn)
                saver.setup()
            except sqlite3.DatabaseError as e:  # another file there (or a cut copy): was a DatabaseError traceback
                code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF
                if code == sqlite3.SQLITE_CORRUPT:
                    raise damaged_error(path, spec, e) from None
                if code != sqlite3.SQLITE_NOTADB:
                    raise
                raise InputError(str(path), f"the checkpoint database of run.checkpointer {spec!r} is not a SQLite "
                                 "database: give run.checkpointer another file (or move this one aside)") from None
            try:
                yield saver
            except sqlite3.DatabaseError as e:  # a damaged page read later (a run's checkpoints), if it is this file's
                if (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF != sqlite3.SQLITE_CORRUPT or is_intact(conn):
                    raise
                raise damaged_error(path, spec, e) from None
        finally:
            conn.close()
        return
    if spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise InputError("run.checkpointer", "Postgres checkpointer needs the 'postgres' extra: "
                             "pip install 'evoharness[postgres]'") from None
        import psycopg

        logging.getLogger("psycopg").addFilter(_pipeline_teardown)  # once: the same filter object
        try:
            with PostgresSaver.from_conn_string(spec) as saver:
                _setup_postgres(saver, spec)
                yield saver
        except psycopg.OperationalError as e:  # down, restarted, or the connection cut: was a traceback
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CheckpointerLost(f"the Postgres checkpointer's database cannot be reached ({first}); the last "
                                   "checkpoint is kept, the node that was running re-runs", why=first) from e
        return
    raise InputError("run.checkpointer", f"unknown checkpointer {spec!r} (sqlite | memory | postgresql://...)")


def sqlite_path(spec: str, run_dir: Path) -> Path:
    """The file of a 'sqlite' or 'sqlite:PATH' checkpointer of the run in ``run_dir``: 'sqlite' is
    ``<home>/runs/checkpoints.sqlite``; a relative PATH is read against the run directory, so a copied or moved run
    (or home) and any cwd find the same file. (It was read against the cwd: `run --resume` from another directory
    found no checkpoint there and started the run over.) An absolute PATH is one file for every copy of the run:
    `claim_thread` keeps a copy from driving the original's thread in it."""
    if spec == "sqlite":
        return run_dir.parent / "checkpoints.sqlite"
    raw = spec.split(":", 1)[1]
    if not raw.strip():
        raise InputError("run.checkpointer", "'sqlite:' needs a file: 'sqlite:PATH' (a relative PATH is read against "
                         "the run directory) or plain 'sqlite'")
    path = Path(raw).expanduser()
    return path if path.is_absolute() else run_dir / path


def checkpoint_place(spec: str, run_dir: Path) -> str:
    """Where a run's checkpoint is, in words (for an error)."""
    if spec == "sqlite" or spec.startswith("sqlite:"):
        return str(sqlite_path(spec, run_dir))
    if spec == "memory":
        return "memory (the 'memory' checkpointer keeps nothing after its process ends)"
    return "the Postgres database of run.checkpointer"


def start_over(spec: str, run_id: str, run_dir: Path) -> dict[str, str]:
    """The input that starts a run with no checkpoint over; InputError when it has made progress: its checkpoint
    is elsewhere (a run directory copied into another home without ``<home>/runs/checkpoints.sqlite``, a relative
    'sqlite:PATH' of a run started before it was read against the run directory). Starting it over re-ran every
    round, rollouts and merges included, over the run's own trajectories. A run killed before its first
    checkpoint has none: the input is checkpointed before the first node runs."""
    done = [name for name in ("summary.json", "trajectories.jsonl")
            if (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0]
    if done:
        raise InputError(run_id, f"no checkpoint of run {run_id} in {checkpoint_place(spec, run_dir)}, but the run "
                         f"has made progress ({', '.join(done)} in {run_dir}): starting it over would re-run its "
                         "rounds. Put the run's checkpoint database there (a run directory copied into another home "
                         "needs that home's runs/checkpoints.sqlite with it), or start a new run")
    return {"run_id": run_id}


_PG_SETUP_LOCK = 0x65766F68  # advisory lock key ("evoh"): one migration at a time per database
_pg_ready: set[str] = set()
_pg_ready_lock = threading.Lock()


def _setup_postgres(saver, spec: str) -> None:
    """Create/migrate the checkpoint tables once per process, under a Postgres advisory lock.

    Concurrent ``setup()`` calls (the service's loop and an API read, or two processes) race on
    ``CREATE TABLE IF NOT EXISTS`` and one fails with a unique violation; the lock serialises them.
    The connection is in autocommit mode, so each poll is its own short transaction.
    """
    with _pg_ready_lock:
        if spec in _pg_ready:
            return
        # poll, never block: a waiting session would hold a snapshot that the holder's
        # CREATE INDEX CONCURRENTLY waits for (a deadlock Postgres reports after a second)
        deadline = time.monotonic() + 120
        while not _locked(saver.conn.execute("SELECT pg_try_advisory_lock(%s) AS locked", (_PG_SETUP_LOCK,))):
            if time.monotonic() > deadline:
                raise InfraError("Postgres checkpointer: another process has been migrating the checkpoint "
                                 "tables for 120 s", retryable=True)
            time.sleep(0.1)
        try:
            saver.setup()
            # claim_thread's table, made here under the lock: two processes (or threads) creating it at once race
            # as setup() does (UniqueViolation on pg_type), and a run's first claim failed with a traceback
            saver.conn.execute(RUN_THREADS_TABLE)
        finally:
            saver.conn.execute("SELECT pg_advisory_unlock(%s)", (_PG_SETUP_LOCK,))
        _pg_ready.add(spec)


def _locked(cursor) -> bool:
    row = cursor.fetchone()  # the saver's connection returns dict rows
    return bool(row["locked"] if isinstance(row, dict) else row[0])
