"""Ingestion workers: POST /trajectories bodies parsed, validated, labelled and stored in other processes.

One server process parses and labels on one core at a time (the GIL), however many requests are in
flight. With ``service.workers = N > 1`` the server hands each well-formed canonical body to a pool of
N worker processes (started with ``spawn``, never forked from the threaded server). Each worker owns a
connection to the same SQLite WAL ingest store and commits its batch (``synchronous=FULL``, ids
UNIQUE, ``INSERT OR IGNORE``) before it answers; the server acknowledges only after that answer, so an
acknowledged trajectory is durable whichever process stored it, and a batch posted twice, or to two
workers at once, is stored once. A body that is not a valid batch comes back unparsed (``None``) and
the server's own slow path names what is wrong, as with one process.

The HTTP front (uvicorn, auth, limits), the background loop and every other endpoint stay in the one
server process: the loop's state (the current run, reviews) lives there.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from evoharness.errors import InfraError
from evoharness.logging import get_logger

log = get_logger("evoharness.service")

_store = None  # this worker process's IngestStore (set by _init)


def _init(path: str, diagnosis: dict[str, Any]) -> None:
    global _store
    from evoharness.diagnosis.config import DiagnosisConfig
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.service.ingest import IngestStore

    _store = IngestStore(path, Labeller(DiagnosisConfig.model_validate(diagnosis))).open()
    # pay the one-time costs now, at start-up, not on the first batches (the batch validator is built
    # on first use; the labeller loads its detectors): a second or more each on a loaded machine
    from evoharness.service.routes import _parse_fast

    sample = _parse_fast(b'[{"id": "warm-up", "task_id": "t", "messages": [{"role": "user", "content": "hi"}]}]')
    _store.label_rows(sample)


def _ready() -> bool:
    return _store is not None


def ingest_body(body: bytes, max_batch: int, batch: str | None = None) -> tuple[int, int, list] | None:
    """(received, newly stored, conflicts) once the batch is committed; None when the body is not a valid batch of
    at most ``max_batch`` canonical trajectories (nothing stored). ``batch``: the request's token
    (``IngestStore.add``): a retry of a batch an earlier try committed answers that try's count."""
    from evoharness.service.routes import _parse_fast, sent_digests

    good = _parse_fast(body)
    if good is None or len(good) > max_batch:
        return None
    stored, conflicts = _store.add(good, batch=batch, sent=sent_digests(body, len(good)))
    return len(good), stored, conflicts


class IngestPool:
    """``workers`` processes storing ingested batches into the store at ``path``."""

    def __init__(self, workers: int, path: Path | str, diagnosis: dict[str, Any]) -> None:
        if workers < 2:
            raise ValueError("an ingest pool needs at least 2 workers (1: ingest in the server process)")
        self.workers, self._args = workers, (str(path), diagnosis)
        self._pool = self._new()

    def _new(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init, initargs=self._args)

    async def start(self) -> None:
        """Start every worker now (imports take a second or two each), not on the first requests."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._pool, _ready) for _ in range(self.workers)))

    async def ingest(self, body: bytes, max_batch: int) -> tuple[int, int, list] | None:
        """Store ``body`` in a worker. A dead worker breaks the whole pool (an idle one included): the pool
        is replaced and the batch tried once more on the fresh one, which is safe (ids are UNIQUE, stored
        once); a second death in a row (the batch itself kills workers) answers 503, nothing acknowledged.
        Both tries carry one token (``IngestStore.add``'s ``batch``): when the first one committed before the
        pool failed it (its worker died after the commit, or another worker died while this one was answering),
        the retry answers what it stored instead of counting those ids as duplicates."""
        batch = uuid.uuid4().hex
        try:
            return await self._submit(body, max_batch, batch)
        except BrokenProcessPool:
            pass
        try:
            return await self._submit(body, max_batch, batch)
        except BrokenProcessPool as e:
            raise InfraError(f"ingest worker died twice on this batch ({e}); retry the request") from None

    async def _submit(self, body: bytes, max_batch: int, batch: str) -> tuple[int, int, list] | None:
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, ingest_body, body, max_batch, batch)
        except BrokenProcessPool:
            # a worker died (killed, out of memory): a broken pool takes no more work: replace it once
            # (several requests may see the same broken pool), then let the caller decide
            if self._pool is pool:
                log.warning("service.ingest_worker_died", workers=self.workers)
                self._pool = self._new()
                pool.shutdown(wait=False, cancel_futures=True)
            raise

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
