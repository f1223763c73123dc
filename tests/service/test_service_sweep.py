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
