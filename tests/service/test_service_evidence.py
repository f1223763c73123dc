"""Ingested process failures reach the analyst of the run they trigger; GET /runs/{id}/report."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.service.ingest import IngestStore
from evoharness.traces.models import Trajectory
from tests.service.helpers import trajectory, wait_for, write_config

SMALL_RUN = {"rollouts": 2, "max_rounds": 1, "dev_limit": 8, "heldout_limit": 2}


def _run_started_after(c, previous: str | None) -> str:
    return wait_for(lambda: (lambda r: r if r and r != previous else None)(c.get("/health").json()["current_run"]),
                    what="a new run")


def _done(c, run_id: str) -> dict:
    return wait_for(lambda: (lambda v: v if v["phase"] == "done" else None)(c.get(f"/runs/{run_id}").json()),
                    timeout=180, what=f"{run_id} done")


def _cited(c, targets: str) -> set[str]:
    """Trajectory ids cited by the candidates targeting ``targets`` (their `Evidence:` trailers)."""
    out = set()
    for row in c.get("/candidates", params={"diff": "false"}).json()["candidates"]:
        if row["targets"] == targets:
            detail = c.get(f"/candidates/{row['branch']}").json()
            out |= {e.rsplit("@", 1)[0] for e in detail["evidence"]}
    return out


@pytest.mark.slow
def test_ingested_process_failures_are_the_evidence_of_the_run_they_trigger(serve, tmp_path):
    cfg_file = tmp_path / "known.jsonl"  # run.evidence: imported into every run the service starts
    cfg_file.write_text(json.dumps(trajectory("cfg-0", "process", task="prod-task-9")) + "\n")
    server = serve(run={**SMALL_RUN, "evidence": [str(cfg_file)]}, service={"min_new_process_failures": 3})
    c = server.client()
    first = [trajectory(f"prod-a{i}", "process", task=f"prod-task-{i}") for i in range(3)]
    assert c.post("/trajectories", json=[*first, trajectory("ok-1"), trajectory("content-1", "content")]).json()[
        "stored"] == 5
    run1 = _run_started_after(c, None)
    view = _done(c, run1)
    assert view["evidence"] == 4  # the process failures, not the healthy or content ones
    snapshot = (tmp_path / "home" / "runs" / run1 / "evidence.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in snapshot] == ["cfg-0", "prod-a0", "prod-a1", "prod-a2"]
    cited = _cited(c, "F3.repeated_action")
    assert cited & {"prod-a0", "prod-a1", "prod-a2"}, cited
    assert any("/dev/" in i for i in cited)  # beside the anchor's own rollouts

    # the next run gets the process failures that arrived since the previous one started, only those
    second = [trajectory(f"prod-b{i}", "process", task=f"prod-task-{i}") for i in range(3)]
    c.post("/trajectories", json=second)
    run2 = _run_started_after(c, run1)
    assert _done(c, run2)["evidence"] == 4
    snapshot = (tmp_path / "home" / "runs" / run2 / "evidence.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in snapshot] == ["cfg-0", "prod-b0", "prod-b1", "prod-b2"]


def test_a_bad_evidence_file_stops_serve_at_start(tmp_path):
    cfg = write_config(tmp_path, run={"evidence": [str(tmp_path / "missing.jsonl")]})
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    proc = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve", "--port", "0",
                           "--insecure-no-auth"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ") and "missing.jsonl" in proc.stderr


@pytest.mark.slow
def test_report_endpoint_serves_the_html_and_the_pngs_it_references(serve, tmp_path):
    server = serve(run=SMALL_RUN)
    c = server.client(auth=False)  # a read
    run_id = _run_started_after(c, None)
    _done(c, run_id)
    r = c.get(f"/runs/{run_id}/report")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert f"evoharness run report: {run_id}" in html and '<base href="report/">' in html
    images = re.findall(r'<img src="([^"]+)"', html)
    assert "anchors.png" in images and "composition.png" in images
    for name in images:  # what the page references resolves, relative to the base
        img = c.get(f"/runs/{run_id}/report/{name}")
        assert img.status_code == 200 and img.headers["content-type"] == "image/png", name
        assert img.content.startswith(b"\x89PNG\r\n\x1a\n") and len(img.content) > 1000
    md = c.get(f"/runs/{run_id}/report/report.md")
    assert md.status_code == 200 and f"# evoharness run report: {run_id}" in md.text
    assert (tmp_path / "home" / "service" / "reports" / run_id / "report.html").is_file()
    assert c.get("/runs/run-nope/report").status_code == 404
    assert c.get("/runs/run-nope/report/anchors.png").status_code == 404
    assert c.get(f"/runs/{run_id}/report/settings.json").status_code == 404
    assert c.get(f"/runs/{run_id}/report/..%2Fsettings.json").status_code == 404
    # a run that has measured nothing yet has nothing to report: 409 with the reason
    empty = tmp_path / "home" / "runs" / "run-empty"
    empty.mkdir()
    shutil.copy(tmp_path / "home" / "runs" / run_id / "settings.json", empty / "settings.json")
    r = c.get("/runs/run-empty/report")
    assert r.status_code == 409 and "nothing to report" in r.json()["error"]


def test_report_needs_the_token_when_reads_are_protected(serve):
    c = serve(service={"loop": False, "protect_reads": True}).client(auth=False)
    assert c.get("/runs/run-nope/report").status_code == 401


def test_process_failures_since_a_seq_most_recent_first_cut(tmp_path):
    store = IngestStore(tmp_path / "ingest.sqlite", Labeller()).open()
    recs = [trajectory(f"p{i}", "process") for i in range(5)] + [trajectory("h", "healthy")]
    store.add([Trajectory.model_validate(r) for r in recs])
    assert [t.id for t in store.process_failures(0, store.last_seq(), 10)] == [f"p{i}" for i in range(5)]
    assert [t.id for t in store.process_failures(1, 4, 10)] == ["p1", "p2", "p3"]
    assert [t.id for t in store.process_failures(0, store.last_seq(), 2)] == ["p3", "p4"]  # the most recent
    assert store.process_failures(0, store.last_seq(), 0) == []
    store.close()
