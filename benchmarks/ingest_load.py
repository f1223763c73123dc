"""Ingestion under load: 200 POST /trajectories of 100 trajectories each, on loopback, at stated concurrency.

Starts `evoharness serve --no-loop` in a subprocess on a free 127.0.0.1 port (home in a temp dir),
fires the requests with ``--concurrency`` of them in flight at once (asyncio + httpx; several levels
may be given, each measured on a fresh server, the levels in turn ``--repeat`` times), with
``--dup`` of each batch's ids repeating ids of another batch, then checks that every distinct id was
stored exactly once (none lost, duplicates ignored) and prints throughput and latency percentiles
(min / median / max over the repeats). Latency runs from a request's first send to its answer
(time waiting for the client's own ``--concurrency`` slot is not counted). A request the server
turns away with 429 (over ``service.max_in_flight`` + ``max_queued``) is retried after its
``Retry-After`` plus up to half of it again; its latency still counts from the first send, and
the 429s are counted.
Bounded: ``--requests`` x ``--batch`` trajectories, and the whole run stops after ``--timeout`` s.

``--compare-stores`` also measures, in process, the two store designs the service could use
(SQLite WAL with a UNIQUE id vs the JSONL TrajectoryStore behind a lock), same batches, 8 threads,
both labelling and fsync'ing every batch, plus the time to reopen each (the JSONL store re-reads the
whole file to rebuild its id index).

``--workers 1 4`` measures each ``service.workers`` level (ingest worker processes) at every
concurrency level, each on a fresh server.

    python benchmarks/ingest_load.py [--requests 200] [--batch 100] [--dup 0.1] [--concurrency 4 200]
        [--workers 1 4] [--repeat 3] [--compare-stores]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread


def trajectory(tid: str, i: int) -> dict:
    kind = i % 3  # healthy, content failure, process failure
    msgs = [{"role": "system", "content": "You are the agent."},
            {"role": "user", "content": f"Look up order {i} and report its status."}]
    for k in range(4 if kind == 2 else 2):
        cid = f"c{k}"
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {
            "name": "get_order", "arguments": json.dumps({"id": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "name": "get_order", "content": f"order {i}: shipped"})
    final = None if kind == 2 else f"Order {i}: shipped."
    if final:
        msgs.append({"role": "assistant", "content": final})
    return {"id": tid, "task_id": f"task-{i % 50}", "split": "dev", "messages": msgs, "final_answer": final,
            "score": [1.0, 0.1, 0.0][kind], "termination": "step_budget" if kind == 2 else "delivered"}


def batches(requests: int, batch: int, dup: float, seed: int = 0) -> list[list[str]]:
    """Ids per request; a share ``dup`` of each batch repeats ids of a random other batch."""
    rng = random.Random(seed)
    fresh = [[f"load-{r}-{i}" for i in range(batch)] for r in range(requests)]
    out = []
    n_dup = int(batch * dup)
    for ids in fresh:
        other = fresh[rng.randrange(requests)] if requests > 1 else ids
        out.append(ids[: batch - n_dup] + rng.sample(other, n_dup) if n_dup else ids)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, token: str, overrides: list[str] = ()) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    env["EVOHARNESS_API_TOKEN"] = token
    proc = subprocess.Popen([sys.executable, "-m", "evoharness", "--set", f"home={json.dumps(str(home))}",
                             "--set", f"run.harness={json.dumps(str(home / 'harness'))}",
                             *[a for o in overrides for a in ("--set", o)], "serve", "--no-loop",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # ingest workers import and warm up before /health answers
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start within 180 s")


def bodies_of(plan: list[list[str]]) -> list[bytes]:
    return [json.dumps([trajectory(t, number(t)) for t in ids]).encode() for ids in plan]


def number(tid: str) -> int:
    """The number a trajectory's content is made from: of its id alone (``load-R-I``: R + I), so an id another batch
    repeats is the same trajectory sent again, a duplicate (the request's index made it other content, which the
    service now answers as a conflict)."""
    _, r, i = tid.rsplit("-", 2)
    return int(r) + int(i)


async def fire(url: str, token: str, bodies: list[bytes], concurrency: int
               ) -> tuple[list[float], list[dict], int]:
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    busy = 0
    jitter = random.Random(0)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers={
            "Authorization": f"Bearer {token}", "content-type": "application/json"}) as client:
        async def one(body: bytes) -> tuple[float, dict]:
            nonlocal busy
            t0 = None
            while True:
                async with sem:
                    t0 = t0 or time.perf_counter()  # from the first send: the client's own queue is not counted
                    resp = await client.post("/trajectories", content=body)
                if resp.status_code != 429:
                    break
                busy += 1
                # as a well-behaved client: Retry-After, plus up to half of it again (no thundering herd)
                await asyncio.sleep(float(resp.headers.get("retry-after", "1")) * (1 + 0.5 * jitter.random()))
            dt = time.perf_counter() - t0
            if resp.status_code != 200:
                raise SystemExit(f"request failed: {resp.status_code} {resp.text[:300]}")
            return dt, resp.json()
        results = await asyncio.gather(*(one(b) for b in bodies))
    return [r[0] for r in results], [r[1] for r in results], busy


def server_seconds(text: str) -> tuple[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    vals = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    return vals.get("evoharness_ingest_seconds_sum", 0.0), vals.get("evoharness_ingest_seconds_count", 0.0)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def load(args, concurrency: int, workers: int = 1) -> dict:
    """One measurement on a fresh server: throughput, latency percentiles, 429s, and the id check."""
    token = secrets.token_hex(16)
    plan = batches(args.requests, args.batch, args.dup)
    distinct = {t for ids in plan for t in ids}
    total = sum(len(ids) for ids in plan)
    bodies = bodies_of(plan)  # built before the clock starts
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp), token, [*args.server_set, f"service.workers={workers}"])
        try:
            t0 = time.perf_counter()
            lat, answers, busy = asyncio.run(asyncio.wait_for(fire(url, token, bodies, concurrency), args.timeout))
            wall = time.perf_counter() - t0
            stored = sum(a["stored"] for a in answers)
            dups = sum(a["duplicates"] for a in answers)
            conflicts = sum(len(a.get("conflicts", ())) for a in answers)
            n_server = httpx.get(url + "/composition", timeout=30).json()["n"]
            server_s = server_seconds(httpx.get(url + "/metrics", timeout=30).text)
        finally:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:  # a loaded machine: do not leave a server behind
                proc.kill()
                proc.wait()
    ok = stored == len(distinct) == n_server and dups == total - len(distinct) and not conflicts
    return {"ok": ok, "total": total, "distinct": len(distinct), "wall": wall, "throughput": total / wall,
            "p50": pct(lat, 50), "p95": pct(lat, 95), "max": max(lat), "busy": busy,
            "server_ms": 1000 * server_s[0] / max(1, server_s[1])}


def report(args, runs: dict[tuple[int, int], list[dict]]) -> int:
    first = next(iter(runs.values()))[0]
    print(f"ingest_load: {args.requests} requests x {args.batch} trajectories ({first['total']} posted, "
          f"{first['distinct']} distinct ids), {args.repeat} repeat(s) per level ({load_note()})"
          + (f"; server: {' '.join(args.server_set)}" if args.server_set else ""))
    ok = True
    for (workers, level), rs in runs.items():
        ok &= all(r["ok"] for r in rs)
        print(f"  service.workers {workers}, concurrency {level}:")
        print(f"    throughput  {spread([r['throughput'] for r in rs], ',.0f')} trajectories/s posted")
        print(f"    latency p50 {spread([1000 * r['p50'] for r in rs], '.0f', ' ms')}")
        print(f"    latency p95 {spread([1000 * r['p95'] for r in rs], '.0f', ' ms')}")
        print(f"    latency max {spread([1000 * r['max'] for r in rs], '.0f', ' ms')}")
        print(f"    429 answers {spread([r['busy'] for r in rs], '.0f')}; server time per request "
              f"{spread([r['server_ms'] for r in rs], '.0f', ' ms')} (validate, label, store durably)")
        print("    " + ("OK: none lost, duplicates ignored" if all(r["ok"] for r in rs) else "FAILED: ids lost or "
                                                                                           "stored twice"))
    return 0 if ok else 1


def compare_stores(args) -> None:
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.service.ingest import IngestStore
    from evoharness.traces.models import Trajectory
    from evoharness.traces.store import TrajectoryStore

    plan = batches(args.requests, args.batch, args.dup)
    trajs = [[Trajectory.model_validate(trajectory(t, number(t))) for t in ids] for ids in plan]
    labeller = Labeller()

    def run(add) -> float:
        work = list(range(len(trajs)))
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not work:
                        return
                    r = work.pop()
                add(trajs[r])
        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        sq = IngestStore(Path(tmp) / "ingest.sqlite", labeller).open()
        t_sq = run(sq.add)
        n_sq = len(sq)
        sq.close()
        t0 = time.perf_counter()
        n_sq2 = len(IngestStore(Path(tmp) / "ingest.sqlite", labeller).open())
        reopen_sq = time.perf_counter() - t0
        js = TrajectoryStore(Path(tmp) / "ingest.jsonl")
        jlock = threading.Lock()

        def add_jsonl(batch):
            for t in batch:
                labeller.label(t)
            with jlock:
                js.add(batch)
        t_js = run(add_jsonl)
        n_js = len(js)
        t0 = time.perf_counter()
        n_js2 = len(TrajectoryStore(Path(tmp) / "ingest.jsonl"))
        reopen_js = time.perf_counter() - t0
    total = sum(len(b) for b in trajs)
    print(f"store comparison ({total} trajectories, 8 threads, label + fsync per batch):")
    print(f"  sqlite WAL + UNIQUE id : {total / t_sq:8,.0f}/s, {n_sq} stored; reopen {1000 * reopen_sq:.1f} ms "
          f"({n_sq2})")
    print(f"  jsonl + lock + id set  : {total / t_js:8,.0f}/s, {n_js} stored; reopen {1000 * reopen_js:.1f} ms "
          f"({n_js2}, re-reads the file)")


def main() -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--dup", type=float, default=0.1, help="share of each batch repeating another batch's ids")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[200],
                    help="requests in flight at once (several levels: each measured on a fresh server)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1],
                    help="service.workers levels (ingest worker processes; each level x concurrency on a fresh "
                         "server, all in turn)")
    ap.add_argument("--timeout", type=float, default=300, help="stop after this many seconds")
    ap.add_argument("--server-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for the server, e.g. service.max_in_flight=8 (repeatable)")
    ap.add_argument("--compare-stores", action="store_true")
    add_repeat(ap, default=1)
    args = ap.parse_args()
    check_repeat(ap, args.repeat)
    if not (1 <= args.requests <= 10_000 and 1 <= args.batch <= 1000 and 0 <= args.dup < 1
            and all(c >= 1 for c in args.concurrency) and all(1 <= w <= 64 for w in args.workers)):
        ap.error("--requests 1..10000, --batch 1..1000, --dup in [0, 1), --concurrency >= 1, --workers 1..64")
    runs: dict[tuple[int, int], list[dict]] = {(w, c): [] for w in args.workers for c in args.concurrency}
    for _ in range(args.repeat):
        for workers, level in runs:  # every combination in turn, so load drifts hit them alike
            runs[(workers, level)].append(load(args, level, workers))
    rc = report(args, runs)
    if args.compare_stores:
        compare_stores(args)
    return rc


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
