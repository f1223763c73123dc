"""The service's sweep of ingested content failures into the training queue: one row the queue refuses must not
stop every row stored after it from being queued."""

from __future__ import annotations

import sqlite3

from evoharness.config import load_settings
from evoharness.datasets.queue import queue_from_settings
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import Lever
from evoharness.service.daemon import Daemon
from evoharness.service.ingest import IngestStore
from evoharness.traces.importers import load_paths


def test_a_row_stored_as_content_that_this_labeller_does_not_route_to_weights_does_not_stall_the_sweep(
        shared_data, tmp_path):
    """A store labelled under other settings (or an older labeller) can hold a row with lever 'weights' that the
    store's labeller now routes elsewhere. The sweep labelled it again and the queue refused it ('only content
    failures are queued', an InputError): the sweep failed as a whole on every poll, and no content failure stored
    after that row was ever queued."""
    trajs = list(load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))
    labeller = Labeller()
    levers = {t.id: labeller.label(t).lever for t in trajs}
    not_content = next(t for t in trajs if levers[t.id] != Lever.weights)
    content = [t for t in trajs if levers[t.id] == Lever.weights]
    assert content, "the airline sample holds content failures"
    store = IngestStore(tmp_path / "ingest.sqlite3", labeller).open()
    store.add([not_content, *content])  # the stale row first, in arrival order
    with sqlite3.connect(tmp_path / "ingest.sqlite3") as conn:  # stored as content under other settings
        conn.execute("UPDATE trajectories SET lever = 'weights' WHERE id = ?", (not_content.id,))
    settings = load_settings(None, [f"home={tmp_path / 'home'}", "log_level=error"], environ={})
    daemon = Daemon(settings, store, quiet=True)

    assert daemon.sweep_ingested() == len(content)
    assert sorted(i.trajectory_id for i in queue_from_settings(settings).items()) == sorted(t.id for t in content)
    assert store.unqueued_content() == []  # every row swept: the next poll has nothing to do
    assert daemon.sweep_ingested() == 0
    store.close()


def _counting(monkeypatch) -> list[str]:
    """Every labelling call the labeller makes from here on (``label``, ``first_signal``, ``classify``), by id."""
    calls: list[str] = []
    for name in ("label", "first_signal", "classify"):
        real = getattr(Labeller, name)

        def counted(self, traj, *args, _real=real, **kw):
            calls.append(traj.id)
            return _real(self, traj, *args, **kw)

        monkeypatch.setattr(Labeller, name, counted)
    return calls


def test_the_sweep_queues_each_row_under_its_checked_stored_label_without_labelling_it(
        shared_data, tmp_path, monkeypatch):
    """The store keeps each row's label with its body's digest and the labeller's fingerprint; the sweep labelled
    every content failure again anyway (110 of the 200 airline runs; ~1 ms of CPU each, most of a sweep). Now a
    row whose stored label is provably its body's and this labeller's is queued under it, and only the others are
    labelled: a row stored under another labeller and a row whose body was edited since."""
    trajs = list(load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))
    labeller = Labeller()
    labels = {t.id: labeller.label(t) for t in trajs}
    content = [t for t in trajs if labels[t.id].lever == Lever.weights]
    store = IngestStore(tmp_path / "ingest.sqlite3", labeller).open()
    store.add(trajs)
    other, edited = content[0].id, content[1].id
    with sqlite3.connect(tmp_path / "ingest.sqlite3") as conn:
        conn.execute("UPDATE trajectories SET labeller_fingerprint = 'rules-sha256:another' WHERE id = ?", (other,))
        conn.execute("UPDATE trajectories SET body = replace(body, '\"rollout\":', '\"rollout\": ') WHERE id = ?",
                     (edited,))
    settings = load_settings(None, [f"home={tmp_path / 'home'}", "log_level=error"], environ={})
    daemon = Daemon(settings, store, quiet=True)
    calls = _counting(monkeypatch)

    assert daemon.sweep_ingested() == len(content)
    assert sorted(calls) == sorted([other, edited])  # labelled again: those two, nothing else
    items = {i.trajectory_id: i for i in queue_from_settings(settings).items()}
    assert sorted(items) == sorted(t.id for t in content)
    for t in content:  # the class and first signal the labeller gives, reused or found again
        first = labels[t.id].first_signal
        assert (items[t.id].failure_class, items[t.id].first_signal) == (
            labels[t.id].failure_class, first.id if first else None)
        assert items[t.id].trajectory == t
    assert items[other].labeller_fingerprint == labeller.fingerprint  # the class found again is this labeller's
    store.close()


def test_a_stored_label_whose_class_column_is_no_class_is_labelled_again_not_a_failed_sweep(
        shared_data, tmp_path, monkeypatch):
    """The digest covers the body, not the label columns: a row edited to a class that is none (the queue would
    refuse it, and the sweep would fail on every poll) is labelled again, and queued under the class found."""
    trajs = list(load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))[:40]
    labeller = Labeller()
    content = [t for t in trajs if labeller.label(t).lever == Lever.weights]
    store = IngestStore(tmp_path / "ingest.sqlite3", labeller).open()
    store.add(trajs)
    with sqlite3.connect(tmp_path / "ingest.sqlite3") as conn:
        conn.execute("UPDATE trajectories SET failure_class = 'F9' WHERE id = ?", (content[0].id,))
    settings = load_settings(None, [f"home={tmp_path / 'home'}", "log_level=error"], environ={})
    calls = _counting(monkeypatch)

    assert Daemon(settings, store, quiet=True).sweep_ingested() == len(content)
    assert calls == [content[0].id]
    store.close()
