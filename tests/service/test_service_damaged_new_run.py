"""A new run the service cannot begin because the default checkpoint database (``<home>/runs/checkpoints.sqlite``,
shared by every run) is damaged holds the starting of new runs with the reason -- the damage and the move-aside
command, then `POST /runs` (or a restart) -- as a damaged database pauses an existing run. Before, the loop's trigger
began a run, the database check refused it, and the trigger began the next one after the loop's back-off, for as long
as the service ran: an error line in the log at every try, and no state that said new runs were stuck."""

from __future__ import annotations

import signal
import time

from tests.service.helpers import wait_for
from tests.service.test_service_damaged_checkpoint import REVIEW_RUN, _move_aside, _phase


def test_a_damaged_default_database_holds_new_runs_until_post_runs(serve, tmp_path):
    server = serve(run=REVIEW_RUN)
    c = server.client()
    old = wait_for(lambda: c.get("/health").json()["current_run"], what="the first run")
    _phase(c, old, "waiting_review")
    server.signal(signal.SIGTERM)
    assert server.wait(60) == 0
    home = tmp_path / "home"
    db = home / "runs" / "checkpoints.sqlite"
    raw = db.read_bytes()
    db.write_bytes(raw[:len(raw) // 2])  # cut short, as by a crash or a full disk
    (home / "service" / "daemon.json").unlink()  # the service forgets its current run: its trigger starts one

    server = serve(run=REVIEW_RUN)
    c = server.client()
    why = wait_for(lambda: c.get("/health").json()["last_error"], what="the refusal on /health")
    time.sleep(10 * 0.2)  # ten polls of the idle loop: no retry, the reason stays
    health = c.get("/health").json()
    assert health["last_error"] == why and health["current_run"] is None, health
    assert why.startswith("new runs paused: run ") and f"{db}: the checkpoint database" in why, why
    assert "is damaged" in why and why.endswith("; then POST /runs (or restart the service)"), why
    log = server.log.read_text()
    assert log.count("service.new_runs_paused") == 1 and "service.loop_error" not in log, log[-3000:]
    assert sorted(p.name for p in (home / "runs").iterdir() if p.is_dir()) == [old]  # nothing left behind

    _move_aside({"paused_by": why}, db)  # the reason's command; no copy: new runs start afresh
    r = c.post("/runs", json={"run_id": "run-new"})
    assert r.status_code == 202, r.text
    assert _phase(c, "run-new", "waiting_review")["waiting_review"]
    assert c.get("/health").json()["last_error"] is None


def test_a_resume_after_the_repair_lets_new_runs_start_again(tmp_path):
    """POST /runs/{id}/resume -- a person has mended the cause (a whole copy put back) -- lifts the hold on new runs
    too: the resumed run went on, and the service still started no run until POST /runs or a restart."""
    from evoharness.config import load_settings
    from evoharness.graph.runner import runs_dir, save_run_settings
    from evoharness.service.daemon import Daemon

    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "sandbox.backend=inprocess",
                                    "roles.kind=playbook"], environ={})
    save_run_settings(runs_dir(settings) / "run-old", settings)
    daemon = Daemon(settings, None, quiet=True)
    daemon.new_runs_paused = "new runs paused: run run-a not started: ...; then POST /runs (or restart the service)"
    daemon.request_resume("run-old")
    assert daemon.new_runs_paused is None and daemon._current_pause() is None
    assert daemon._requests.get_nowait() == ("drive", "run-old", None)
