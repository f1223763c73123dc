"""The durable training queue: content failures waiting for weight training.

SQLAlchemy 2.x Core on one table, so the same code runs on SQLite (the default, a file
under ``settings.home``) and PostgreSQL (``datasets.url``). An item is keyed by its
trajectory id: enqueueing the same trajectory twice stores it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from evoharness.diagnosis.models import FailureClass, Label, Lever
from evoharness.errors import InfraError, InputError
from evoharness.logging import get_logger
from evoharness.traces.models import Split, Trajectory

from . import urls
from .models import QueueItem
from .urls import default_url  # noqa: F401 (re-exported: the queue's callers name it here)

log = get_logger(__name__)

_metadata = MetaData()
queue_items = Table(
    "training_queue",
    _metadata,
    Column("trajectory_id", String(512), primary_key=True),
    Column("task_id", String(512), nullable=False, index=True),
    Column("split", String(16), nullable=False),
    Column("failure_class", String(16), nullable=False, index=True),
    Column("first_signal", String(128)),
    Column("harness_commit", String(64)),
    Column("model", String(256)),
    Column("run_id", String(256), index=True),
    Column("round", Integer),
    Column("score", Float),
    Column("trajectory", Text, nullable=False),
    Column("enqueued_at", DateTime(timezone=True), nullable=False),
    # which labeller gave the class and the SHA-256 of ``trajectory`` as stored (since the nineteenth session): an
    # export reuses the class only when both say it is the export labeller's label of this body (``export.reusable``)
    Column("trajectory_sha256", String(64)),
    Column("labeller_fingerprint", String(128)),
)
# columns added after the first queues were written: a queue opened to write gains those it lacks (NULL in its rows)
_ADDED_COLUMNS = ("trajectory_sha256", "labeller_fingerprint")


def queue_from_settings(settings, *, create: bool = True) -> TrainingQueue:
    return TrainingQueue(settings.datasets.url or default_url(settings.home), create=create)


CONNECT_TIMEOUT_S = 10  # a server that takes the connection and never answers held `dataset status` forever


def _parsed(url: str):
    """SQLAlchemy's URL of ``url``; InputError when it can hold no queue (``urls.parse``)."""
    parsed = urls.parse(url)
    if isinstance(parsed, str):
        raise InputError("datasets.url", parsed)
    return parsed


def check_url(url: str) -> None:
    """InputError when ``url`` cannot be a queue to write, found without creating or writing anything: not a
    database URL, another scheme, an in-memory SQLite database (what is enqueued there is gone when the command
    ends), a NUL, a read-only SQLite URI (``mode=ro``), or a SQLite path that is a directory or lies under a
    file. (`dataset enqueue` opens its queue at the first content failure; a URL wrong from the start was
    reported only after the input had been read and labelled up to there.)"""
    parsed = _writable(url)
    path = urls.sqlite_path(parsed)
    if path is None:
        return
    if path.is_dir():
        raise InputError(str(path), "is a directory, not a SQLite queue file")
    above = next((p for p in path.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(str(path), f"{above} is a file, not a directory")


def _writable(url: str):
    parsed = _parsed(url)
    if urls.read_only(parsed):  # was 'unreachable: attempt to write a readonly database' at the first write
        raise InputError("datasets.url", f"{urls.shown(url)!r} opens the queue read-only: nothing could be "
                         f"enqueued; {urls.URL_FORM}")
    return parsed


def check_reachable(url: str) -> None:
    """For a server queue (PostgreSQL): connect once (``CONNECT_TIMEOUT_S``) and disconnect, creating nothing;
    InfraError when the server cannot be reached. `dataset enqueue` calls it before it reads its input: a
    closed port was reported only after the input had been labelled up to its first content failure (or to
    its end, when it had none). A SQLite queue is a local file (`check_url`)."""
    shown = urls.shown(url)
    if _parsed(url).get_backend_name() != "postgresql":
        return
    engine = _engine(url, shown, create=False)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except SQLAlchemyError as e:
        reason = " ".join(str(getattr(e, "orig", None) or e).split())
        raise InfraError(f"training queue {shown!r} unreachable: {e.__class__.__name__}: {reason}") from None
    finally:
        engine.dispose()


def _engine(url: str, shown: str, create: bool) -> Engine:
    parsed = _writable(url) if create else _parsed(url)
    backend = parsed.get_backend_name()
    path = urls.sqlite_path(parsed)
    if path is not None:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.is_file():
            raise InputError(str(path), "no training queue here (nothing enqueued yet, or a mistyped path)"
                             if not path.exists() else "not a file, so no training queue")
    connect_args = {"connect_timeout": CONNECT_TIMEOUT_S} if backend == "postgresql" else {}
    try:
        return create_engine(url, future=True, connect_args=connect_args)
    except (SQLAlchemyError, ModuleNotFoundError, ValueError) as e:
        raise InputError("datasets.url", f"cannot open queue {shown!r}: {e}") from None


def _create_tables(engine: Engine, tries: int = 3) -> None:
    """``create_all`` where another thread or process may be creating the same queue at once: the service's sweep
    (woken by each POST /trajectories) and a POST /datasets/export of source all opened a new queue together, and
    the one whose CREATE TABLE came second, after its own check had found no table, failed ("table training_queue
    already exists", 13 of 100 tries of two threads), an export answered 503. Checked again, the tables are there."""
    for attempt in range(tries):
        try:
            _metadata.create_all(engine)
            return
        except SQLAlchemyError:  # made meanwhile (or unreachable: then the last try says so)
            if attempt == tries - 1:
                raise


def _add_columns(engine: Engine, names: list[str]) -> None:
    """Add ``names`` (of ``_ADDED_COLUMNS``) to an old queue's table, each in its own transaction. Another opener of
    the same old queue (the service's sweep and an export, at the first open after an upgrade) may add one between
    this opener's look at the columns and its ALTER TABLE, which then fails ('duplicate column name'): a column
    that is there when looked at again is no error."""
    for name in names:
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"ALTER TABLE {queue_items.name} ADD COLUMN {name} "
                                     f"{queue_items.c[name].type.compile(engine.dialect)}")
        except SQLAlchemyError:
            if name not in {c["name"] for c in inspect(engine).get_columns(queue_items.name)}:
                raise


# (trajectory, class, first signal's id, lever, its JSON as stored or None): one item for ``enqueue_many``
Entry = tuple[Trajectory, FailureClass, "str | None", Lever, "str | None"]
_IN_CHUNK = 500  # ids per ``IN (...)`` look-up (SQLite allows 32,766 parameters, older builds 999)


def _row(traj: Trajectory, failure_class: FailureClass, first_signal: str | None, lever: Lever, run_id: str | None,
         round: int | None, labeller_fingerprint: str | None, body: str | None) -> dict:
    """The queue's row for one content failure; InputError when ``lever`` is not weights."""
    if lever != Lever.weights:  # the labeller's Router (`diagnosis.routing`) decided the lever
        raise InputError(
            "queue", f"{traj.id}: class {failure_class.value} goes to lever "
            f"{lever.value}, not weights; only content failures are queued")
    if body is None:
        body = traj.model_dump_json()
    return {
        "trajectory_id": traj.id,
        "task_id": traj.task_id,
        "split": traj.split.value,
        "failure_class": failure_class.value,
        "first_signal": first_signal,
        "harness_commit": traj.harness_commit,
        "model": traj.model,
        "run_id": run_id,
        "round": round,
        "score": traj.score,
        "trajectory": body,
        "enqueued_at": datetime.now(UTC),
        "trajectory_sha256": hashlib.sha256(body.encode()).hexdigest(),
        "labeller_fingerprint": labeller_fingerprint,
    }


def _enqueued(row: dict) -> None:
    log.info("queue.enqueued", trajectory=row["trajectory_id"], task=row["task_id"],
             failure_class=row["failure_class"], run_id=row["run_id"], round=row["round"])


class TrainingQueue:
    """Content-failure items with provenance, durable across restarts.

    ``create=False`` opens an existing queue only (for reading: `dataset status`, an export of the queue):
    it creates no SQLite file, directory or table, and a path or database that holds no queue is an
    ``InputError`` (a mistyped path read as "0 items" before, and left a new empty database behind).
    """

    def __init__(self, url: str, *, engine: Engine | None = None, create: bool = True) -> None:
        self.url = url
        # ids enqueued here that the queue held already with other content (not queued: the first copy stays)
        self.conflicts: list[str] = []
        shown = urls.shown(url)
        if engine is None:
            engine = _engine(url, shown, create)
        self.engine = engine
        try:
            if create:
                _create_tables(self.engine)
            elif not inspect(self.engine).has_table(queue_items.name):
                raise InputError(shown, "holds no training queue (nothing enqueued there yet, or another database)")
            have = {c["name"] for c in inspect(self.engine).get_columns(queue_items.name)}
            if create and (missing := [c for c in _ADDED_COLUMNS if c not in have]):
                _add_columns(self.engine, missing)  # a queue from before the columns: its rows hold none
                have.update(missing)
            # read without the columns an older queue opened read-only lacks (its labels are then relabelled)
            self._columns = [c for c in queue_items.c if c.name in have]
        except SQLAlchemyError as e:
            reason = " ".join(str(getattr(e, "orig", None) or e).split())  # one line: no SQLAlchemy background link
            raise InfraError(f"training queue {shown!r} unreachable: {e.__class__.__name__}: {reason}") from None

    def enqueue(self, traj: Trajectory, label: Label, run_id: str | None = None,
                round: int | None = None, labeller_fingerprint: str | None = None) -> bool:
        """Store one content failure; returns False when the trajectory was already queued. ``labeller_fingerprint``:
        the fingerprint of the labeller that made ``label`` (``Labeller.fingerprint``), kept with the SHA-256 of the
        trajectory's JSON as stored, so an export reuses the class only for that labeller and that body (None: an
        export labels the trajectory again)."""
        if label.trajectory_id != traj.id:
            raise InputError("queue", f"label is for {label.trajectory_id!r}, trajectory is {traj.id!r}")
        return self.enqueue_class(traj, label.failure_class, label.first_signal.id if label.first_signal else None,
                                  label.lever, run_id=run_id, round=round, labeller_fingerprint=labeller_fingerprint)

    def enqueue_class(self, traj: Trajectory, failure_class: FailureClass, first_signal: str | None, lever: Lever, *,
                      run_id: str | None = None, round: int | None = None, labeller_fingerprint: str | None = None,
                      body: str | None = None) -> bool:
        """``enqueue`` of a label given by its class, first signal's id and lever (what the queue keeps of a label).
        ``body``: the trajectory's JSON as a store keeps it (``traj`` read from it), kept as it is instead of written
        again."""
        return self._insert_one(_row(traj, failure_class, first_signal, lever, run_id, round, labeller_fingerprint,
                                     body))

    def enqueue_many(self, entries: Iterable[Entry], *, run_id: str | None = None, round: int | None = None,
                     labeller_fingerprint: str | None = None) -> int:
        """``enqueue_class`` of each entry (trajectory, class, first signal's id, lever, body or None), all in one
        transaction (one commit, so one fsync of a SQLite queue, instead of one a trajectory: the service's sweep of
        ~26 ms of fsync each here); returns how many were new. A trajectory queued already, or twice in
        ``entries``, is stored once. Where a concurrent writer queues one of them between the look and the insert,
        the batch is rolled back and each entry enqueued on its own."""
        rows, firsts = [], {}
        for traj, failure_class, first_signal, lever, body in entries:
            row = _row(traj, failure_class, first_signal, lever, run_id, round, labeller_fingerprint, body)
            if (first := firsts.get(traj.id)) is None:
                firsts[traj.id] = row
                rows.append(row)
            elif first["trajectory_sha256"] != row["trajectory_sha256"]:  # twice in the batch, other content
                self._conflict(traj.id)
        if not rows:
            return 0
        try:
            with self.engine.begin() as conn:
                have = set()
                listed = [r["trajectory_id"] for r in rows]
                for i in range(0, len(listed), _IN_CHUNK):
                    have.update(conn.execute(select(queue_items.c.trajectory_id).where(
                        queue_items.c.trajectory_id.in_(listed[i:i + _IN_CHUNK]))).scalars())
                new = [r for r in rows if r["trajectory_id"] not in have]
                for r in rows:
                    if r["trajectory_id"] in have:
                        self._check_same(conn, r)
                if new:
                    conn.execute(insert(queue_items), new)
        except IntegrityError:  # a concurrent writer got there first: one at a time, each one checked
            return sum(self._insert_one(r) for r in rows)
        for r in new:
            _enqueued(r)
        return len(new)

    def _check_same(self, conn, row: dict) -> None:
        """A trajectory queued already: a duplicate when its content is the queued one's, else a conflict (not
        queued either: the first copy of an id stays), noted in ``conflicts`` and logged. Compared by the SHA-256
        kept with the row (computed from its text for a row of a queue from before the column); a row whose digest
        differs is read and written again by this version first (a body an older version wrote, the same
        trajectory)."""
        tid = row["trajectory_id"]
        stored = conn.execute(select(queue_items.c.trajectory_sha256, queue_items.c.trajectory).where(
            queue_items.c.trajectory_id == tid)).first()
        if stored is None:
            return
        digest, text = stored
        if (digest or hashlib.sha256(text.encode()).hexdigest()) == row["trajectory_sha256"]:
            return
        try:
            if hashlib.sha256(Trajectory.model_validate_json(text).model_dump_json().encode()).hexdigest() == \
                    row["trajectory_sha256"]:
                return
        except ValueError:
            pass
        self._conflict(tid)

    def _conflict(self, tid: str) -> None:
        self.conflicts.append(tid)
        log.warning("queue.conflict", trajectory=tid, reason="queued already with other content; not queued")

    def _insert_one(self, row: dict) -> bool:
        with self.engine.begin() as conn:
            if conn.execute(select(queue_items.c.trajectory_id).where(
                    queue_items.c.trajectory_id == row["trajectory_id"])).first():
                self._check_same(conn, row)
                return False
            try:
                conn.execute(insert(queue_items).values(**row))
            except IntegrityError:  # a concurrent writer got there first
                return False
        _enqueued(row)
        return True

    def items(self, *, task_id: str | None = None, failure_class: FailureClass | str | None = None,
              run_id: str | None = None, limit: int | None = None) -> Iterator[QueueItem]:
        """Items in enqueue order, streamed (the whole queue is never held in memory)."""
        q = select(*self._columns).order_by(queue_items.c.enqueued_at, queue_items.c.trajectory_id)
        if task_id is not None:
            q = q.where(queue_items.c.task_id == task_id)
        if failure_class is not None:
            q = q.where(queue_items.c.failure_class == FailureClass(failure_class).value)
        if run_id is not None:
            q = q.where(queue_items.c.run_id == run_id)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            for r in conn.execution_options(yield_per=500).execute(q).mappings():
                enq = r["enqueued_at"]
                item = QueueItem(
                    trajectory_id=r["trajectory_id"], task_id=r["task_id"], split=Split(r["split"]),
                    failure_class=FailureClass(r["failure_class"]), first_signal=r["first_signal"],
                    harness_commit=r["harness_commit"], model=r["model"], run_id=r["run_id"],
                    round=r["round"], score=r["score"],
                    trajectory=Trajectory.model_validate_json(r["trajectory"]),
                    enqueued_at=enq if enq.tzinfo else enq.replace(tzinfo=UTC),
                    trajectory_sha256=r.get("trajectory_sha256"), labeller_fingerprint=r.get("labeller_fingerprint"),
                )
                item._body = r["trajectory"]
                yield item

    def trajectories(self) -> Iterator[Trajectory]:
        for item in self.items():
            yield item.trajectory

    def __iter__(self) -> Iterator[Trajectory]:
        """A re-iterable trajectory source (each iteration re-reads the queue)."""
        return self.trajectories()

    def heldout_task_ids(self) -> set[str]:
        """Tasks any queued trajectory marks as held out (one query, no trajectory parsed)."""
        q = select(queue_items.c.task_id).where(queue_items.c.split == Split.heldout.value).distinct()
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(q)}

    def tasks_and_heldout(self) -> tuple[set[str], set[str]]:
        """(every queued task, those marked held out): two queries, no trajectory parsed."""
        with self.engine.connect() as conn:
            tasks = {r[0] for r in conn.execute(select(queue_items.c.task_id).distinct())}
        return tasks, self.heldout_task_ids()

    def __len__(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(queue_items)).scalar_one()

    def status(self) -> dict:
        """Counts: ``{"total", "by_class", "by_task", "by_run", "by_split"}`` (run None -> "-")."""
        out: dict = {"total": len(self)}
        cols = {"by_class": queue_items.c.failure_class, "by_task": queue_items.c.task_id,
                "by_run": queue_items.c.run_id, "by_split": queue_items.c.split}
        with self.engine.connect() as conn:
            for key, col in cols.items():
                rows = conn.execute(select(col, func.count()).group_by(col).order_by(col)).all()
                out[key] = {("-" if k is None else str(k)): n for k, n in rows}
        return out
