"""A rollout cache keyed by content: harness tree hash, task, seed, rollout index, model, environment version.

No rollout is paid for twice, and a resumed run reuses what it already has. Storage is one SQLite
file holding trajectory JSON. `CachingRunner` wraps any `RolloutRunner` with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from evoharness.errors import InfraError
from evoharness.sandbox.api import RolloutRequest, RolloutRunner
from evoharness.traces.models import Trajectory


def cache_key(tree: str, task_id: str, seed: int, rollout: int, model: str, env_version: str) -> str:
    """The identity of one rollout. The rollout index is part of it: an offline model's draws are keyed by
    seed, task *and* rollout, so one seed under two indices is two rollouts, not one."""
    raw = json.dumps([tree, task_id, seed, rollout, model, env_version])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class RolloutCache:
    """trajectory JSON by content key, in a SQLite file (created on first use, not at import)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path)
            try:
                # a cache: write-ahead log, no fsync per commit (a run's rollouts were one fsync'd journal
                # transaction per batch, ~1 s of a demo's serial wall). A killed process loses nothing (the log is
                # in the page cache); a power cut may lose the last batches, which a resumed run then runs again
                # without paying for them twice (its ledger's paid keys are in the checkpoint).
                with contextlib.suppress(sqlite3.OperationalError):  # a journal file that cannot be written
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("CREATE TABLE IF NOT EXISTS rollouts (key TEXT PRIMARY KEY, trajectory TEXT NOT NULL)")
            except sqlite3.OperationalError:  # a log file where none can be written (a read-only copy): read it
                conn.close()
                if not self.path.is_file():
                    raise
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            self._conn = conn
        return self._conn

    def get(self, key: str) -> Trajectory | None:
        """The stored trajectory; None when there is none, or its row no longer reads as one (a row of another
        evoharness version's schema, a damaged row): `CachingRunner` runs that rollout again."""
        row = self._db().execute("SELECT trajectory FROM rollouts WHERE key = ?", (key,)).fetchone()
        if not row:
            return None
        try:
            return Trajectory.model_validate_json(row[0])
        except ValueError:  # pydantic's ValidationError: it stopped the run with a traceback
            return None

    def has(self, key: str) -> bool:
        return self._db().execute("SELECT 1 FROM rollouts WHERE key = ?", (key,)).fetchone() is not None

    def put(self, key: str, traj: Trajectory) -> None:
        self.put_many([(key, traj)])

    def put_many(self, items: list[tuple[str, Trajectory]]) -> None:
        """Store several rollouts in one transaction (one fsync, not one per rollout)."""
        with self._db() as db:
            db.executemany(
                "INSERT OR REPLACE INTO rollouts (key, trajectory) VALUES (?, ?)",
                [(key, traj.model_dump_json()) for key, traj in items],
            )

    def __len__(self) -> int:
        return self._db().execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class CachingRunner:
    """A `RolloutRunner` that answers from the cache and runs (and stores) only the misses.

    ``tree_of`` maps a harness commit to its tree hash (identity by default), so two commits with
    the same files share rollouts.
    """

    def __init__(
        self,
        runner: RolloutRunner,
        cache: RolloutCache,
        model: str = "",
        env_version: str = "",
        tree_of: Callable[[str], str] | None = None,
    ) -> None:
        self.runner, self.cache = runner, cache
        self.model, self.env_version = model, env_version
        self.tree_of = tree_of or (lambda commit: commit)
        self.hits = 0
        self.paid = 0

    def key(self, req: RolloutRequest) -> str:
        return cache_key(
            self.tree_of(req.harness_commit), req.task_id, req.seed, req.rollout, self.model, self.env_version
        )

    def misses(self, requests: list[RolloutRequest]) -> list[RolloutRequest]:
        seen: set[str] = set()
        out = []
        for r in requests:
            k = self.key(r)
            if k not in seen and not self.cache.has(k):
                out.append(r)
            seen.add(k)
        return out

    def _pay(self, todo: list[RolloutRequest]) -> None:
        fresh = self.runner.run(todo)
        if len(fresh) != len(todo):
            raise InfraError(f"runner returned {len(fresh)} trajectories for {len(todo)} requests")
        self.cache.put_many([(self.key(req), traj) for req, traj in zip(todo, fresh, strict=True)])
        self.paid += len(todo)

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        todo = self.misses(requests)
        if todo:
            self._pay(todo)
        out = [self.cache.get(self.key(r)) for r in requests]
        again = {self.key(r): r for r, t in zip(requests, out, strict=True) if t is None}
        if again:  # stored rows that no longer read as trajectories: run again, replacing them
            self._pay(list(again.values()))
            todo += list(again.values())
            out = [t if t is not None else self.cache.get(self.key(r)) for r, t in zip(requests, out, strict=True)]
        trajs: list[Trajectory] = []
        for r, t in zip(requests, out, strict=True):
            if t is None:  # pragma: no cover - just stored
                raise KeyError(r)
            trajs.append(t)
        self.hits += len(requests) - len(todo)
        return trajs
