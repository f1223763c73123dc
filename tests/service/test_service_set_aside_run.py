"""A paused run that is not the service's current run (a new run was started beside it) is not resumed by a restart:
by design -- starting a new run beside it was a person's choice, and a restart (a deploy, systemd's restart after a
crash) must not spend budget on runs set aside. Its view says so, with the command that drives it, before and after
the restart. Before, its reason said `(or restart the service)`, and after a restart the run read `phase: idle` with
no reason while nothing would ever drive it."""

from __future__ import annotations

import json

import pytest

from evoharness.config import load_settings
from evoharness.graph.runner import runs_dir, save_run_settings
from evoharness.service.daemon import PAUSED, Daemon
from evoharness.service.runs import list_runs, run_view


@pytest.fixture
def settings(tmp_path):
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "sandbox.backend=inprocess",
                                    "roles.kind=playbook"], environ={})
    for run_id in ("run-old", "run-new"):
        save_run_settings(runs_dir(settings) / run_id, settings)
    state = tmp_path / "home" / "service" / "daemon.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"run_id": "run-new", "started_seq": 0, "history": ["run-old", "run-new"]}))
    return settings


def test_a_paused_run_set_aside_says_a_restart_does_not_resume_it(settings):
    path = runs_dir(settings) / "run-old" / "settings.json"
    good = path.read_text()
    path.write_text("{not json")  # run-old pauses (its settings cannot be read) ...
    first = Daemon(settings, None, quiet=True)
    first._drive("run-old", None)
    view = run_view(settings, first, "run-old")  # ... beside run-new, the current run
    assert view["phase"] == PAUSED
    assert view["paused_by"].endswith("then POST /runs/run-old/resume (or restart the service); run run-new is the "
                                      "current run: a restart resumes only that one; POST /runs/run-old/resume drives "
                                      "this one"), view["paused_by"]

    path.write_text(good)  # the reason is gone; the service restarts
    again = Daemon(settings, None, quiet=True)
    view = run_view(settings, again, "run-old")
    assert view["phase"] == PAUSED, view  # it read `idle`, and nothing would drive it
    assert view["paused_by"] == ("run run-old was set aside (paused, or not resumed) before the service restarted; why "
                                 "it paused is in the service's log (service.run_paused); run run-new is the current "
                                 "run: a restart resumes only that one; POST /runs/run-old/resume drives this one")
    rows = {r["run_id"]: r["phase"] for r in list_runs(settings, again)}
    assert rows == {"run-old": PAUSED, "run-new": "idle"}
    assert "paused_by" not in run_view(settings, again, "run-new")  # the current run: the loop resumes it
