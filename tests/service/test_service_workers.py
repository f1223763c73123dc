"""service.workers > 1: batches stored by worker processes, exactly once, even when a worker is killed."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path

import httpx
import pytest

from tests.service.helpers import AUTH, trajectory, wait_for


def children(pid: int) -> list[int]:
    """Live (not zombie) child processes of ``pid``."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(p) for p in (task / "children").read_text().split()]
    return [p for p in out if _state(p) not in ("Z", "X", None)]


def ingest_workers(pid: int) -> list[int]:
    """The pool's worker processes among the live children of ``pid`` (not multiprocessing's resource
    tracker, also a child of the server)."""
    return [p for p in children(pid) if b"spawn_main" in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


@pytest.mark.slow
def test_ingest_workers_store_every_acknowledged_id_once_and_survive_a_killed_worker(serve, tmp_path):
    server = serve(service={"loop": False, "workers": 2})
    workers = wait_for(lambda: len(ingest_workers(server.proc.pid)) >= 2 and ingest_workers(server.proc.pid),
                       timeout=60, what="two ingest worker processes")
    acked: list[str] = []
    answers: list[dict] = []
    failed: list[int] = []
    lock = threading.Lock()
    batch = 40

    def post(w: int) -> None:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as c:
            for r in range(12):
                base = (w % 2) * 10_000 + r * batch  # client w and w + 2 post the same ids: duplicates in flight
                ids = [f"w-{base + i}" for i in range(batch)]
                resp = c.post("/trajectories", json=[trajectory(i, "content" if n % 2 else "process")
                                                      for n, i in enumerate(ids)])
                with lock:
                    if resp.status_code == 200:
                        acked.extend(ids)
                        answers.append(resp.json())
                    else:
                        failed.append(resp.status_code)
                if w == 0 and r == 3:
                    os.kill(workers[0], signal.SIGKILL)  # one worker dies mid-stream

    threads = [threading.Thread(target=post, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(failed) <= {503}  # a batch is retried once on a fresh pool; if refused, not acknowledged; never 500
    assert len(answers) >= 40  # the pool was replaced: later batches went through
    assert workers[0] not in children(server.proc.pid) and ingest_workers(server.proc.pid)
    # an idle worker killed between requests: the next request is served on a fresh worker, not refused
    c = server.client()
    idle = ingest_workers(server.proc.pid)
    os.kill(idle[0], signal.SIGKILL)
    wait_for(lambda: idle[0] not in children(server.proc.pid), timeout=30, what="the killed worker reaped")
    after_idle_kill = [f"idle-{i}" for i in range(5)]
    resp = c.post("/trajectories", json=[trajectory(i) for i in after_idle_kill])
    assert resp.status_code == 200, resp.text
    assert resp.json()["stored"] == 5
    acked += after_idle_kill
    db = sqlite3.connect(tmp_path / "home" / "service" / "ingest.sqlite")
    stored = [r[0] for r in db.execute("SELECT id FROM trajectories")]
    assert len(stored) == len(set(stored))  # two clients posted the same ids at once: stored once
    assert not set(acked) - set(stored)  # every acknowledged id is durable
    assert sum(a["stored"] for a in answers) <= len(stored)
    assert c.get("/composition").json()["n"] == len(stored)
    # an invalid batch still gets the server's one-line error, not a worker's
    bad = c.post("/trajectories", json=[{"id": "x"}])
    assert bad.status_code == 422 and "record 0" in bad.json()["error"]
