"""A run another process drives (`evoharness run --resume` from a shell) is `phase: locked` in the service, with
who holds it, while the loop retries it with back-off: it said `running` while nothing ran it."""

from __future__ import annotations

import os

import pytest

from evoharness.config import load_settings
from evoharness.graph.locks import RunLocked, try_lock
from evoharness.graph.runner import runs_dir, save_run_settings
from evoharness.service.daemon import LOCKED, Daemon
from evoharness.service.ingest import IngestStore
from evoharness.service.runs import run_view


@pytest.fixture
def daemon(tmp_path):
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "sandbox.backend=inprocess",
                                    "roles.kind=playbook"], environ={})
    save_run_settings(runs_dir(settings) / "run-x", settings)
    return Daemon(settings, IngestStore(tmp_path / "ingest.sqlite3"), quiet=True)


def test_a_run_locked_by_another_process_says_so_while_it_is_retried(daemon):
    fd, _ = try_lock(runs_dir(daemon.settings) / "run-x" / "run.lock")  # as `run --resume run-x` holds it
    assert fd is not None
    try:
        for _ in range(2):  # each retry of the loop: refused, and still said so (no flicker back to running)
            with pytest.raises(RunLocked):
                daemon._drive("run-x", None)
            assert daemon.run_phase("run-x") == LOCKED
        view = run_view(daemon.settings, daemon, "run-x")
        assert view["phase"] == "locked"
        assert "driven by another process" in view["locked_by"] and f"pid {os.getpid()}" in view["locked_by"]
    finally:
        os.close(fd)


def test_a_run_whose_saved_settings_cannot_be_read_is_paused_saying_so(daemon):
    """The run's settings.json unreadable (edited by hand, replaced): the InputError was retried with the loop's
    back-off for as long as the service ran, the run's phase `running`. It is paused with the reason, as a damaged
    checkpoint database is (tests/service/test_service_damaged_checkpoint.py)."""
    from evoharness.service.daemon import PAUSED

    path = runs_dir(daemon.settings) / "run-x" / "settings.json"
    path.write_text("{not json")
    daemon.phase["run-x"] = "running"
    daemon._drive("run-x", None)
    assert daemon.run_phase("run-x") == PAUSED
    why = daemon.paused_by["run-x"]
    assert why.startswith(f"run run-x paused: {path}: run run-x's saved settings are not JSON"), why
    assert why.endswith("then POST /runs/run-x/resume (or restart the service)"), why
    view = run_view(daemon.settings, daemon, "run-x")  # was a 409 with the error: no view said paused
    # the service has no current run here (no daemon.json): a restart would not resume it, and the view says so
    assert view["phase"] == "paused" and view["paused_by"] == why + (
        "; the service has no current run: a restart resumes none; POST /runs/run-x/resume drives this one"), view
