"""An export of the service's ingest store reuses the label each row keeps, under `--labels`' checks: the row's body
digest and the labeller's fingerprint must be the export's. Until the eighteenth session the store kept the label
(class, first signal) but not what made it, and `POST /datasets/export` (source healthy or all) labelled every
failed ingested run again."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.service.app import create_app
from evoharness.service.ingest import IngestStore
from evoharness.traces.importers import load_paths
from evoharness.traces.store import write_trajectories

from .helpers import offline_hf  # noqa: F401 (the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")
TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _tau(shared_data):
    """The vendored tau-bench airline runs (6 failed, 6 healthy), as `import` reads them."""
    return list(load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))


def _store(tmp_path, trajs, cfg=None) -> IngestStore:
    store = IngestStore(tmp_path / "ingest.sqlite", Labeller(cfg)).open()
    store.add(trajs)
    return store


def _data(out) -> tuple[bytes, bytes]:
    return (out / "data.jsonl").read_bytes(), (out / "metadata.jsonl").read_bytes()


def test_the_stores_labels_are_reused_and_the_export_is_the_cold_ones_bytes(shared_data, tmp_path, labelled):
    trajs = _tau(shared_data)
    src = tmp_path / "tau.jsonl"
    write_trajectories(src, trajs)
    cold = export_dataset(tmp_path / "cold", source=SourceKind.all, trajectories=JsonlSource(src))
    failed = sorted(t.id for t in trajs if not t.score)
    assert sorted(labelled) == failed and len(failed) == 6
    store = _store(tmp_path, trajs)
    labelled.clear()
    warm = export_dataset(tmp_path / "warm", source=SourceKind.all, trajectories=store)
    assert labelled == []  # no failed run labelled again
    assert (warm.labels_reused, warm.labels_relabelled) == (6, {})
    assert (cold.labels_reused, cold.records) == (0, warm.records)
    assert _data(tmp_path / "warm") == _data(tmp_path / "cold")


def test_labels_made_under_other_settings_or_of_an_edited_body_are_labelled_again(shared_data, tmp_path, labelled):
    trajs = _tau(shared_data)
    store = _store(tmp_path, trajs, DiagnosisConfig(healthy_threshold=0.99))  # not the export's settings
    summary = export_dataset(tmp_path / "other", source=SourceKind.all, trajectories=store)
    assert (summary.labels_reused, summary.labels_relabelled) == (0, {"other_labeller": 6})
    assert len(labelled) == 6
    store.close()

    (tmp_path / "ingest.sqlite").unlink()
    store = _store(tmp_path, trajs)
    failed = next(t for t in trajs if not t.score)
    with sqlite3.connect(tmp_path / "ingest.sqlite") as conn:  # the body edited in place, its label left as it was
        conn.execute("UPDATE trajectories SET body = replace(body, ?, ?) WHERE id = ?",
                     ('"model":null', '"model":"edited"', failed.id))
    labelled.clear()
    summary = export_dataset(tmp_path / "edited", source=SourceKind.all, trajectories=store)
    assert (summary.labels_reused, summary.labels_relabelled) == (5, {"trajectory_changed": 1})
    assert labelled == [failed.id]


def test_a_store_from_before_the_columns_gains_them_and_its_rows_are_labelled_again(shared_data, tmp_path, labelled):
    trajs = _tau(shared_data)
    path = tmp_path / "ingest.sqlite"
    _store(tmp_path, trajs).close()
    with sqlite3.connect(path) as conn:  # the layout before: no digest, no fingerprint
        conn.execute("ALTER TABLE trajectories DROP COLUMN body_sha256")
        conn.execute("ALTER TABLE trajectories DROP COLUMN labeller_fingerprint")
    store = IngestStore(path, Labeller()).open()
    assert len(store) == 12
    summary = export_dataset(tmp_path / "old", source=SourceKind.all, trajectories=store)
    assert (summary.labels_reused, summary.labels_relabelled) == (0, {"no_fingerprint": 6})
    assert len(labelled) == 6
    store.add([t.model_copy(update={"id": f"{t.id}-new"}) for t in trajs if not t.score])  # rows of the new layout
    labelled.clear()
    summary = export_dataset(tmp_path / "mixed", source=SourceKind.all, trajectories=store, keep_duplicates=True)
    assert (summary.labels_reused, summary.labels_relabelled) == (6, {"no_fingerprint": 6})
    assert sorted(labelled) == sorted(t.id for t in trajs if not t.score)


def test_the_service_export_says_how_many_labels_it_reused(shared_data, tmp_path, labelled):
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    body = [t.model_dump(mode="json") for t in _tau(shared_data)]
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=body, headers=AUTH).status_code == 200
        labelled.clear()
        r = c.post("/datasets/export", json={"source": "all", "render_under": "trajectory"}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert (r.json()["records"], r.json()["labels_reused"], r.json()["labels_relabelled"]) == (12, 6, {})
        assert labelled == []


def test_a_stored_label_whose_class_is_no_class_is_labelled_again_not_written(shared_data, tmp_path):
    """The store's digest covers the row's body, not its label columns: a class column edited to what is no failure
    class ('F9') passed the checks and the export wrote 'F9' into metadata.jsonl and the card's counts. Now that run is
    labelled again (``not_a_class``) and written under the class its labeller gives."""
    trajs = _tau(shared_data)
    labeller = Labeller()
    failed = next(t for t in trajs if labeller.label(t).failure_class.value != "healthy")
    store = _store(tmp_path, trajs)
    with sqlite3.connect(tmp_path / "ingest.sqlite") as conn:
        conn.execute("UPDATE trajectories SET failure_class = 'F9' WHERE id = ?", (failed.id,))
    summary = export_dataset(tmp_path / "out", source=SourceKind.all, trajectories=store)
    assert "F9" not in summary.classes
    assert summary.labels_relabelled == {"not_a_class": 1}
    import json

    meta = [json.loads(line) for line in (tmp_path / "out" / "metadata.jsonl").read_text().splitlines()]
    assert next(m for m in meta if m["id"] == failed.id)["failure_class"] == labeller.label(failed).failure_class.value
    store.close()


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le"])
def test_a_stores_non_ascii_bodies_keep_their_labels_whatever_the_databases_text_encoding(
        shared_data, tmp_path, labelled, encoding):
    # the export reads a UTF-8 store's bodies as the bytes stored (their digest's), a store of another text encoding
    # as text: either way each body is the one its label was made of, and the export is the cold one's bytes
    trajs = _tau(shared_data)
    for t in trajs:  # text beyond ASCII, one and two UTF-16 units a character, in every run's first user turn
        first = next(m for m in t.messages if m["role"] == "user")
        first["content"] += " café 中文 😀"
    src = tmp_path / "tau.jsonl"
    write_trajectories(src, trajs)
    export_dataset(tmp_path / "cold", source=SourceKind.all, trajectories=JsonlSource(src))
    with sqlite3.connect(tmp_path / "ingest.sqlite") as conn:  # before the store makes its tables
        conn.execute(f"PRAGMA encoding = '{encoding}'")
        conn.execute("CREATE TABLE made_first (x)")
    store = _store(tmp_path, trajs)
    with sqlite3.connect(tmp_path / "ingest.sqlite") as conn:
        assert conn.execute("PRAGMA encoding").fetchone()[0] == encoding
    labelled.clear()
    warm = export_dataset(tmp_path / "warm", source=SourceKind.all, trajectories=store)
    assert (warm.labels_reused, warm.labels_relabelled, labelled) == (6, {}, [])
    assert "café 中文 😀".encode() in _data(tmp_path / "warm")[0]
    assert _data(tmp_path / "warm") == _data(tmp_path / "cold")
