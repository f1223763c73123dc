"""A damaged checkpoint database pauses the service's run -- the reason, with the command that moves the file aside,
in /health and the run's view for as long as it lasts -- and the run goes on where it was once a whole copy is put
back and the run is resumed. Before, the damaged-database error was retried with the loop's back-off (up to 300 s)
for as long as the service ran, the run said `running`, and `GET /runs/{id}` was a 409 with the error."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import git

from tests.service.helpers import wait_for

REVIEW_RUN = {"rollouts": 8, "max_rounds": 1, "review": True, "dev_limit": 8, "heldout_limit": 4}


def _phase(c, run_id: str, phase: str, timeout: float = 120.0) -> dict:
    return wait_for(lambda: (v := c.get(f"/runs/{run_id}").json()).get("phase") == phase and v, timeout=timeout,
                    what=f"{run_id} {phase}")


def _files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file() and p.name != "run.lock"}


def _cut_while_waiting(serve, tmp_path):
    """A run waiting for review, the service stopped, a backup made and the database cut in half, the service
    started again: (server, client, run id, the review waiting, the run's files, main's commit, the backup)."""
    server = serve(run=REVIEW_RUN)
    c = server.client()
    run_id = wait_for(lambda: c.get("/health").json()["current_run"], what="the first run")
    waiting = _phase(c, run_id, "waiting_review")["waiting_review"]
    db, copy = tmp_path / "home" / "runs" / "checkpoints.sqlite", tmp_path / "copy.sqlite"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:  # the operator's backup
        src.backup(dst)
    server.signal(signal.SIGTERM)
    assert server.wait(60) == 0
    before, main = _files(tmp_path / "home" / "runs" / run_id), git.Repo(tmp_path / "harness").commit("main").hexsha
    raw = db.read_bytes()
    db.write_bytes(raw[:len(raw) // 2])  # cut short, as by a crash or a full disk
    server = serve(run=REVIEW_RUN)
    return server, server.client(), run_id, waiting, before, main, copy


def _move_aside(view: dict, db: Path) -> None:
    """Run the command the pause's reason gives."""
    raw = db.read_bytes()
    subprocess.run(["bash", "-c", re.search(r"\(`(cd .*?; done)`\)", view["paused_by"]).group(1)], check=True)
    assert not db.exists() and db.with_name("checkpoints.sqlite.damaged").read_bytes() == raw


def test_a_damaged_checkpoint_database_pauses_the_run_until_a_copy_is_put_back(serve, tmp_path):
    server, c, run_id, waiting, before, main, copy = _cut_while_waiting(serve, tmp_path)
    db, run_dir = tmp_path / "home" / "runs" / "checkpoints.sqlite", tmp_path / "home" / "runs" / run_id
    view = _phase(c, run_id, "paused", timeout=60)
    time.sleep(10 * 0.2)  # ten polls of the idle loop: no retry, the reason stays
    health, view = c.get("/health").json(), c.get(f"/runs/{run_id}").json()
    why = (f"run {run_id} paused: {db}: the checkpoint database of run.checkpointer 'sqlite' is damaged (database "
           "disk image is malformed): the runs it holds cannot be read")
    assert view["phase"] == "paused" and view["paused_by"].startswith(why), view
    assert view["paused_by"].endswith(f"then POST /runs/{run_id}/resume (or restart the service)"), view
    assert health["last_error"] == view["paused_by"], health
    log = server.log.read_text()
    assert log.count("service.run_paused") == 1 and "service.loop_error" not in log, log[-3000:]
    assert _files(run_dir) == before  # nothing of the run lost or rewritten
    assert git.Repo(tmp_path / "harness").commit("main").hexsha == main

    _move_aside(view, db)
    db.write_bytes(copy.read_bytes())
    assert c.post(f"/runs/{run_id}/resume").status_code == 202
    view = _phase(c, run_id, "waiting_review")  # where it was: the same review
    assert view["waiting_review"] == waiting and "paused_by" not in view
    assert c.get("/health").json()["last_error"] is None
    branch = waiting[0]["branch"]
    assert c.post(f"/runs/{run_id}/approve", json={"candidate": branch}).status_code == 202
    done = _phase(c, run_id, "done")
    assert [m["branch"] for m in done["merged"]] == [branch]


def test_without_a_copy_the_paused_run_stays_paused_and_a_new_run_can_start(serve, tmp_path):
    """Moved aside with no copy to put back, the run cannot go on (no checkpoint, and starting it over would re-run
    its rounds): resumed, it pauses again saying so, and POST /runs starts a new run beside it. POST /runs was a 409
    ('run ... is still active (paused)') for good: the service could start no run again."""
    server, c, run_id, _, before, _, _ = _cut_while_waiting(serve, tmp_path)
    db, run_dir = tmp_path / "home" / "runs" / "checkpoints.sqlite", tmp_path / "home" / "runs" / run_id
    _move_aside(_phase(c, run_id, "paused", timeout=60), db)
    assert c.post(f"/runs/{run_id}/resume").status_code == 202
    view = wait_for(lambda: "no checkpoint" in ((v := c.get(f"/runs/{run_id}").json()).get("paused_by") or "") and v,
                    what="the resumed run to pause again")
    assert view["phase"] == "paused" and "has made progress" in view["paused_by"], view
    r = c.post("/runs", json={"run_id": "run-new"})
    assert r.status_code == 202, r.text
    new = _phase(c, "run-new", "waiting_review")
    assert new["waiting_review"] and c.get("/health").json()["current_run"] == "run-new"
    assert c.get("/health").json()["last_error"] is None  # the old run's pause is said in its own view
    assert c.get(f"/runs/{run_id}").json()["phase"] == "paused"
    assert _files(run_dir) == before
