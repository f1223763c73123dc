"""SIGKILL during concurrent ingestion loses nothing that was acknowledged."""

from __future__ import annotations

import signal
import sqlite3
import threading

import httpx

from tests.service.helpers import AUTH, trajectory, wait_for


def test_sigkill_during_concurrent_ingestion_loses_no_acknowledged_trajectory(serve, tmp_path):
    server = serve(service={"loop": False})
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    workers, requests_each, batch = 8, 40, 50

    def worker(w: int) -> None:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as c:
            for r in range(requests_each):
                if stop.is_set():
                    return
                # every other batch repeats half of the previous one: duplicates in flight
                base = w * 10_000 + r * batch
                ids = [f"k{w}-{base - batch // 2 + i if r % 2 else base + i}" for i in range(batch)]
                try:
                    resp = c.post("/trajectories", json=[trajectory(i, "content" if n % 3 else "process")
                                                          for n, i in enumerate(ids)])
                except httpx.HTTPError:
                    return  # the server is gone
                if resp.status_code == 200:
                    with lock:
                        acked.extend(ids)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    wait_for(lambda: len(acked) >= 40 * batch, timeout=120, every=0.01, what="40 acknowledged requests")
    server.signal(signal.SIGKILL)
    assert server.wait(30) == -signal.SIGKILL
    stop.set()
    for t in threads:
        t.join(60)
    assert len(acked) < workers * requests_each * batch  # the kill landed mid-stream

    again = serve(service={"loop": False})
    db = sqlite3.connect(tmp_path / "home" / "service" / "ingest.sqlite")
    stored = [r[0] for r in db.execute("SELECT id FROM trajectories")]
    assert len(stored) == len(set(stored))  # no duplicates
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged trajectories lost, e.g. {sorted(missing)[:3]}"
    c = again.client()
    assert c.get("/composition").json()["n"] == len(stored)
    some = sorted(set(acked))[:: max(1, len(set(acked)) // 20)]
    bodies = [c.get(f"/trajectories/{tid}").json() for tid in some]
    assert [b["id"] for b in bodies] == some
    # a request resent after the crash is absorbed without new rows (the same records: duplicates)
    resent = c.post("/trajectories", json=bodies).json()
    assert resent == {"received": len(some), "stored": 0, "duplicates": len(some), "conflicts": []}
    # the same ids with other content (a healthy run where a content or process failure is stored): conflicts
    other = c.post("/trajectories", json=[trajectory(i) for i in some]).json()
    assert other["stored"] == 0 and [x["id"] for x in other["conflicts"]] == some
