"""A review decision posted while the checkpoint database is damaged is refused at once (409, the damage and the
move-aside command, "not applied") and the run is paused saying so -- never accepted and then dropped. Before, the
service answered 202 from the review it had in memory, the drive met the damaged database and paused the run, and
once a copy was put back and the run resumed, it waited for the same review again: the decision was gone, unsaid."""

from __future__ import annotations

import sqlite3

import git

from tests.service.helpers import wait_for
from tests.service.test_service_damaged_checkpoint import REVIEW_RUN, _move_aside, _phase


def test_a_decision_sent_while_the_database_is_damaged_is_refused_and_the_run_paused(serve, tmp_path):
    server = serve(run=REVIEW_RUN)
    c = server.client()
    run_id = wait_for(lambda: c.get("/health").json()["current_run"], what="the first run")
    waiting = _phase(c, run_id, "waiting_review")["waiting_review"]
    branch = waiting[0]["branch"]
    db, copy = tmp_path / "home" / "runs" / "checkpoints.sqlite", tmp_path / "copy.sqlite"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:  # the operator's backup
        src.backup(dst)
    main = git.Repo(tmp_path / "harness").commit("main").hexsha
    raw = db.read_bytes()
    db.write_bytes(raw[:len(raw) // 2])  # damaged under the running service, its run waiting for review

    r = c.post(f"/runs/{run_id}/approve", json={"candidate": branch})
    assert r.status_code == 409, r.text
    detail = r.json()["error"]
    assert "is damaged" in detail and "Move it aside" in detail, detail
    assert f"the approve of {branch} was not applied" in detail, detail
    view = c.get(f"/runs/{run_id}").json()
    assert view["phase"] == "paused" and "is damaged" in view["paused_by"], view
    wait_for(lambda: c.get("/health").json()["last_error"] == view["paused_by"], what="/health to say the pause")
    assert git.Repo(tmp_path / "harness").commit("main").hexsha == main

    _move_aside(view, db)
    db.write_bytes(copy.read_bytes())
    assert c.post(f"/runs/{run_id}/resume").status_code == 202
    assert _phase(c, run_id, "waiting_review")["waiting_review"] == waiting  # sent again, it is applied
    assert c.post(f"/runs/{run_id}/approve", json={"candidate": branch}).status_code == 202
    assert [m["branch"] for m in _phase(c, run_id, "done")["merged"]] == [branch]


def test_a_decision_the_drive_cannot_take_in_is_said_not_applied(tmp_path, monkeypatch):
    """The database damaged between the decision's check (202) and its drive: the pause's reason says the decision
    was not applied. The drive's pause said only the damage, and the resumed run waited for the same review."""
    from evoharness.config import load_settings
    from evoharness.graph.runner import runs_dir, save_run_settings
    from evoharness.graph.sqlite_damage import CheckpointDamaged
    from evoharness.service import daemon as daemon_module

    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "sandbox.backend=inprocess",
                                    "roles.kind=playbook"], environ={})
    save_run_settings(runs_dir(settings) / "run-x", settings)
    daemon = daemon_module.Daemon(settings, None, quiet=True)
    monkeypatch.setattr(daemon, "pending", lambda run_id: [{"candidates": [{"branch": "candidate/r1-a"},
                                                                            {"branch": "candidate/r1-b"}]}])

    def damaged(*args, **kw):
        raise CheckpointDamaged(tmp_path / "checkpoints.sqlite", "the checkpoint database is damaged")

    monkeypatch.setattr(daemon_module, "drive", damaged)
    daemon.decide("run-x", "candidate/r1-b", "reject", "flaky")
    kind, run_id, payload = daemon._requests.get_nowait()
    daemon._drive(run_id, payload)
    why = daemon.paused_by["run-x"]
    assert daemon.run_phase("run-x") == daemon_module.PAUSED
    assert why.endswith("(or restart the service); the reject of candidate/r1-b was not applied: send it again once "
                        "the run waits for review again"), why
    daemon._drive("run-x", None)  # the resume that pauses again has no decision to speak of
    assert "not applied" not in daemon.paused_by["run-x"]
