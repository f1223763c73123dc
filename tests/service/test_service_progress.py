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


def test_a_restarted_service_says_it_resumes_its_run(tmp_path, capsys):
    """After a SIGTERM or SIGKILL the next `serve` drove the run on without a word: its start line said 'runs: on
    POST /runs, or once 1 ingested process failure(s) arrive', and GET /runs/{id} progress had last_note '' for the
    100 s the LLM analyst then took."""
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "run.rollouts=2",
                                    "run.max_rounds=1", "run.review=false", "sandbox.backend=inprocess",
                                    "roles.kind=playbook", "log_level=error"], environ={})
    first = Daemon(settings, IngestStore(tmp_path / "ingest.sqlite3"), quiet=True)
    first._begin("run-a")
    first.stop_event.set()  # SIGTERM: the running node finishes and is checkpointed
    first._drive("run-a", None)

    again = Daemon(settings, IngestStore(tmp_path / "ingest.sqlite3"))  # the next `serve`
    again.stop_event.set()
    again._drive("run-a", None)
    assert "] service: resuming run run-a from its last checkpoint\n" in capsys.readouterr().err
    again.stop_event.clear()
    again._drive("run-a", None)  # the same process driving it on: said once
    assert "resuming" not in capsys.readouterr().err
