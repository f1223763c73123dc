"""The ingestion store: trajectories posted to the service, labelled on arrival.

SQLite in WAL mode with ``synchronous=FULL``: a committed batch is in the fsync'd write-ahead
log before the request is acknowledged, so a SIGKILL (or a power cut) after the answer loses
nothing. The trajectory id is UNIQUE, so ingestion is idempotent (``INSERT OR IGNORE``: the
first copy of an id wins). One writer connection behind a lock serialises the commits (SQLite
allows one writer anyway; the lock avoids its sleep-and-retry busy handler); readers get their
own connection per thread and never block the writer (WAL).

Each row keeps the label columns (class, first signal, lever, delivered, score), so the
composition of everything ingested is one aggregate query, and a ``queued`` flag for the content
failures the daemon has moved into the training queue. With the label, the SHA-256 of the row's body and the
labeller's fingerprint (``diagnosis.fingerprint``): an export of the store (``POST /datasets/export``, source
healthy or all) reuses a row's class instead of labelling the run again only when both say it is that body's label
and the export's labeller's (``datasets.export.reusable``, as for `dataset export --labels`). A store written before
those columns gains them, empty, when it is opened: its rows are labelled again by an export.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from evoharness.diagnosis.composition import Composition, SignalCount, classes
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import LABEL_SCHEMA_VERSION, LabelHead
from evoharness.errors import InfraError
from evoharness.traces.models import Trajectory
from evoharness.traces.store import current_kept, parse_trajectory

SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    task_id TEXT NOT NULL,
    split TEXT NOT NULL,
    failure_class TEXT NOT NULL,
    first_signal TEXT,
    lever TEXT NOT NULL,
    delivered INTEGER NOT NULL,
    score REAL,
    queued INTEGER NOT NULL DEFAULT 0,
    ingested_at REAL NOT NULL,
    body TEXT NOT NULL,
    body_sha256 TEXT,
    labeller_fingerprint TEXT,
    sent_sha256 TEXT
);
CREATE INDEX IF NOT EXISTS trajectories_unqueued ON trajectories(seq) WHERE lever = 'weights' AND queued = 0;
CREATE INDEX IF NOT EXISTS trajectories_lever ON trajectories(lever, seq);
CREATE TABLE IF NOT EXISTS ingest_batches (
    token TEXT PRIMARY KEY,
    stored INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ingest_batches_at ON ingest_batches(at);
"""
# how long a batch token (``add(batch=...)``) is kept: the ingest pool retries within the same request, seconds later
BATCH_TOKENS_KEPT_S = 3600.0
# columns added after the first stores were written: ``open`` adds those a store lacks (NULL in its rows)
_ADDED_COLUMNS = (("body_sha256", "TEXT"), ("labeller_fingerprint", "TEXT"), ("sent_sha256", "TEXT"))
_IN_CHUNK = 500  # ids per ``IN (...)`` look-up (SQLite allows 32,766 parameters, older builds 999)


class Added(NamedTuple):
    """What ``IngestStore.add`` did with a batch: how many records were stored, and the conflicts (index in the batch,
    id): records whose id was stored already (earlier, or earlier in the same batch) with other content -- not stored.
    The rest (received - stored - conflicts) are duplicates: the same content again (a retry), stored once."""

    stored: int
    conflicts: list[tuple[int, str]]


class IngestStore:
    """Durable, idempotent store of ingested trajectories with their labels."""

    def __init__(self, path: Path | str, labeller: Labeller | None = None) -> None:
        self.path = Path(path)
        self.labeller = labeller or Labeller()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._writer: sqlite3.Connection | None = None
        self._readers: list[sqlite3.Connection] = []

    # -- connections ----------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as e:
            raise InfraError(f"ingest store {self.path}: {e}") from None
        return conn

    def open(self) -> IngestStore:
        """Create the file and schema (idempotent); called by the app at start-up, not at import."""
        with self._lock:
            if self._writer is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = self._connect()
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise InfraError(f"ingest store {self.path}: cannot enable WAL (got {mode})")
                conn.executescript(SCHEMA)
                have = {r[1] for r in conn.execute("PRAGMA table_info(trajectories)")}
                for name, kind in _ADDED_COLUMNS:
                    if name not in have:  # a store from before the column: its rows hold none
                        conn.execute(f"ALTER TABLE trajectories ADD COLUMN {name} {kind}")
                self._writer = conn
        return self

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.open()
            conn = self._local.conn = self._connect()
            with self._lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for c in [self._writer, *self._readers]:
                if c is not None:
                    c.close()
            self._writer, self._readers = None, []
            self._local = threading.local()

    # -- writes -----------------------------------------------------------------------------
    def label_rows(self, trajectories: list[Trajectory], sent: dict[int, str] | None = None) -> list[tuple]:
        """Rows ready to insert (labelling is CPU work: done before taking the write lock), each with its body's
        SHA-256 and the labeller's fingerprint (None for a labeller of custom detectors: an export labels again), and
        the digest of the record as sent where ``sent`` gives one (its index: a record read lossily, NULL else)."""
        now = time.time()
        fingerprint = self.labeller.fingerprint
        sent = sent or {}
        rows = []
        for i, t in enumerate(trajectories):
            lab = self.labeller.label(t)
            body = t.model_dump_json()
            rows.append((t.id, t.task_id, t.split.value, lab.failure_class.value,
                         lab.first_signal.id if lab.first_signal else None, lab.lever.value,
                         int(t.delivered), t.score, now, body, hashlib.sha256(body.encode()).hexdigest(),
                         fingerprint, sent.get(i)))
        return rows

    def add(self, trajectories: list[Trajectory], batch: str | None = None,
            sent: dict[int, str] | None = None) -> Added:
        """Store (durably: committed and fsync'd) those not stored yet; returns how many were new and the conflicts.

        A record whose id is stored already is a duplicate when its content is the stored content (a retry: nothing
        to do) and a conflict when it is not: neither stores it (the first copy of an id wins), but the conflicts are
        returned by index and id so the caller says so (``_conflicts``). ``sent``: for the records read lossily
        (a lone surrogate escape read as U+FFFD), index -> the SHA-256 of the record as sent; two records that read
        alike but were sent differently then conflict.

        ``batch``: a token naming one request's batch (the ingest pool's, ``service/workers.py``). How many were new
        is recorded under it in the same commit, and a later ``add`` under the same token stores nothing and returns
        that count: a batch tried again because its first try's worker (or pool) died after the commit and before
        the answer is answered with what the first try stored, not as duplicates. Tokens older than
        ``BATCH_TOKENS_KEPT_S`` are dropped."""
        rows = self.label_rows(trajectories, sent)
        self.open()
        with self._lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
                done = None if batch is None else conn.execute(
                    "SELECT stored FROM ingest_batches WHERE token = ?", (batch,)).fetchone()
                if done is not None:  # this batch's earlier try committed it: its conflicts are conflicts again
                    conflicts = _conflicts(conn, rows) if done[0] < len(rows) else []
                    conn.execute("COMMIT")
                    return Added(done[0], conflicts)
                before = conn.total_changes
                conn.executemany(
                    "INSERT OR IGNORE INTO trajectories (id, task_id, split, failure_class, first_signal, lever, "
                    "delivered, score, ingested_at, body, body_sha256, labeller_fingerprint, sent_sha256) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                stored = conn.total_changes - before
                # all new (the usual batch): nothing to compare; else each record's content against its id's row
                conflicts = _conflicts(conn, rows) if stored < len(rows) else []
                if batch is not None:
                    now = time.time()
                    conn.execute("DELETE FROM ingest_batches WHERE at < ?", (now - BATCH_TOKENS_KEPT_S,))
                    conn.execute("INSERT INTO ingest_batches (token, stored, at) VALUES (?, ?, ?)",
                                 (batch, stored, now))
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise InfraError(f"ingest store {self.path}: {e}") from None
            return Added(stored, conflicts)

    def mark_queued(self, ids: list[str]) -> None:
        with self._lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("UPDATE trajectories SET queued = 1 WHERE id = ?", [(i,) for i in ids])
            conn.execute("COMMIT")

    # -- reads ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._reader().execute("SELECT count(*) FROM trajectories").fetchone()[0]

    def ids(self) -> list[str]:
        return [r[0] for r in self._reader().execute("SELECT id FROM trajectories ORDER BY seq")]

    def get(self, trajectory_id: str) -> Trajectory | None:
        row = self._reader().execute("SELECT body FROM trajectories WHERE id = ?", (trajectory_id,)).fetchone()
        return Trajectory.model_validate_json(row[0]) if row else None

    def count_lever(self, lever: str, after_seq: int = 0) -> int:
        q = "SELECT count(*) FROM trajectories WHERE lever = ? AND seq > ?"
        return self._reader().execute(q, (lever, after_seq)).fetchone()[0]

    def last_seq(self) -> int:
        return self._reader().execute("SELECT coalesce(max(seq), 0) FROM trajectories").fetchone()[0]

    def process_failures(self, after_seq: int, upto_seq: int, limit: int) -> list[Trajectory]:
        """Process failures (lever harness) with ``after_seq < seq <= upto_seq``: the most recent ``limit``,
        in arrival order."""
        if limit <= 0:
            return []
        q = ("SELECT body FROM (SELECT seq, body FROM trajectories WHERE lever = 'harness' AND seq > ? AND seq <= ? "
             "ORDER BY seq DESC LIMIT ?) ORDER BY seq")
        return [Trajectory.model_validate_json(r[0]) for r in self._reader().execute(q, (after_seq, upto_seq, limit))]

    def unqueued_content(self, limit: int = 500) -> list[Trajectory]:
        return [t for t, _, _ in self.unqueued_labelled(limit)]

    def unqueued_labelled(self, limit: int = 500) -> list[tuple[Trajectory, str, LabelHead]]:
        """The content failures not yet queued, in arrival order (at most ``limit``): each trajectory with its body as
        stored and its stored label (a ``LabelHead`` with the body's digest and the labeller's fingerprint, for
        ``datasets.export.reusable``: the sweep queues a row under its stored class when both say it is this body's
        label and the sweeping labeller's). Bodies are read as JSONL lines are (``parse_trajectory``)."""
        q = ("SELECT id, failure_class, first_signal, body, body_sha256, labeller_fingerprint FROM trajectories "
             "WHERE lever = 'weights' AND queued = 0 ORDER BY seq LIMIT ?")
        return [(parse_trajectory(body), body, _stored_label(tid, cls, first, digest, fingerprint))
                for tid, cls, first, body, digest, fingerprint in self._reader().execute(q, (limit,))]

    def __iter__(self) -> Iterator[Trajectory]:
        """Every stored trajectory in arrival order (re-iterable: each iteration re-reads), each body read as a
        JSONL line is (``traces.store.parse_trajectory``: ``model_validate_json``'s trajectory, ~15% fewer
        instructions). Inside
        ``keeping_lines()`` (an export) each one's body and stored label are noted (``KeptLine.keep``): the label as a
        ``LabelHead`` with the body's digest and the labeller's fingerprint, for ``datasets.export.reusable``."""
        kept = current_kept()
        conn = self._connect()
        try:
            if kept is None:
                for (body,) in conn.execute("SELECT body FROM trajectories ORDER BY seq"):
                    yield parse_trajectory(body)
                return
            # the body as the bytes stored (its UTF-8, which its digest is of) where the database's text is UTF-8 (a
            # store this service made): read as text, each body was decoded into a str only to be encoded back for
            # its digest (~4% of an export of the store); a database of another text encoding is read as text
            utf8 = conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-8"
            for tid, cls, first, body, digest, fingerprint in conn.execute(
                    f"SELECT id, failure_class, first_signal, {'CAST(body AS BLOB)' if utf8 else 'body'}, body_sha256, "
                    "labeller_fingerprint FROM trajectories ORDER BY seq"):
                raw = body if type(body) is bytes else body.encode()
                traj = parse_trajectory(raw)
                kept.keep(traj, raw, _stored_label(tid, cls, first, digest, fingerprint))
                yield traj
        finally:
            conn.close()

    def composition(self, last: int | None = None, examples: int = 3, top: int = 8) -> Composition:
        """The failure composition of the ingested trajectories (all, or the ``last`` N)."""
        conn = self._reader()
        src = "trajectories"
        if last is not None:
            # SQLite's LIMIT is a 64-bit integer: ?last=10**22 was a 500 (more than there are is all of them)
            src = f"(SELECT * FROM trajectories ORDER BY seq DESC LIMIT {min(int(last), 2**63 - 1)})"
        n, delivered, scored, mean, n_del_scored, mean_del = conn.execute(
            f"SELECT count(*), coalesce(sum(delivered), 0), count(score), avg(score), "
            f"count(CASE WHEN delivered = 1 THEN score END), avg(CASE WHEN delivered = 1 THEN score END) "
            f"FROM {src}").fetchone()
        by_class = dict(conn.execute(f"SELECT failure_class, count(*) FROM {src} GROUP BY failure_class"))
        by_lever = dict(conn.execute(f"SELECT lever, count(*) FROM {src} GROUP BY lever"))
        firsts = conn.execute(
            f"SELECT first_signal, count(*) AS c FROM {src} WHERE failure_class != 'healthy' "
            f"AND first_signal IS NOT NULL GROUP BY first_signal ORDER BY c DESC, first_signal LIMIT ?",
            (top,)).fetchall()
        signals = []
        for sig, count in firsts:
            ex = [r[0] for r in conn.execute(
                f"SELECT id FROM {src} WHERE first_signal = ? AND failure_class != 'healthy' ORDER BY seq LIMIT ?",
                (sig, examples))]
            signals.append(SignalCount(id=sig, count=count, share=count / n, examples=ex))
        return Composition(
            n=n, shares={c: (by_class.get(c, 0) / n if n else 0.0) for c in classes(by_class)},
            counts={c: by_class.get(c, 0) for c in classes(by_class)},
            delivery_rate=(delivered / n) if n else None, mean_score=mean if scored else None,
            score_among_delivered=mean_del if n_del_scored else None, n_scored=scored, n_unscored=n - scored,
            lever={k: (by_lever.get(k, 0) / n if n else 0.0) for k in ("harness", "weights", "none")},
            top_signals=signals)

    def stats(self) -> dict[str, Any]:
        conn = self._reader()
        total, queued = conn.execute("SELECT count(*), coalesce(sum(queued), 0) FROM trajectories").fetchone()
        return {"total": total, "queued_for_training": queued}


def _conflicts(conn: sqlite3.Connection, rows: list[tuple]) -> list[tuple[int, str]]:
    """(index, id) of each row (``label_rows``') whose id's stored row holds other content. Every id of ``rows`` is
    stored by now (this batch stored the ones that were new), so each row is compared with its id's row: its digest
    (``sent_sha256`` where the record was read lossily, else ``body_sha256``) against the stored one. A row of a store
    from before those columns (no digest) is compared by its body's SHA-256, computed here. Where the digests differ
    but the stored body was read losslessly, the stored body is read and written again by this version (a store from
    an older schema, whose dump of the same trajectory differs): the same dump is a duplicate, not a conflict."""
    ids = list(dict.fromkeys(r[0] for r in rows))
    have: dict[str, tuple[str | None, str | None, str]] = {}
    for i in range(0, len(ids), _IN_CHUNK):
        chunk = ids[i:i + _IN_CHUNK]
        have.update((tid, (digest, sent, body)) for tid, digest, sent, body in conn.execute(
            f"SELECT id, body_sha256, sent_sha256, body FROM trajectories WHERE id IN ({','.join('?' * len(chunk))})",
            chunk))
    out = []
    for i, row in enumerate(rows):
        tid, ours, ours_sent = row[0], row[10], row[12]
        digest, sent, body = have[tid]
        if (ours_sent or ours) == (sent or digest or hashlib.sha256(body.encode()).hexdigest()):
            continue  # the same content: a duplicate
        if ours_sent is None and sent is None and _redumped_digest(body) == ours:
            continue
        out.append((i, tid))
    return out


def _redumped_digest(body: str) -> str | None:
    try:
        return hashlib.sha256(parse_trajectory(body).model_dump_json().encode()).hexdigest()
    except ValueError:  # a row that no longer reads as a trajectory: its content is not this record's
        return None


def _stored_label(tid: str, cls: str, first: str | None, digest: str | None, fingerprint: str | None) -> LabelHead:
    """A row's stored label as the readers of a labels line take it (``LabelHead``)."""
    return LabelHead.model_validate({
        "schema_version": LABEL_SCHEMA_VERSION, "trajectory_id": tid, "failure_class": cls,
        "first_signal": None if first is None else {"id": first}, "trajectory_sha256": digest,
        "labeller_fingerprint": fingerprint})
