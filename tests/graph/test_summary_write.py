"""A run's summary.json is whole or absent: written aside and renamed into place, and rewritten on resume when
the one there is not JSON. It was written in place and a done run never wrote it again, so a full disk (or a
kill) during its write left a cut file for good: `run --resume` was then a JSONDecodeError traceback every time,
and the service's GET /runs a 500."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from types import SimpleNamespace

import pytest

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 2, "max_rounds": 1, "budget": 3000}


def _run(root, *args: str) -> subprocess.CompletedProcess:
    sets = [f"home={root / 'state'}", f"run.harness={root / 'harness'}", "sandbox.backend=inprocess",
            "roles.kind=playbook", "log_level=error", *(f"run.{k}={json.dumps(v)}" for k, v in RUN.items())]

    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    return subprocess.run([sys.executable, "-m", "evoharness", *(x for s in sets for x in ("--set", s)), *args],
                          env=env, capture_output=True, text=True, timeout=600)


def test_a_summary_cut_before_is_written_again_on_resume(tmp_path):
    first = _run(tmp_path, "run", "--run-id", "run-x")
    assert first.returncode == 0, first.stderr[-3000:]
    summary = tmp_path / "state" / "runs" / "run-x" / "summary.json"
    whole = json.loads(summary.read_text())
    summary.write_text(json.dumps(whole, indent=2)[:5000])  # cut by a full disk or a kill (an older evoharness)
    again = _run(tmp_path, "run", "--resume", "run-x")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-3000:]
    assert json.loads(summary.read_text()) == whole


def test_a_summary_write_the_disk_refuses_leaves_no_cut_file(tmp_path, monkeypatch):
    """The file size limit (RLIMIT_FSIZE) fails the write as a full disk does."""
    from evoharness.graph import summary as summary_mod

    monkeypatch.setattr(summary_mod, "summary_dict", lambda outcome, services: {"rounds": ["r" * 100] * 300})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))
    try:
        with pytest.raises(OSError):
            summary_mod.write_summary(SimpleNamespace(run_dir=tmp_path), None)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert [p.name for p in tmp_path.iterdir()] == []  # no summary.json (a done run's resume writes it), no temp


def test_the_service_lists_a_run_whose_summary_was_cut(tmp_path):
    """GET /runs read every done run's summary.json: one cut file made the whole list (and the run's view) a 500."""
    from fastapi.testclient import TestClient

    from evoharness.config import Settings
    from evoharness.graph.runner import runs_dir, save_run_settings
    from evoharness.service.app import create_app

    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    run_dir = runs_dir(settings) / "run-x"
    save_run_settings(run_dir, settings)
    (run_dir / "summary.json").write_text('{"run_id": "run-x", "status": "do')
    with TestClient(create_app(settings, None, quiet=True)) as c:
        listed = c.get("/runs")
        assert listed.status_code == 200, listed.text
        assert [r["run_id"] for r in listed.json()["runs"]] == ["run-x"]
        view = c.get("/runs/run-x")
        assert view.status_code == 200 and view.json()["summary"] is None, view.text
