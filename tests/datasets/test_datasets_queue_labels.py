"""An export of the training queue checks the class each item was enqueued with: reused only when the queue kept
the fingerprint of the labeller that gave it and the digest of the body it labelled, and both are the export's;
otherwise the item is labelled again and written with the class the export's labeller gives. Until the nineteenth
session every queue item was written with its enqueued class, taken as given (an upgrade's or other settings' class,
a class given by hand through the API)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

import pytest
from sqlalchemy import Column, DateTime, Float, Integer, MetaData, String, Table, Text, create_engine

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.datasets.queue import TrainingQueue
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass, Lever
from evoharness.traces.importers import load_paths

from .helpers import offline_hf  # noqa: F401 (the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")


def _content(shared_data):
    """The vendored tau-bench runs the labeller sends to the weights lever, with their labels."""
    labeller = Labeller()
    trajs = load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"])
    out = [(t, lab) for t in trajs if (lab := labeller.label(t)).lever == Lever.weights]
    assert out
    return out


def _classes(out) -> list[str]:
    return [json.loads(m)["failure_class"] for m in (out / "metadata.jsonl").read_text().splitlines()]


def test_the_queues_checked_classes_are_reused_and_anything_else_is_labelled(shared_data, tmp_path, labelled):
    content = _content(shared_data)
    db = tmp_path / "queue.db"
    queue = TrainingQueue(f"sqlite:///{db}")
    fingerprint = Labeller().fingerprint
    for t, lab in content:
        queue.enqueue(t, lab, labeller_fingerprint=fingerprint)
    labelled.clear()
    s = export_dataset(tmp_path / "warm", source=SourceKind.queue, queue=queue)
    assert labelled == [] and (s.labels_reused, s.labels_relabelled) == (len(content), {})
    assert _classes(tmp_path / "warm") == [lab.failure_class.value for _, lab in content]

    # a body edited in the database, and other diagnosis settings: labelled again
    first = content[0][0].id
    with sqlite3.connect(db) as conn:
        body = json.loads(conn.execute("SELECT trajectory FROM training_queue WHERE trajectory_id = ?",
                                       (first,)).fetchone()[0])
        conn.execute("UPDATE training_queue SET trajectory = ? WHERE trajectory_id = ?", (json.dumps(body), first))
    s = export_dataset(tmp_path / "edited", source=SourceKind.queue, queue=queue)
    assert (s.labels_reused, s.labels_relabelled) == (len(content) - 1, {"trajectory_changed": 1})
    s = export_dataset(tmp_path / "other", source=SourceKind.queue, queue=queue,
                       diagnosis_cfg=DiagnosisConfig(healthy_threshold=0.999))
    assert (s.labels_reused, s.labels_relabelled) == (0, {"other_labeller": len(content)})


def test_a_class_enqueued_without_a_fingerprint_is_not_written_as_given(shared_data, tmp_path):
    content = _content(shared_data)
    queue = TrainingQueue(f"sqlite:///{tmp_path / 'queue.db'}")
    wrong = {FailureClass.F1: FailureClass.F4, FailureClass.F4: FailureClass.F1}
    for t, lab in content:  # a class the labeller does not give (an older labeller's, or given by hand)
        queue.enqueue(t, lab.model_copy(update={"failure_class": wrong[lab.failure_class]}))
    s = export_dataset(tmp_path / "out", source=SourceKind.queue, queue=queue)
    assert (s.labels_reused, s.labels_relabelled) == (0, {"no_fingerprint": len(content)})
    assert _classes(tmp_path / "out") == [lab.failure_class.value for _, lab in content]


def _old_queue(db):
    """A queue's table as written before the label columns (trajectory_sha256, labeller_fingerprint), made at ``db``:
    the table and its engine."""
    old = Table("training_queue", MetaData(), Column("trajectory_id", String(512), primary_key=True),
                Column("task_id", String(512), nullable=False), Column("split", String(16), nullable=False),
                Column("failure_class", String(16), nullable=False), Column("first_signal", String(128)),
                Column("harness_commit", String(64)), Column("model", String(256)), Column("run_id", String(256)),
                Column("round", Integer), Column("score", Float), Column("trajectory", Text, nullable=False),
                Column("enqueued_at", DateTime(timezone=True), nullable=False))
    engine = create_engine(f"sqlite:///{db}")
    old.metadata.create_all(engine)
    return old, engine


def test_a_queue_from_before_the_columns_is_read_and_gains_them_when_opened_to_write(shared_data, tmp_path):
    content = _content(shared_data)
    db = tmp_path / "queue.db"
    old, engine = _old_queue(db)
    t, lab = content[0]
    with engine.begin() as conn:
        conn.execute(old.insert().values(
            trajectory_id=t.id, task_id=t.task_id, split=t.split.value, failure_class=lab.failure_class.value,
            trajectory=t.model_dump_json(), enqueued_at=datetime.now(UTC)))
    engine.dispose()
    reader = TrainingQueue(f"sqlite:///{db}", create=False)  # read only: no column added, its items relabelled
    s = export_dataset(tmp_path / "out", source=SourceKind.queue, queue=reader)
    assert s.records == 1 and s.labels_relabelled == {"no_fingerprint": 1}

    def columns():
        with sqlite3.connect(db) as conn:
            return {r[1] for r in conn.execute("PRAGMA table_info(training_queue)")}

    assert not {"trajectory_sha256", "labeller_fingerprint"} & columns()
    TrainingQueue(f"sqlite:///{db}").enqueue(*content[1], labeller_fingerprint=Labeller().fingerprint)
    assert {"trajectory_sha256", "labeller_fingerprint"} <= columns()  # opened to write: gained them
    s = export_dataset(tmp_path / "out2", source=SourceKind.queue, queue=TrainingQueue(f"sqlite:///{db}", create=False))
    assert (s.records, s.labels_reused, s.labels_relabelled) == (2, 1, {"no_fingerprint": 1})


def test_two_openers_of_an_old_queue_that_both_add_its_columns_both_open_it(shared_data, tmp_path, monkeypatch):
    """The first open to write of a queue from before the label columns adds them (ALTER TABLE). An opener that
    looked at the columns before another opener added them then failed on its own ALTER ('duplicate column name':
    InfraError, a 503 in the service) until opened again. Here the other opener has added them already and this
    one's look at the columns is the stale one from before."""
    import evoharness.datasets.queue as queue_module

    db = tmp_path / "queue.db"
    old, engine = _old_queue(db)
    engine.dispose()
    stale = {c.name for c in old.columns}
    TrainingQueue(f"sqlite:///{db}")  # the other opener: adds the columns
    looked = []
    real_inspect = queue_module.inspect

    class StaleFirstLook:
        def __init__(self, bind):
            self._real = real_inspect(bind)

        def has_table(self, name):
            return self._real.has_table(name)

        def get_columns(self, name):
            cols = self._real.get_columns(name)
            looked.append(name)
            return [c for c in cols if c["name"] in stale] if len(looked) == 1 else cols

    monkeypatch.setattr(queue_module, "inspect", StaleFirstLook)
    q = TrainingQueue(f"sqlite:///{db}")  # raised InfraError: duplicate column name: trajectory_sha256
    t, lab = _content(shared_data)[0]
    assert q.enqueue(t, lab, labeller_fingerprint=Labeller().fingerprint)
    assert [i.labeller_fingerprint for i in q.items()] == [Labeller().fingerprint]
