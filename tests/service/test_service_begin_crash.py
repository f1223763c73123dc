"""A service SIGKILLed while it begins a run: the restarted service resumes the run or removes what it left."""

from __future__ import annotations

import json
import signal

from tests.service.helpers import Server, wait_for, write_config

API_ONLY = {"loop": False}


def _killed_in_begin(tmp_path, kill_at: int) -> None:
    """POST /runs to a service that SIGKILLs itself at the kill_at-th fault point (1: evidence written, 2: settings
    saved, before daemon.json names the run)."""
    cfg = write_config(tmp_path, service=API_ONLY)
    server = Server(cfg, env={"EVOHARNESS_FAULT_KILL_AT": str(kill_at)}).start()
    try:
        with server.client() as c:
            assert c.post("/runs", json={"run_id": "run-cut"}).status_code == 202
        assert server.wait(60) == -signal.SIGKILL, server.output()
    finally:
        server.stop()


def test_a_run_whose_settings_were_saved_is_the_current_run_after_a_restart(tmp_path):
    """Killed between the run's settings.json and daemon.json: the restarted service said current_run null and
    listed run-cut as an idle run no one drove; its trigger began another run on the same evidence."""
    _killed_in_begin(tmp_path, 2)
    assert (tmp_path / "home" / "runs" / "run-cut" / "settings.json").is_file()
    server = Server(tmp_path / "evoharness.toml").start()
    try:
        with server.client() as c:
            wait_for(lambda: c.get("/health").json()["current_run"], what="a current run")
            assert c.get("/health").json()["current_run"] == "run-cut"
            assert [(r["run_id"], r["current"]) for r in c.get("/runs").json()["runs"]] == [("run-cut", True)]
        state = json.loads((tmp_path / "home" / "service" / "daemon.json").read_text())
        assert state["history"] == ["run-cut"] and "beginning" not in state
        assert "run run-cut was being started when the service stopped; it is the current run" in server.output()
    finally:
        server.stop()


def test_a_run_killed_before_its_settings_is_removed_not_left_half_made(tmp_path):
    """Killed after the evidence snapshot, before settings.json: the directory stayed, and a later run of the same
    id kept that snapshot rather than its own."""
    _killed_in_begin(tmp_path, 1)
    run_dir = tmp_path / "home" / "runs" / "run-cut"
    assert (run_dir / "evidence.jsonl").is_file() and not (run_dir / "settings.json").exists()
    server = Server(tmp_path / "evoharness.toml").start()
    try:
        wait_for(lambda: not run_dir.exists(), what="the partial run directory removed")
        with server.client() as c:
            assert c.get("/health").json()["current_run"] is None and c.get("/runs").json()["runs"] == []
        assert "run run-cut was being started when the service stopped, before its settings" in server.output()
    finally:
        server.stop()
