"""POST /runs: one run starts at a time, also when two requests come before the loop has begun the first."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.service.app import create_app
from evoharness.service.daemon import Daemon

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_a_second_new_run_asked_for_before_the_first_began_is_refused(tmp_path, monkeypatch):
    """The worker begins a requested run when it next looks (after the sweep, a review being applied, ...). Two
    POST /runs in that time both answered 202 'starting'; the second was then dropped by the worker ('not
    started: run a is still active' in /health's last_error only) and GET /runs/b turned from 'starting' to 404."""
    busy, free = threading.Event(), threading.Event()
    sweep = Daemon.sweep_ingested

    def slow_sweep(self, limit=500):
        if not free.is_set():
            busy.set()
            free.wait(30)
        return sweep(self, limit)

    monkeypatch.setattr(Daemon, "sweep_ingested", slow_sweep)
    settings = Settings.model_validate({
        "home": str(tmp_path / "home"),
        "run": {"harness": str(tmp_path / "harness"), "env": "synthetic", "model": "scripted:weak", "rollouts": 2,
                "max_rounds": 1, "budget": 3000},
        "service": {"loop": False, "poll_interval_s": 0.1}, "sandbox": {"backend": "inprocess", "workers": 1},
        "roles": {"kind": "playbook"}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert busy.wait(30)  # the worker is in its sweep: neither request below is begun until it returns
        first = c.post("/runs", json={"run_id": "a"}, headers=AUTH)
        second = c.post("/runs", json={"run_id": "b"}, headers=AUTH)
        free.set()
        assert first.status_code == 202, first.text
        assert second.status_code == 409, second.text
        # the run asked for, then why (it said 'a: run a is starting ...': the other run twice, this one never)
        assert second.json()["error"] == ("b: not started: run a is starting (asked for, not begun yet): one run at "
                                          "a time"), second.text
        deadline = time.monotonic() + 60
        while c.get("/runs/a").json().get("phase") == "starting" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.get("/runs/a").status_code == 200
        assert c.get("/health").json()["current_run"] == "a"


def test_a_new_run_whose_checkpointer_cannot_be_opened_is_not_made(tmp_path):
    """The service made the run (its settings.json, with the checkpointer's URL) and then retried it for ever: a run
    keeps the settings it starts with, so a wrong password or port fixed in the config and the service restarted
    still drove the current run with the saved URL."""
    settings = Settings.model_validate({
        "home": str(tmp_path / "home"),
        "run": {"harness": str(tmp_path / "harness"), "env": "synthetic", "model": "scripted:weak",
                "checkpointer": "postgresql://nobody:x@127.0.0.1:1/none"},
        "service": {"loop": False, "poll_interval_s": 0.1}, "sandbox": {"backend": "inprocess"},
        "roles": {"kind": "playbook"}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/runs", json={"run_id": "a"}, headers=AUTH).status_code == 202
        deadline = time.monotonic() + 60
        while not c.get("/health").json()["last_error"] and time.monotonic() < deadline:
            time.sleep(0.1)
        health = c.get("/health").json()
        assert "run.checkpointer: its database cannot be reached" in health["last_error"], health
        assert "no run was started" in health["last_error"] and health["current_run"] is None, health
        assert c.get("/runs/a").status_code == 404
        assert c.post("/runs", json={"run_id": "a"}, headers=AUTH).status_code == 202  # not 'run already exists'


def _checkpointer_that_cannot_be_opened(tmp_path, poll_interval_s: float) -> Settings:
    """Settings whose relative 'sqlite:../ck-dir' names a directory: every run start fails at its checkpointer."""
    (tmp_path / "home" / "runs" / "ck-dir").mkdir(parents=True)
    return Settings.model_validate({
        "home": str(tmp_path / "home"),
        "run": {"harness": str(tmp_path / "harness"), "env": "synthetic", "model": "scripted:weak",
                "checkpointer": "sqlite:../ck-dir"},
        "service": {"loop": False, "poll_interval_s": poll_interval_s}, "sandbox": {"backend": "inprocess"},
        "roles": {"kind": "playbook"}})


def _health_once_it_says(c: TestClient, text: str) -> dict:
    deadline = time.monotonic() + 60
    while text not in (c.get("/health").json()["last_error"] or "") and time.monotonic() < deadline:
        time.sleep(0.02)
    return c.get("/health").json()


def test_a_run_whose_sqlite_checkpointer_cannot_be_opened_leaves_no_run_directory(tmp_path):
    """A relative 'sqlite:PATH' is read against the run directory, which opening it made: a start that failed (here
    the path names a directory, as a full disk or a file that may not be written fails) left an empty
    <home>/runs/<id> behind, one more at each run the service retried (a new id each time)."""
    with TestClient(create_app(_checkpointer_that_cannot_be_opened(tmp_path, 0.1), TOKEN, quiet=True)) as c:
        for attempt in ("a", "b"):
            assert c.post("/runs", json={"run_id": attempt}, headers=AUTH).status_code == 202
            health = _health_once_it_says(c, f"/{attempt}/../ck-dir")
            assert "cannot be used as the checkpoint database" in health["last_error"], health
            assert "no run was started" in health["last_error"] and health["current_run"] is None, health
    assert sorted(p.name for p in (tmp_path / "home" / "runs").iterdir()) == ["ck-dir"]


def test_a_refused_run_start_stays_said_in_health_until_the_loop_next_does_work(tmp_path):
    """POST /runs answers 202 before the worker begins the run; a start that then fails is said only in /health's
    last_error. The loop cleared last_error at its next poll (0.2 s after the error), so a client reading /health
    a second later saw no error and no run (and the test above, polling /health, could miss it under load)."""
    with TestClient(create_app(_checkpointer_that_cannot_be_opened(tmp_path, 0.05), TOKEN, quiet=True)) as c:
        assert c.post("/runs", json={"run_id": "a"}, headers=AUTH).status_code == 202
        _health_once_it_says(c, "/a/../ck-dir")
        time.sleep(1.0)  # twenty polls of the loop, each idle
        health = c.get("/health").json()
        assert "no run was started" in (health["last_error"] or ""), health
        assert health["current_run"] is None, health


def test_a_new_run_asked_for_while_the_worker_begins_another_is_refused(tmp_path):
    """The other order of 083d3e9's race: the request reads the current run (none) before the daemon's lock, the
    worker then begins run a (records it as current, no longer starting), and the request, finding nothing
    starting under the lock, answered 202 for b, which the worker then dropped ('not started: run a is still
    active', in /health's last_error only). The current run is now read under the lock, after the claim check."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "service": {"loop": False}})
    daemon = Daemon(settings, None, quiet=True)
    daemon.starting.add("a")

    class WorkerBeginsAMeanwhile:  # the lock taken just as the worker finishes beginning run a
        def __enter__(self):
            daemon._write({"run_id": "a", "started_seq": 0, "history": ["a"]})
            daemon.starting.discard("a")

        def __exit__(self, *exc):
            return False

    daemon._lock = WorkerBeginsAMeanwhile()
    try:
        daemon.request_run("b")
    except InputError as e:
        assert str(e).startswith("b: not started: run a is still active (")
    else:
        raise AssertionError("run b was accepted while run a is active")
    assert daemon._requests.empty()


@pytest.mark.parametrize("start", [b"{}", b""])
def test_a_body_of_null_starts_no_run_and_an_empty_object_or_no_body_still_does(tmp_path, start):
    """POST /runs with the body `null` started a run, as no body does, where every other body that is not an object
    (a list, a string, a number) is refused 422: a JSON null is not an object either."""
    settings = Settings.model_validate({
        "home": str(tmp_path / "home"),
        "run": {"harness": str(tmp_path / "harness"), "env": "synthetic", "model": "scripted:weak", "rollouts": 2,
                "max_rounds": 1, "dev_limit": 4, "heldout_limit": 2, "budget": 3000},
        "service": {"loop": False, "poll_interval_s": 0.1}, "sandbox": {"backend": "inprocess", "workers": 1},
        "roles": {"kind": "playbook"}})
    json_body = {**AUTH, "content-type": "application/json"}
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        for body in (b"null", b" null\n", b"[]", b"7"):
            r = c.post("/runs", content=body, headers=json_body)
            assert r.status_code == 422, (body, r.text)
            kind = "null" if b"null" in body else "a list" if body == b"[]" else "a number"
            error = f"body is {kind}, not an object; expected a JSON object with run_id"
            assert r.json() == {"error": error, "errors": [{"field": "body", "error": error}]}
        assert c.get("/runs").json()["runs"] == [] and c.get("/health").json()["current_run"] is None
        r = c.post("/runs", content=start, headers=json_body if start else AUTH)
        assert r.status_code == 202 and r.json()["status"] == "starting", r.text
