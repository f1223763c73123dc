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


def test_a_begin_that_fails_before_its_settings_leaves_no_partial_run_directory(tmp_path, monkeypatch):
    """e840f7b undid a begin killed before settings.json at the next start; one that raised there (a full disk, a
    directory that may not be written) still left <home>/runs/<id> with its evidence snapshot, and a later run of the
    same id kept that snapshot rather than the evidence of its own start."""
    import errno
    import time

    from fastapi.testclient import TestClient

    from evoharness.config import Settings
    from evoharness.service.app import create_app

    def full_disk(run_dir, settings):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("evoharness.service.daemon.save_run_settings", full_disk)
    home = tmp_path / "home"
    settings = Settings.model_validate({
        "home": str(home), "run": {"harness": str(tmp_path / "harness"), "env": "synthetic", "model": "scripted:weak"},
        "service": {"loop": False, "poll_interval_s": 0.1}, "sandbox": {"backend": "inprocess"},
        "roles": {"kind": "playbook"}})
    token = "s3cret-token-0123456789"
    with TestClient(create_app(settings, token, quiet=True)) as c:
        auth = {"Authorization": f"Bearer {token}"}
        assert c.post("/runs", json={"run_id": "a"}, headers=auth).status_code == 202
        deadline = time.monotonic() + 60
        while "No space left" not in (c.get("/health").json()["last_error"] or "") and time.monotonic() < deadline:
            time.sleep(0.1)
        health = c.get("/health").json()
        assert "No space left" in health["last_error"] and health["current_run"] is None, health
    assert not (home / "runs" / "a").exists(), sorted(p.name for p in (home / "runs" / "a").iterdir())
    assert "beginning" not in json.loads((home / "service" / "daemon.json").read_text())
