"""The progress GET /runs/{id} shows is the run's own: a service's second run showed the first one's counters."""

from __future__ import annotations

from evoharness.config import load_settings
from evoharness.service.daemon import Daemon
from evoharness.service.ingest import IngestStore


def test_a_second_run_of_one_service_counts_its_own_rollouts_and_budget(tmp_path):
    """Walk's service on one home: its second run started with 'rollouts: 12 rollouts planned (done 94/106, budget
    left 319)', the first run's 94 rollouts and budget left (319 of 400) as its own, in the log and in GET /runs/{id}
    progress (rollouts_done, rollouts_planned, budget_left)."""
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "run.rollouts=2",
                                    "run.max_rounds=1", "run.budget=3000", "run.review=false",
                                    "sandbox.backend=inprocess", "roles.kind=playbook", "log_level=error"],
                             environ={})
    daemon = Daemon(settings, IngestStore(tmp_path / "ingest.sqlite3"), quiet=True)
    daemon._begin("run-a")
    daemon._drive("run-a", None)
    first = daemon.progress.view()
    assert first["rollouts_done"] > 0 and first["budget_left"] < 3000

    daemon._begin("run-b")
    assert daemon.progress.view() == {"rollouts_done": 0, "rollouts_planned": 0, "budget_left": None,
                                      "last_note": "service: run run-b started"}
    daemon._drive("run-b", None)
    second = daemon.progress.view()
    assert second["rollouts_done"] == second["rollouts_planned"] <= first["rollouts_done"]
    assert second["budget_left"] >= first["budget_left"]  # the same tasks, from the rollout cache: never less left
