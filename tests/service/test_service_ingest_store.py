"""The ingestion store in process: concurrent writers, idempotency, and its SQL composition."""

from __future__ import annotations

import threading
import zlib

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import label_all
from evoharness.service.ingest import IngestStore
from evoharness.traces.models import Trajectory
from tests.service.helpers import trajectory

KINDS = ["healthy", "content", "process", "content"]


def _batch(r: int, size: int = 20) -> list[Trajectory]:
    # each batch repeats 5 ids of the previous batch: duplicates across concurrent writers
    ids = [f"s{r}-{i}" for i in range(size - 5)] + [f"s{max(r - 1, 0)}-{i}" for i in range(5)]
    return [Trajectory.model_validate(trajectory(t, KINDS[zlib.crc32(t.encode()) % 4], task=f"task-{i % 7}"))
            for i, t in enumerate(ids)]


def test_200_concurrent_writers_lose_nothing_and_store_each_id_once(tmp_path):
    store = IngestStore(tmp_path / "ingest.sqlite").open()
    batches = [_batch(r) for r in range(200)]
    results: list[int] = []
    lock = threading.Lock()

    def write(b):
        n = store.add(b).stored
        with lock:
            results.append(n)

    threads = [threading.Thread(target=write, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    distinct = {t.id for b in batches for t in b}
    assert sum(results) == len(distinct) == len(store)
    assert set(store.ids()) == distinct
    store.close()
    reopened = IngestStore(tmp_path / "ingest.sqlite").open()
    assert len(reopened) == len(distinct) and reopened.add(batches[7]).stored == 0


def test_sql_composition_matches_the_labeller_composition(tmp_path):
    store = IngestStore(tmp_path / "ingest.sqlite").open()
    trajs = {t.id: t for r in range(6) for t in _batch(r)}  # first copy of an id wins, as in the store
    for r in range(6):
        store.add(_batch(r))
    ours = store.composition()
    ref = Composition.from_labels(label_all(list(trajs.values())))
    assert ours.counts == ref.counts and ours.n == ref.n
    for field in ("delivery_rate", "mean_score", "score_among_delivered"):
        assert abs(getattr(ours, field) - getattr(ref, field)) < 1e-9, field
    assert ours.lever == ref.lever
    assert [(s.id, s.count) for s in ours.top_signals] == [(s.id, s.count) for s in ref.top_signals]
    last = store.composition(last=5)
    assert last.n == 5
    assert [t.id for t in store][:3] == list(trajs)[:3]  # arrival order



def test_a_batch_token_answers_a_retry_with_the_first_tries_count_and_is_dropped_after_an_hour(tmp_path):
    """``add(batch=token)``: the ingest pool's retry of a batch whose first try committed (its worker died before
    answering) gets that try's count, stores nothing twice, and does not change what a plain duplicate answers."""
    from evoharness.service.ingest import BATCH_TOKENS_KEPT_S

    store = IngestStore(tmp_path / "ingest.sqlite").open()
    first = _batch(1)
    assert store.add(_batch(0)).stored == 15  # 15 distinct ids
    assert store.add(first, batch="req-1").stored == 15  # 5 of its 20 ids were batch 0's
    assert store.add(first, batch="req-1").stored == 15  # the retry: what the first try stored, not 20 duplicates
    assert store.add(first, batch="req-2").stored == 0  # another request with the same ids: duplicates
    assert store.add(first).stored == 0
    assert len(store) == 30
    # a token is kept for BATCH_TOKENS_KEPT_S, then dropped by a later batch's commit
    store.add(_batch(5), batch="req-3")
    store._writer.execute("UPDATE ingest_batches SET at = at - ? WHERE token != 'req-3'", (BATCH_TOKENS_KEPT_S + 1,))
    store.add(_batch(6), batch="req-4")
    assert [r[0] for r in store._reader().execute("SELECT token FROM ingest_batches ORDER BY token")] == [
        "req-3", "req-4"]
    assert store.add(first, batch="req-1").stored == 0  # forgotten: answered as what it is now, duplicates
