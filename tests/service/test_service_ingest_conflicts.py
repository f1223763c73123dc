"""A record whose id is stored already with other content is a conflict, not a duplicate: not stored, but listed in
the answer (index and id), counted in a metric and logged. A true re-send (the same content) stays a duplicate."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from evoharness.config import Settings
from evoharness.service.app import create_app
from evoharness.service.ingest import IngestStore
from evoharness.traces.models import Trajectory
from tests.service.helpers import trajectory

TOKEN = "s3cret-token-0123456789"
JSON = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
CONFLICT = "id stored already with other content; not stored"


def _app(root):
    settings = Settings.model_validate({"home": str(root / "home"), "run": {"harness": str(root / "h")},
                                        "service": {"loop": False}})
    return TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False)


@pytest.fixture
def client(tmp_path):
    with _app(tmp_path) as c:
        yield c


def _post(c, records, **dumps) -> dict:
    r = c.post("/trajectories", content=json.dumps(records, **dumps).encode(), headers=JSON)
    assert r.status_code == 200, r.text
    return r.json()


def _metric(c, name: str) -> float:
    for line in c.get("/metrics", headers=JSON).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(name)


def test_a_conflict_in_one_batch_is_listed_and_the_first_copy_kept(client):
    batch = [trajectory("a"), trajectory("b"), trajectory("a", "process"), trajectory("b")]
    with capture_logs() as logs:
        got = _post(client, batch)
    assert got == {"received": 4, "stored": 2, "duplicates": 1,
                   "conflicts": [{"index": 2, "id": "a", "error": CONFLICT}]}
    assert client.get("/trajectories/a", headers=JSON).json()["final_answer"] == "Order 42: shipped."
    assert _metric(client, "evoharness_ingest_conflicts_total") == 1
    assert _metric(client, "evoharness_ingest_duplicates_total") == 1
    said = [e for e in logs if e["event"] == "service.ingest_conflicts"]
    assert len(said) == 1 and said[0]["ids"] == ["a"] and said[0]["log_level"] == "warning"


def test_a_conflict_across_batches_and_a_true_resend_stays_a_duplicate(client):
    assert _post(client, [trajectory("x"), trajectory("y", "content")])["stored"] == 2
    # the same records again, keys in another order: the same content, a retry
    again = _post(client, [dict(reversed(list(trajectory("y", "content").items()))), trajectory("x")])
    assert again == {"received": 2, "stored": 0, "duplicates": 2, "conflicts": []}
    changed = {**trajectory("x"), "score": 0.5}
    got = _post(client, [trajectory("z"), changed])
    assert got == {"received": 2, "stored": 1, "duplicates": 0,
                   "conflicts": [{"index": 1, "id": "x", "error": CONFLICT}]}
    assert client.get("/trajectories/x", headers=JSON).json()["score"] == 1.0
    assert _metric(client, "evoharness_ingest_conflicts_total") == 1


def test_a_conflict_across_a_restart(tmp_path):
    with _app(tmp_path) as c:
        assert _post(c, [trajectory("r1"), trajectory("r2")])["stored"] == 2
    with _app(tmp_path) as c:
        got = _post(c, [trajectory("r1"), {**trajectory("r2"), "task_id": "other"}])
        assert got == {"received": 2, "stored": 0, "duplicates": 1,
                       "conflicts": [{"index": 1, "id": "r2", "error": CONFLICT}]}


def test_ids_that_differ_only_in_a_lone_surrogate_conflict_and_a_resend_of_either_is_a_duplicate(client):
    """``a\\ud800`` and ``a\\udbff`` are both read as ``a\\ufffd`` (as `import` reads them): the second was answered
    as a duplicate of the first (200, a record gone, nothing said). It is a conflict; the first sent again is a
    duplicate, and so is the second sent again (still a conflict: the stored one is the first)."""
    first, second = trajectory("a\ud800"), trajectory("a\udbff")
    assert _post(client, [first], ensure_ascii=True) == {"received": 1, "stored": 1, "duplicates": 0, "conflicts": []}
    got = _post(client, [second, first], ensure_ascii=True)
    assert got == {"received": 2, "stored": 0, "duplicates": 1,
                   "conflicts": [{"index": 0, "id": "a\ufffd", "error": CONFLICT}]}
    # one literally sent as U+FFFD is not the record sent with the lone surrogate either
    assert _post(client, [trajectory("a\ufffd")])["conflicts"] == [{"index": 0, "id": "a\ufffd", "error": CONFLICT}]
    # within one batch, on a fresh id
    got = _post(client, [trajectory("b\ud800"), trajectory("b\udbff"), trajectory("b\ud800")], ensure_ascii=True)
    assert got == {"received": 3, "stored": 1, "duplicates": 1,
                   "conflicts": [{"index": 1, "id": "b\ufffd", "error": CONFLICT}]}


def _old_store(path):
    """A store as written before the digests: its rows hold no body_sha256 (nor sent_sha256)."""
    store = IngestStore(path).open()
    store.add([Trajectory.model_validate(trajectory("o1")), Trajectory.model_validate(trajectory("o2"))])
    store._writer.execute("UPDATE trajectories SET body_sha256 = NULL")
    store.close()


def test_rows_of_a_store_without_digests_are_compared_by_their_body(tmp_path):
    _old_store(tmp_path / "ingest.sqlite")
    store = IngestStore(tmp_path / "ingest.sqlite").open()
    got = store.add([Trajectory.model_validate(trajectory("o1")),
                     Trajectory.model_validate({**trajectory("o2"), "score": 0.0})])
    assert got.stored == 0 and got.conflicts == [(1, "o2")]


def test_a_body_stored_by_an_older_schema_is_the_same_content_when_it_reads_as_the_same(tmp_path):
    """A row whose stored body another version wrote (a field this version adds is missing): its digest differs
    from this version's dump of the same trajectory, but read and dumped again it is the same: a duplicate."""
    store = IngestStore(tmp_path / "ingest.sqlite").open()
    t = Trajectory.model_validate(trajectory("v1"))
    store.add([t])
    body = json.loads(t.model_dump_json())
    body.pop("meta")
    old = json.dumps(body)
    store._writer.execute("UPDATE trajectories SET body = ?, body_sha256 = ? WHERE id = 'v1'",
                          (old, __import__("hashlib").sha256(old.encode()).hexdigest()))
    assert store.add([t]) == (0, [])
    assert store.add([Trajectory.model_validate({**trajectory("v1"), "score": 0.2})]) == (0, [(0, "v1")])


def test_the_lone_surrogate_prefilter_misses_no_text_the_reader_changes():
    """``sent_digests`` reads a body twice only when ``may_hold_lone_surrogate`` says so (an emoji body, pairs only,
    is not read twice): it must say so for every text ``lone_surrogates_replaced`` changes."""
    import random

    from evoharness.traces.jsontext import lone_surrogates_replaced, may_hold_lone_surrogate

    parts = [b"\\ud83d", b"\\ude00", b"\\udbff", b"\\\\", b"\\", b"u", b"d83d", b"x", b"\\u0041"]
    rng = random.Random(7)
    said = 0
    for _ in range(20_000):
        text = b"".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        if lone_surrogates_replaced(text) != text:
            said += 1
            assert may_hold_lone_surrogate(text), text
    assert said > 1000
    assert not may_hold_lone_surrogate(json.dumps(["\U0001F600 done"] * 3).encode())
