"""Checkpointer factory: SQLite embedded by default, Postgres by URL, memory for tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evoharness.errors import InputError


@contextmanager
def open_checkpointer(spec: str, run_dir: Path) -> Iterator[object]:
    """Yield a LangGraph checkpointer for ``spec``: 'sqlite', 'sqlite:PATH', 'memory' or a postgres URL."""
    if spec == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if spec == "sqlite" or spec.startswith("sqlite:"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = Path(spec.split(":", 1)[1]) if ":" in spec else run_dir.parent / "checkpoints.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
        return
    if spec.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise InputError("run.checkpointer", "Postgres checkpointer needs the 'postgres' extra: "
                             "pip install 'evoharness[postgres]'") from None
        with PostgresSaver.from_conn_string(spec) as saver:
            saver.setup()
            yield saver
        return
    raise InputError("run.checkpointer", f"unknown checkpointer {spec!r} (sqlite | memory | postgresql://...)")
