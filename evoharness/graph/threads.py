"""Which run directory drives a thread of a checkpointer shared between copies of a run (Postgres, an absolute
'sqlite:PATH'): the ``evoharness_run_threads`` table and the claim on it (``graph.checkpoint`` makes the table
under its Postgres setup lock)."""

from __future__ import annotations

from pathlib import Path

from evoharness.errors import InputError

RUN_THREADS_TABLE = ("CREATE TABLE IF NOT EXISTS evoharness_run_threads "
                     "(thread_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL)")


def shared_between_copies(spec: str) -> bool:
    """Whether a copy of a run directory names the original's checkpoint: a Postgres URL or an absolute
    'sqlite:PATH' (one database whatever the directory)."""
    if spec.startswith(("postgres://", "postgresql://")):
        return True
    return spec.startswith("sqlite:") and Path(spec.split(":", 1)[1]).expanduser().is_absolute()


def claim_thread(saver, spec: str, thread_id: str, run_dir: Path) -> None:
    """Refuse to drive ``thread_id`` of a shared checkpointer from a run directory it was not created for.

    A Postgres checkpoint (or an absolute 'sqlite:PATH') lives outside the run directory: a copy of the directory
    (a demo copied with `cp -r`, or another home with the same run id) names the same thread, and resuming the copy
    wrote its rounds into the original's checkpoint. The thread's directory is recorded in
    ``evoharness_run_threads`` the first time a run is driven; a directory that is not it is refused with an
    InputError while the recorded one still holds the run (its settings.json), and takes the thread over when
    it does not (the run directory was moved). 'sqlite' (the default) and a relative 'sqlite:PATH' keep the
    checkpoint in the run's home or directory, so a copy has its own; 'memory' keeps none.
    """
    if not shared_between_copies(spec):
        return
    here = str(run_dir.resolve())
    conn = saver.conn
    pg = spec.startswith(("postgres://", "postgresql://"))
    if not pg:  # Postgres: _setup_postgres made the table under its advisory lock
        conn.execute(RUN_THREADS_TABLE)

    def sql(text: str) -> str:
        return text if pg else text.replace("%s", "?")

    conn.execute(sql("INSERT INTO evoharness_run_threads (thread_id, run_dir) VALUES (%s, %s) "
                     "ON CONFLICT (thread_id) DO NOTHING"), (thread_id, here))
    row = conn.execute(sql("SELECT run_dir FROM evoharness_run_threads WHERE thread_id = %s"), (thread_id,)).fetchone()
    owner = row["run_dir"] if isinstance(row, dict) else row[0]
    if owner == here:
        return
    if (Path(owner) / "settings.json").is_file():
        kind = "Postgres" if pg else "SQLite"
        raise InputError(str(run_dir), f"run {thread_id}'s {kind} checkpoint (thread {thread_id!r}) belongs to "
                         f"{owner}, and this directory is a copy: driving it would write into that run's "
                         "checkpoint. Resume the run from its own directory (or start a new run)")
    conn.execute(sql("UPDATE evoharness_run_threads SET run_dir = %s WHERE thread_id = %s AND run_dir = %s"),
                 (here, thread_id, owner))  # moved: the old directory no longer holds the run

