"""PostgreSQL: the LangGraph checkpointer (`run.checkpointer = "postgresql://..."`, killed and resumed)
and the training queue on `datasets.url`, then the whole service on both.

Runs for real when EVOHARNESS_TEST_POSTGRES is set (scripts/services.sh starts PostgreSQL 15);
each test works in a fresh schema, dropped afterwards, so reruns never collide.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from urllib.parse import quote

import git
import pytest

from tests.service.helpers import trajectory, wait_for

PG = os.environ.get("EVOHARNESS_TEST_POSTGRES")  # read at import: the autouse fixture clears EVOHARNESS_*

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(not PG, reason="EVOHARNESS_TEST_POSTGRES not set (scripts/services.sh starts PostgreSQL)"),
]

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 4, "max_rounds": 2, "budget": 3000,
       "heldout_limit": 4, "patience": 2}


@pytest.fixture
def schema():
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in PG else "?"
    opts = f"{sep}options={quote(f'-csearch_path={name}')}"
    checkpointer = PG + opts
    queue = PG.replace("postgresql://", "postgresql+psycopg://", 1).replace("postgres://", "postgresql+psycopg://",
                                                                           1) + opts
    yield name, checkpointer, queue
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE")


def _count(schema_name: str, sql: str, *params) -> int:
    import psycopg

    with psycopg.connect(PG) as conn:
        conn.execute(f"SET search_path TO {schema_name}")
        return conn.execute(sql, params).fetchone()[0]


def test_postgres_checkpointer_and_queue_survive_a_sigkill_and_resume(schema, tmp_path):
    from evoharness.config import Settings
    from evoharness.datasets.queue import TrainingQueue
    from evoharness.graph.progress import Progress
    from evoharness.graph.runner import resume_run

    name, checkpointer, queue_url = schema
    sets = {"home": str(tmp_path / "home"), "run.harness": str(tmp_path / "harness"),
            "sandbox.backend": "inprocess", "roles.kind": "playbook", "log_level": "error",
            "run.checkpointer": checkpointer, "datasets.url": queue_url,
            **{f"run.{k}": v for k, v in RUN.items()}}
    args = []
    for k, v in sets.items():
        args += ["--set", f"{k}={json.dumps(v)}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    env["EVOHARNESS_FAULT_KILL_AT"] = "6"  # enqueue:done: the queue is written, the checkpoint is not
    proc = subprocess.run([sys.executable, "-m", "evoharness", *args, "run", "--run-id", "run-pg"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert _count(name, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", "run-pg") > 0
    queued_before = _count(name, "SELECT count(*) FROM training_queue")
    assert queued_before > 0

    settings = Settings.model_validate(json.loads((tmp_path / "home" / "runs" / "run-pg" / "settings.json")
                                                  .read_text()))
    assert settings.run.checkpointer == checkpointer
    out = resume_run(settings, "run-pg", progress=Progress(quiet=True))
    assert out.done and out.state["stop_reason"]
    queue = TrainingQueue(queue_url)
    ids = [i.trajectory_id for i in queue.items(run_id="run-pg")]
    assert len(ids) == len(set(ids)) and set(ids) == set(out.state["queued"])
    assert _count(name, "SELECT count(*) FROM training_queue") == len(ids)
    lines = (tmp_path / "home" / "runs" / "run-pg" / "trajectories.jsonl").read_text().splitlines()
    assert max(Counter(json.loads(x)["id"] for x in lines).values()) == 1
    repo = git.Repo(tmp_path / "harness")
    merges = [c for c in repo.iter_commits("main", first_parent=True) if len(c.parents) == 2]
    assert len(merges) == len(out.state.get("merged", []))
    again = resume_run(settings, "run-pg", progress=Progress(quiet=True))  # resuming a done run changes nothing
    assert again.done and len(again.state["rounds"]) == len(out.state["rounds"])


def test_service_on_postgres_reviews_by_http_and_queues_ingested_failures(schema, serve):
    name, checkpointer, queue_url = schema
    server = serve(run={"rollouts": 8, "max_rounds": 1, "review": True, "dev_limit": 8, "heldout_limit": 4,
                        "checkpointer": checkpointer},
                   service={"poll_interval_s": 0.2}, extra_sections={"datasets": {"url": queue_url}})
    c = server.client()
    run_id = wait_for(lambda: c.get("/health").json()["current_run"], what="a run")

    def waiting():
        view = c.get(f"/runs/{run_id}").json()
        return view if view["waiting_review"] else None
    view = wait_for(waiting, timeout=180, what="the review interrupt")
    branch = view["waiting_review"][0]["branch"]
    assert c.post(f"/runs/{run_id}/approve", json={"candidate": branch}).status_code == 202
    done = wait_for(lambda: (lambda v: v if v["phase"] == "done" else None)(c.get(f"/runs/{run_id}").json()),
                    timeout=180, what="the run to finish")
    assert [m["branch"] for m in done["merged"]] == [branch]
    assert _count(name, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", run_id) > 0
    c.post("/trajectories", json=[trajectory("pg-content", "content")])
    wait_for(lambda: _count(name, "SELECT count(*) FROM training_queue WHERE trajectory_id = 'pg-content'"),
             what="the ingested content failure in the Postgres queue")


def test_processes_setting_up_one_fresh_schema_at_once_all_succeed(schema, tmp_path):
    """`CREATE TABLE IF NOT EXISTS` races between sessions (the service's loop and an API read, or two
    processes); the checkpointer's setup takes an advisory lock, so none fails."""
    name, checkpointer, _ = schema
    code = ("import sys; from pathlib import Path; from evoharness.graph.checkpoint import open_checkpointer\n"
            "with open_checkpointer(sys.argv[1], Path(sys.argv[2])) as saver:\n"
            "    print(type(saver).__name__)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, checkpointer, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err.strip().splitlines()[-2:] for _, err in outs if err]
    assert all(out.strip() == "PostgresSaver" for out, _ in outs)
    assert _count(name, "SELECT count(*) FROM checkpoint_migrations") > 0
