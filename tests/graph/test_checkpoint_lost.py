"""The Postgres checkpointer's database going away mid-run (restarted, or its connection cut) is one `error: run ...
paused: ...` line, exit 2, and the run resumes to the same end; a checkpointer that cannot be opened when a run starts
is one `error: run.checkpointer: ...` line and no run. Before, both were a psycopg OperationalError traceback (exit 1).
The mid-run cut is made the way a restart looks to the run: the server ends the run's own session
(pg_terminate_backend on its application_name), on the real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter

import git
import pytest

from tests.graph.conftest import PG

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 4, "max_rounds": 2, "budget": 4000,
       "dev_limit": 8, "heldout_limit": 4, "patience": 2}


def _cmd(tmp_path, checkpointer: str, *args: str) -> list[str]:
    sets = [f"home={tmp_path / 'state'}", f"run.harness={tmp_path / 'harness'}", "sandbox.backend=inprocess",
            "roles.kind=playbook", "log_level=error", f"run.checkpointer={checkpointer}",
            *(f"run.{k}={json.dumps(v)}" for k, v in RUN.items())]
    return [sys.executable, "-m", "evoharness", *(x for s in sets for x in ("--set", s)), *args]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("[")]  # progress lines start '[ '
    assert len(errors) == 1 and errors[0].startswith("error: run run-x paused: "), proc.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize("checkpointer", ["postgresql://nobody:x@127.0.0.1:1/none", "sqlite:not-a-database",
                                          "sqlite:a-directory"])
def test_a_checkpointer_that_cannot_be_opened_at_start_is_one_error_line_and_no_run(tmp_path, checkpointer):
    """Postgres down (or a wrong password, port or database) when a run starts: the run was made with that URL and
    paused, and as a run keeps the settings it starts with, `run --resume` after the setting was fixed still used
    the saved URL: the run could never go on. A SQLite checkpointer on a file that is no database was a
    DatabaseError traceback. Now nothing is made, and the run starts once the setting is fixed."""
    run_dir = tmp_path / "state" / "runs" / "run-x"
    if checkpointer.startswith("sqlite:"):  # a relative sqlite:PATH is read against the run directory
        run_dir.mkdir(parents=True)
        (run_dir / "not-a-database").write_text("these are notes, not a database\n" * 100)
        (run_dir / "a-directory").mkdir()
    proc = subprocess.run(_cmd(tmp_path, checkpointer, "run", "--run-id", "run-x"),
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("[")]
    assert len(errors) == 1, proc.stderr[-3000:]
    if checkpointer == "sqlite:a-directory":  # 'paused' (a SQLite database cannot be written) before it was checked
        assert errors[0].startswith(f"error: run.checkpointer: {run_dir / 'a-directory'} cannot be used"), errors[0]
        assert "no run was started" in errors[0]
    elif checkpointer.startswith("sqlite:"):
        assert errors[0].startswith(f"error: {run_dir / 'not-a-database'}: ") and "not a SQLite database" in errors[0]
    else:
        assert errors[0].startswith("error: run.checkpointer: its database cannot be reached (connection"), errors[0]
        assert "no run was started" in errors[0]
    assert not (run_dir / "settings.json").exists()


def test_a_run_refused_for_its_damaged_checkpoint_database_leaves_no_run_directory(tmp_path):
    """The default checkpointer's file (<home>/runs/checkpoints.sqlite) damaged, `run --run-id run-y` (and `demo
    --resume`, which starts a new run) was refused in one line but left runs/run-y holding only run.lock, one more
    directory every try: the lock made the directory before the check, which removes only a directory it made."""
    runs = tmp_path / "state" / "runs"
    runs.mkdir(parents=True)
    (runs / "checkpoints.sqlite").write_bytes(os.urandom(5000))
    proc = subprocess.run(_cmd(tmp_path, "sqlite", "run", "--run-id", "run-y"), env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "not a SQLite database" in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    assert sorted(p.name for p in runs.iterdir()) == ["checkpoints.sqlite"]


def test_a_connection_cut_mid_run_pauses_it_and_it_resumes_to_the_end(tmp_path, pg_checkpointer):
    import psycopg

    app = "evoharness_cut_" + uuid.uuid4().hex[:8]
    url = f"{pg_checkpointer}&application_name={app}"
    proc = subprocess.Popen(_cmd(tmp_path, url, "run", "--run-id", "run-x"), env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    cut = False
    with psycopg.connect(PG, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and not cut:
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchone():
                time.sleep(1.0)  # into the run: the anchor is being measured or a later node
                cut = any(r[0] for r in conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,)))
            time.sleep(0.05)
    out, err = proc.communicate(timeout=300)
    assert cut, f"the run's session was never seen (exit {proc.returncode}): {err[-2000:]}"
    line = _one_error_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert "cannot be reached" in line and "run --resume run-x" in line, line
    resumed = subprocess.run(_cmd(tmp_path, url, "run", "--resume", "run-x"), env=_env(), capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run_dir = tmp_path / "state" / "runs" / "run-x"
    summary = json.loads((run_dir / "summary.json").read_text())
    ids = [json.loads(x)["id"] for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert summary["status"] == "done" and [i for i, n in Counter(ids).items() if n > 1] == []
    merges = [c for c in git.Repo(tmp_path / "harness").iter_commits("main", first_parent=True) if len(c.parents) == 2]
    assert len(merges) == len(summary["merged"])  # none twice
