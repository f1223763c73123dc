"""The HTTP API against a real `evoharness serve` on loopback (background loop off: API only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.service.helpers import TOKEN, trajectory, write_config

API_ONLY = {"loop": False}


def _metrics(client) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(client.get("/metrics").text):
        for s in fam.samples:
            key = s.name + (json.dumps(s.labels, sort_keys=True) if s.labels else "")
            out[key] = s.value
    return out


def test_refuses_to_start_without_a_token_unless_told(tmp_path):
    cfg = write_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    proc = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: EVOHARNESS_API_TOKEN is not set")
    proc = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve"],
                          env={**env, "EVOHARNESS_API_TOKEN": "short"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "too short" in proc.stderr


def test_a_busy_port_is_one_error_line(tmp_path):
    import socket

    cfg = write_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve", "--port", str(port)],
                              env={**env, "EVOHARNESS_API_TOKEN": TOKEN}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: cannot listen on 127.0.0.1:{port}")


def test_a_port_out_of_range_is_one_error_line(tmp_path, monkeypatch, capsys):
    from evoharness.cli import main

    monkeypatch.setenv("EVOHARNESS_API_TOKEN", TOKEN)
    cfg = write_config(tmp_path)
    for port, bound in (("70000", "less than or equal to 65535"), ("-1", "greater than or equal to 0")):
        assert main(["--config", str(cfg), "serve", "--port", port]) == 2  # was an OverflowError traceback
        assert capsys.readouterr().err.splitlines() == [
            f"error: evoharness serve: invalid value for option --port: Input should be {bound}"]


def test_health_is_open_and_mutations_need_the_bearer_token(serve):
    server = serve(service=API_ONLY)
    anon, authed = server.client(auth=False), server.client()
    health = anon.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok" and health.json()["auth"] is True
    assert health.json()["auto_runs"] is False and health.json()["worker_alive"] is True  # API only
    body = [trajectory("a1")]
    assert anon.post("/trajectories", json=body).status_code == 401
    wrong = anon.post("/trajectories", json=body, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert anon.post("/trajectories", json=body, headers={"Authorization": TOKEN}).status_code == 401  # no scheme
    for path in ("/runs", "/runs/run-x/approve", "/datasets/export"):
        assert anon.post(path, json={}).status_code == 401, path
    assert anon.get("/trajectories/a1").status_code == 404  # nothing was stored by the refused requests
    ok = authed.post("/trajectories", json=body)
    assert ok.status_code == 200 and ok.json() == {"received": 1, "stored": 1, "duplicates": 0, "conflicts": []}
    assert anon.get("/trajectories/a1").json()["id"] == "a1"  # reads are open by default


def test_insecure_no_auth_serves_without_a_token(serve):
    server = serve(service=API_ONLY, token=None, args=["--insecure-no-auth"])
    anon = server.client(auth=False)
    assert anon.get("/health").json()["auth"] is False
    assert anon.post("/trajectories", json=[trajectory("n1")]).json()["stored"] == 1


def test_ingestion_validates_names_index_and_field_and_is_idempotent(serve):
    server = serve(service={**API_ONLY, "max_batch": 20})
    c = server.client()
    bad = [trajectory("v0"), trajectory("v1"), {**trajectory("v2"), "score": 3.5}, {"id": "v3"}]
    r = c.post("/trajectories", json=bad)
    assert r.status_code == 422
    err = r.json()
    assert err["error"].startswith("record 2: score:")
    assert [(e["index"], e["field"]) for e in err["errors"]] == [(2, "score"), (3, "task_id")]
    assert c.get("/trajectories/v0").status_code == 404  # a bad batch stores nothing
    assert c.post("/trajectories", json={"id": "x"}).status_code == 422  # not a list
    assert c.post("/trajectories", content=b"[{", headers={"content-type": "application/json"}).status_code == 422
    too_many = c.post("/trajectories", json=[trajectory(f"b{i}") for i in range(21)])
    assert too_many.status_code == 422 and "service.max_batch" in too_many.json()["error"]
    assert c.post("/trajectories", json=[7]).json()["errors"][0] == {"index": 0, "field": "record",
                                                                     "error": "not a JSON object"}

    batch = [trajectory(f"i{i}", kind) for i, kind in enumerate(["healthy", "content", "process"] * 4)]
    first = c.post("/trajectories", json=batch).json()
    assert first == {"received": 12, "stored": 12, "duplicates": 0, "conflicts": []}
    again = c.post("/trajectories", json=batch[:5] + [trajectory("i99"), trajectory("i99")]).json()
    assert again == {"received": 7, "stored": 1, "duplicates": 6, "conflicts": []}
    changed = {**trajectory("i0", "process")}  # same id, other content: the first copy wins
    assert c.post("/trajectories", json=[changed]).json() == {
        "received": 1, "stored": 0, "duplicates": 0,
        "conflicts": [{"index": 0, "id": "i0", "error": "id stored already with other content; not stored"}]}
    assert c.get("/trajectories/i0").json()["final_answer"] == "Order 42: shipped."

    comp = c.get("/composition").json()
    assert comp["n"] == 13 and comp["counts"] == {"healthy": 5, "F1": 0, "F2": 0, "F3": 4, "F4": 4, "E": 0}
    assert comp["top_signals"][0]["id"] in ("F3.repeated_action", "F4.poor_delivery")
    assert comp["recommendation"]["lever"] == "harness" and not comp["recommendation"]["ceiling"]  # 4/13 process
    assert c.get("/composition", params={"last": 1}).json()["n"] == 1


def test_metrics_parse_and_their_counters_move(serve):
    server = serve(service=API_ONLY)
    c = server.client()
    before = _metrics(c)
    assert before["evoharness_trajectories_ingested_total"] == 0
    assert before["evoharness_loop_up"] == 1
    c.post("/trajectories", json=[trajectory("m1", "content"), trajectory("m2", "process")])
    c.post("/trajectories", json=[trajectory("m1", "content")])
    server.client(auth=False).post("/trajectories", json=[])
    after = _metrics(c)
    assert after["evoharness_trajectories_ingested_total"] == 2
    assert after['evoharness_ingest_requests_total{"outcome": "ok"}'] == 2
    assert after["evoharness_ingest_duplicates_total"] == 1
    assert after["evoharness_unauthorized_requests_total"] == 1
    assert after['evoharness_ingested_by_class{"failure_class": "F3"}'] == 1
    assert after["evoharness_ingest_seconds_count"] == 2


def test_dataset_export_writes_under_home_and_returns_path_and_counts(serve, tmp_path):
    server = serve(service=API_ONLY)
    c = server.client()
    c.post("/trajectories", json=[trajectory(f"e{i}", "healthy", task=f"t{i}") for i in range(3)]
           + [trajectory("held", "healthy", task="secret", split="heldout")])
    r = c.post("/datasets/export", json={"source": "healthy", "name": "mine", "render_under": "trajectory"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert Path(out["path"]) == (tmp_path / "home" / "exports" / "mine").resolve()
    lines = (Path(out["path"]) / "data.jsonl").read_text().splitlines()
    assert out["records"] == len(lines) == 3 and out["heldout_tasks_excluded"] == 1
    assert (Path(out["path"]) / "README.md").is_file()
    bad = c.post("/datasets/export", json={"source": "healthy", "tasks": ["secret"]})
    assert bad.status_code == 422 and "held-out" in bad.json()["error"]
    assert c.post("/datasets/export", json={"name": "../escape"}).status_code == 422


def test_unknown_run_is_404_and_bad_decision_is_409(serve):
    server = serve(service=API_ONLY)
    c = server.client()
    assert c.get("/runs").json() == {"current": None, "runs": []}
    assert c.get("/runs/run-nope").status_code == 404
    assert c.post("/runs/run-nope/approve", json={"candidate": "x"}).status_code == 404
    assert c.get("/candidates/candidate/r9-nothing").status_code == 404
