"""Per-rollout cost of the bubblewrap sandbox, and the speed-up of 2 parallel workers over 1.

Runs the same agent on the same requests (seed harness from ``evoharness init``, scripted model)
in turn, one worker at a time: in this process, compiling the harness's template every rollout (``inprocess``,
``LocalExecutor(prepare=False)``: the row the figures compared against before 2026-12-06) and as in-process rollouts
run by default since ``f185ff2`` (``inprocess-prepared``: template, policies and middleware and tool modules prepared
once per text, as a fork server does for its children); as a plain child process (``--sandbox none``: the
same worker command, no isolation); under bubblewrap with one process per batch (``bwrap-batch``,
``sandbox.warm = false``: the shape before warm workers); and on a warm bwrap worker
(``sandbox/warm.py``: a fork server per slot, a forked child per batch), once counting the
worker's start (``bwrap-warm+start``: the executor's workers stopped before the timed run, so it pays
one sandbox start for its ``--rollouts``, as a round pays per commit and slot) and once with the
worker already up (``bwrap-warm``: what each further rollout of a commit costs, with the opt-in
``sandbox.warm_fork = "commit"``: the child forked for the warm-up's rollout of the commit runs the timed ones too;
``bwrap-warm/batch``: the same with ``"batch"``, a forked child per batch, the default; ``bwrap-warm/rollout``:
with ``"rollout"``, a forked child per rollout). Prints the mean
wall seconds and CPU seconds per rollout, each bwrap row over the plain process and over in-process
(wall, and CPU: load-robust), the warm children's minor page faults, the model calls per rollout (HTTP round
trips over the gateway, from its per-rollout counts), each CPU row over ``inprocess-prepared`` (the in-process
default, and the fairer ratio: the ``inprocess`` row compiles the template every rollout, two thirds of a synthetic
rollout's own work, which a fork server does once per text), then the speed-up of 2 bwrap workers over 1 on the
same requests. CPU counts this process (executor, model gateway, host-side scoring), its waited-for children (a
plain process) and what warm fork servers report (each child, the server's own fork/wait/sweep, its start-up;
bwrap's own set-up, a few ms per start, is not counted). A cold bwrap sandbox's CPU is not measured
(``bwrap-batch``: its processes are never waited for by this one, so rusage does not see them; the row's CPU column
is left out).

With ``--repeat N`` the configurations run in turn N times (in-process, process, bwrap, in-process,
...) and each figure is the median, with min / median / max printed beside the ratios.

    python benchmarks/rollout_overhead.py [--env synthetic] [--model scripted:weak] [--rollouts 8] [--repeat 3]
        [--batch 1] [--docker] [--ray] [--fork-floor] [--breakdown [--warm-fork commit|batch|rollout]]

``--batch N``: rollouts of one commit go to one sandboxed worker N at a time (a run's
``sandbox.batch_size`` is 8); with 1, every rollout gets a fresh sandbox (all bwrap rows are then cold).

``--fork-floor`` measures, in this process and without a sandbox or gateway (the scripted model
in-process), what per-rollout process isolation costs on its own: the fork server's imports are loaded
and frozen as in ``agent/forkserver.py``, then the same ``worker`` rollouts run in turn in this process,
in a forked child each (its CPU and minor page faults from ``wait4``), the same with ``gc.disable()`` in
the child, and as a bare fork + exit
(the parent's CPU for the fork beside the child's); ``--repeat`` rounds of ``--rollouts`` each.

With ``PYTHONPATH`` set (another tree of evoharness, unpacked elsewhere, to compare before and after in turn),
the sandboxed workers get it too, so that they run the same code as this process.

``--breakdown`` measures only where a warm rollout's CPU goes (a bwrap warm worker already up, ``--batch`` rollouts
to a forked child: 2 or more; an offline model, served host-side), ``--repeat`` rounds of ``--rollouts``: this
process's CPU split by thread -- the model gateway's connection threads (HTTP, the request's JSON and checks, the
host-side stand-in model, the reply), the executor's rollout threads (request file, warm protocol, reading,
unsealing and replaying the output, scoring) and the rest --, the fork server's own CPU and the batch children's
(from the server's per-rollout reports: a child's first rollout, its later ones, and what it costs once per batch
beyond its rollouts -- the fork's return, the baseline it checks against, exit), with minor page faults; then the
host's CPU per model call in the gateway's threads beside a bare round trip over a Unix socket of the same mean
request and reply sizes (a thread per connection, one connection per rollout, length-prefixed frames, no HTTP or
JSON): the transport's own floor. docs/sandbox.md ("Where a warm rollout's CPU goes") has a run.

``--docker`` adds a fresh Docker container per rollout and warm pooled containers (docs/sandbox.md).
``--ray`` adds a local Ray (this machine's CPUs): one task per rollout and one per batch of 4, each
against a local bwrap pool with as many workers and the same batching, plus Ray's start-up time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.base import ProcessSandbox
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.config import WARM_FORKS
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits

ROWS = ("inprocess", "inprocess-prepared", "process", "bwrap-batch", "bwrap-warm+start", "bwrap-warm",
        "bwrap-warm/batch", "bwrap-warm/rollout")
BWRAP_ROWS = ROWS[3:]
# see the docstring: not bwrap-batch
CPU_ROWS = ("inprocess", "inprocess-prepared", "process", "bwrap-warm+start", "bwrap-warm", "bwrap-warm/batch",
            "bwrap-warm/rollout")
# what each CPU row is set against the in-process default (``inprocess-prepared``), and what it is
PREPARED_RATIOS = (("process", "a plain process per batch"), ("bwrap-warm+start", "counting a worker start"),
                   ("bwrap-warm", 'a child per commit, sandbox.warm_fork = "commit", opt-in'),
                   ("bwrap-warm/batch", "a child per batch, the default"),
                   ("bwrap-warm/rollout", "a child per rollout"))


def _requests(env_spec: str, n: int, split: str) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment(env_spec).list_tasks(split)]
    return [RolloutRequest(task_id=tasks[i % len(tasks)], harness_commit="HEAD", seed=i, rollout=0, split=split)
            for i in range(n)]


def _cpu() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(harness: Path, args, sandbox, workers: int, reqs: list[RolloutRequest], *, warm: bool = True,
           restart: bool = False, warm_fork: str = "commit", prepared: bool = False
           ) -> tuple[float, int, float, float, int]:
    """Wall seconds for ``reqs``, how many failed, their CPU seconds (this process -- executor, gateway,
    host-side scoring -- plus the sandboxes: waited-for children, and what warm workers' fork servers
    report for their children, themselves and their start), the warm children's page faults and the model
    calls that went through the gateway (its per-rollout counts); ``restart``: stop warm workers before the
    timed run; ``prepared`` (in-process): the executor's default, ``LocalExecutor(prepare=True)``: each tree's
    template compiled, policies parsed and middleware and tool modules compiled once per text, as a fork server
    does for its children (``agent.harness.prepare``, ``prepare_code``), forgotten again afterwards; without it every
    in-process rollout compiles them (``prepare=False``, the ``inprocess`` row)."""
    from evoharness.agent import harness as prepared_memo

    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
    try:
        with LocalExecutor(harness, args.env, args.model, sandbox=sandbox, workers=workers, env=env,
                           batch_size=args.batch, warm=warm, warm_fork=warm_fork, prepare=prepared) as ex:
            # warm: export the commit, import caches, page in the interpreter; with warm workers, start one per
            # slot (a batch each at once), so that 2 workers vs 1 compares the same state, not a start against none
            ex.run(reqs[:(workers - 1) * args.batch + 1])
            if restart:
                ex.stop_workers()
            before = dict(ex.warm_cost)
            cpu, start = _cpu(), time.perf_counter()
            trajs = ex.run(reqs)
            elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
            spent = {k: v - before.get(k, 0) for k, v in ex.warm_cost.items()}
    finally:  # the memo is this process's: the unprepared rows must not find what this one prepared
        prepared_memo._PREPARED_TEMPLATES.clear()
        prepared_memo._PREPARED_POLICIES.clear()
        prepared_memo._PREPARED_CODE.clear()
    cpu += spent.get("child_cpu_s", 0) + spent.get("server_cpu_s", 0) + spent.get("start_cpu_s", 0)
    calls = sum(t.meta["gateway"].get("requests", 0) for t in trajs if isinstance(t.meta.get("gateway"), dict))
    return elapsed, sum(1 for t in trajs if t.meta.get("rollout_failure")), cpu, spent.get("child_minflt", 0), calls


def _fork_floor(args) -> None:
    """``--fork-floor`` (see the module docstring): print per-rollout CPU in-process, in a forked child and for
    a bare fork, medians with min / max over ``--repeat`` rounds of ``--rollouts``."""
    import gc

    from evoharness.agent import worker
    from evoharness.agent.forkserver import _warm
    from evoharness.harness_repo.init import init_harness

    with tempfile.TemporaryDirectory() as d:
        spec = Path(d, "warm.json")
        spec.write_text(json.dumps({"env_spec": args.env, "model_spec": args.model}))
        _warm(str(spec))
        harness = init_harness(Path(d) / "harness").path
        reqs = [worker.WorkerRequest(harness_dir=str(harness), env_spec=args.env, task_id=r.task_id,
                                     model_spec=args.model, seed=r.seed, split=args.split)
                for r in _requests(args.env, args.rollouts, args.split)]
        gc.freeze()
        rows: dict[str, list[float]] = {k: [] for k in ("inprocess", "child", "child_faults", "gcoff", "gcoff_faults",
                                                          "bare_parent", "bare_child", "bare_faults")}

        def without_gc(req: worker.WorkerRequest) -> None:
            gc.disable()
            worker._run(req)

        for _ in range(args.repeat):
            start = time.process_time()
            for req in reqs:
                worker._run(req)
            rows["inprocess"].append((time.process_time() - start) / len(reqs))
            for body, cpu_key, faults_key in ((worker._run, "child", "child_faults"),
                                              (without_gc, "gcoff", "gcoff_faults"),
                                              (None, "bare_child", "bare_faults")):
                cpu = faults = parent = 0.0
                for req in reqs:
                    before = time.process_time()
                    pid = os.fork()
                    if pid == 0:
                        if body is not None:
                            body(req)
                        os._exit(0)
                    parent += time.process_time() - before
                    _, _, use = os.wait4(pid, 0)
                    cpu, faults = cpu + use.ru_utime + use.ru_stime, faults + use.ru_minflt
                rows[cpu_key].append(cpu / len(reqs))
                rows[faults_key].append(faults / len(reqs))
                if body is None:
                    rows["bare_parent"].append(parent / len(reqs))
    print(f"fork floor: {len(reqs)} rollouts of {args.model} on {args.env} (no sandbox, no gateway), "
          f"{args.repeat} rounds ({load_note()})")
    for key, what in (("inprocess", "rollout in this process"), ("child", "rollout in a forked child (child CPU)"),
                      ("gcoff", "the same, gc.disable() in the child"),
                      ("bare_parent", "bare fork + exit: the parent's fork"),
                      ("bare_child", "bare fork + exit: the child")):
        print(f"  {what:<40}: {spread([x * 1000 for x in rows[key]], '.2f', ' ms')}")
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"  minor page faults per child: rollout {med['child_faults']:.0f} ({med['gcoff_faults']:.0f} without gc), "
          f"bare {med['bare_faults']:.0f}")
    ratios = [(c + p) / i for c, p, i in zip(rows["child"], rows["bare_parent"], rows["inprocess"], strict=True)]
    print(f"  (forked child + parent's fork) / in-process: {spread(ratios, '.2f', 'x')}")


def _echo_floor(calls: int, connections: int, request: int, reply: int) -> float:
    """Host CPU seconds per round trip of a bare Unix-socket echo: a child process opens ``connections``
    connections (a thread each here, as the gateway's), ``calls`` round trips on each of ``request`` bytes out and
    ``reply`` back (an 8-byte length before each), nothing parsed; this process's CPU over the child's run."""
    import socket
    import threading

    def serve(conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            while (head := f.read(8)) and len(head) == 8:
                f.read(int(head))
                conn.sendall(b"%08d" % reply + b"y" * reply)

    def accept(server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the measurement is over
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d, "echo.sock"))
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(16)
        threading.Thread(target=accept, args=(server,), daemon=True).start()
        body = b"%08d" % request + b"x" * request
        start = time.process_time()
        pid = os.fork()
        if pid == 0:  # the child: the client side, as a batch child
            code = 1
            try:
                for _ in range(connections):
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c, c.makefile("rb") as f:
                        c.connect(path)
                        for _ in range(calls):
                            c.sendall(body)
                            f.read(int(f.read(8)))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        used = time.process_time() - start
        server.close()
    if status != 0:
        raise SystemExit("error: the echo floor's client failed")
    return used / (calls * connections)


def _breakdown(args) -> None:
    """``--breakdown`` (see the module docstring): where a warm rollout's CPU goes, by process and thread."""
    import threading

    from evoharness.harness_repo.init import init_harness
    from evoharness.sandbox import gateway as gateway_mod
    from evoharness.sandbox import warm as warm_mod

    lock = threading.Lock()
    threads = {"gateway": 0.0, "executor": 0.0}
    records: list[tuple[dict, bool]] = []  # each rollout's server report, and whether it ended its batch
    sizes: list[tuple[int, int]] = []  # request and reply bytes of the model calls (measured in the warm-up only)
    measuring = [False]

    def timed(kind: str, fn):
        def wrapper(*a, **kw):
            start = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                with lock:
                    threads[kind] += time.thread_time() - start
        return wrapper

    handle, run_one, gw_handle = gateway_mod._Handler.handle, LocalExecutor._warm_one, gateway_mod.Gateway.handle
    worker_run = warm_mod.WarmWorker.run

    def sized(self, method: str, path: str, body: bytes | None):
        reply = gw_handle(self, method, path, body)
        if not measuring[0] and method == "POST":
            sizes.append((len(body or b""), len(json.dumps(reply.payload))))
        return reply

    def recorded(self, payload: dict, *, batch: str | None = None, last: bool = True):
        out = worker_run(self, payload, batch=batch, last=last)
        if measuring[0]:
            records.append((dict(self.last_cost), last))
        return out

    gateway_mod._Handler.handle = timed("gateway", handle)
    LocalExecutor._warm_one = timed("executor", run_one)
    gateway_mod.Gateway.handle = sized
    warm_mod.WarmWorker.run = recorded
    rounds: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            harness = Path(d) / "harness"
            init_harness(harness)
            reqs = _requests(args.env, args.rollouts, args.split)
            n = len(reqs)
            env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
            for _ in range(args.repeat):
                with LocalExecutor(harness, args.env, args.model, sandbox=BwrapSandbox(), workers=1, env=env,
                                   batch_size=args.batch, warm_fork=args.warm_fork) as ex:
                    ex.run(reqs[:args.batch])  # the worker up, the tree exported, the host's imports done
                    for k in threads:
                        threads[k] = 0.0
                    records.clear()
                    before = dict(ex.warm_cost)
                    measuring[0] = True
                    cpu = _cpu()
                    trajs = ex.run(reqs)
                    cpu = _cpu() - cpu
                    measuring[0] = False
                    spent = {k: v - before.get(k, 0) for k, v in ex.warm_cost.items()}
                calls = sum(t.meta["gateway"].get("requests", 0) for t in trajs
                            if isinstance(t.meta.get("gateway"), dict))
                firsts = [c for c, _ in records if c.get("child_forks")]
                later = [c for c, last in records if not c.get("child_forks") and not last]
                ends = [c for c, last in records if last and not c.get("child_forks")]
                row = {"host": cpu / n, "gateway": threads["gateway"] / n, "executor": threads["executor"] / n,
                       "server": spent.get("server_cpu_s", 0) / n, "child": spent.get("child_cpu_s", 0) / n,
                       "child_faults": spent.get("child_minflt", 0) / n, "calls": calls / n,
                       "failed": sum(1 for t in trajs if t.meta.get("rollout_failure"))}
                for key, group in (("first", firsts), ("later", later), ("end", ends)):
                    if group:
                        row[key] = statistics.median(c.get("child_cpu_s", 0) for c in group)
                        row[key + "_faults"] = statistics.median(c.get("child_minflt", 0) for c in group)
                rounds.append(row)
    finally:
        gateway_mod._Handler.handle, LocalExecutor._warm_one = handle, run_one
        gateway_mod.Gateway.handle, warm_mod.WarmWorker.run = gw_handle, worker_run
    if not sizes or not rounds[0]["calls"]:
        raise SystemExit("error: --breakdown saw no model call through the gateway")
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if all(k in r for r in rounds)}
    request = round(statistics.mean(a for a, _ in sizes))
    reply = round(statistics.mean(b for _, b in sizes))
    per_call = max(1, round(med["calls"]))
    floor = [_echo_floor(per_call, max(8, args.rollouts), request, reply) for _ in range(args.repeat)]
    total = med["host"] + med["server"] + med["child"]
    ms = 1000.0
    print(f"where a warm rollout's CPU goes: {args.rollouts} rollouts of {args.model} on {args.env}, "
          f"batch {args.batch}, bwrap warm worker up, medians of {args.repeat} rounds ({load_note()})")
    print(f"  total per rollout        : {total * ms:6.2f} ms CPU (failed rollouts: {int(med['failed'])})")
    print(f"  host (this process)      : {med['host'] * ms:6.2f} ms -- the gateway's connection threads "
          f"{med['gateway'] * ms:.2f}, the executor's rollout threads {med['executor'] * ms:.2f}, the rest "
          f"{(med['host'] - med['gateway'] - med['executor']) * ms:.2f}")
    print(f"  fork server              : {med['server'] * ms:6.2f} ms (fork, wait, sweep and checks, protocol)")
    print(f"  batch children           : {med['child'] * ms:6.2f} ms, {med['child_faults']:.0f} minor page faults")
    if "later" in med and "first" in med:
        once = med.get("end", med["later"]) - med["later"]
        print(f"    a child's first rollout: {med['first'] * ms:.2f} ms, {med['first_faults']:.0f} faults; later ones "
              f"{med['later'] * ms:.2f} ms, {med['later_faults']:.0f} faults; once per batch beyond its rollouts "
              f"(fork's return, baseline, exit) {once * ms:.2f} ms, "
              f"{med.get('end_faults', med['later_faults']) - med['later_faults']:.0f} faults")
    print(f"  model calls per rollout  : {med['calls']:.2f}; host CPU per call in the gateway's threads "
          f"{med['gateway'] / med['calls'] * 1e6:.0f} us (mean request {request} B, reply {reply} B)")
    print(f"  bare Unix-socket round trip of those sizes, host CPU: {spread([x * 1e6 for x in floor], '.0f', ' us')} "
          f"(a thread per connection, {per_call} calls each, no HTTP or JSON)")


def _bare(box, n: int = 20) -> float:
    """Mean seconds to run ``true`` through ``box`` (the sandbox's own start-up, no Python)."""
    limits = Limits(wall_seconds=30)
    with tempfile.TemporaryDirectory() as d:
        h, w = Path(d, "h"), Path(d, "w")
        h.mkdir()
        w.mkdir()
        Path(d).chmod(0o755)
        box.run(["true"], harness_dir=h, workdir=w, env={}, limits=limits)
        start = time.perf_counter()
        for _ in range(n):
            box.run(["true"], harness_dir=h, workdir=w, env={}, limits=limits)
        return (time.perf_counter() - start) / n


def _docker_rows(harness: Path, args, reqs: list[RolloutRequest], figures: dict, failures: dict) -> None:
    """Docker: one fresh container per rollout, then warm pooled containers (pool of 1, one worker)."""
    from evoharness.sandbox.docker import DockerSandbox

    n = len(reqs)
    with DockerSandbox() as cold, DockerSandbox(pool_size=1) as pool:
        for name, box in (("docker_cold", cold), ("docker_pool", pool)):
            elapsed, failures[name], _, _, _ = _timed(harness, args, box, 1, reqs)
            figures[f"{name}_s_per_rollout"] = round(elapsed / n, 4)
            figures[f"{name}_over_bwrap"] = round(figures[f"{name}_s_per_rollout"] / figures["bwrap_s_per_rollout"], 3)
        figures["bare_docker_cold_ms"] = round(1000 * _bare(cold, 8), 2)
        figures["bare_docker_pool_ms"] = round(1000 * _bare(pool), 2)


def _ray_rows(harness: Path, args, reqs: list[RolloutRequest], figures: dict, failures: dict) -> None:
    """Ray (a local Ray on this machine's CPUs) against a local bwrap pool of as many workers, same batching."""
    from evoharness.sandbox.config import SandboxConfig
    from evoharness.sandbox.ray_executor import RayExecutor

    cpus = os.cpu_count() or 1
    cfg = SandboxConfig(backend="bwrap")
    start = time.perf_counter()
    with RayExecutor(harness, args.env, args.model, cfg=cfg) as first:
        first.connect()
        figures["ray_start_s"] = round(time.perf_counter() - start, 2)
        for batch in (1, 4):
            name = f"batch{batch}"
            for kind, ex in (("pool", LocalExecutor(harness, args.env, args.model, sandbox=BwrapSandbox(),
                                                    workers=cpus, batch_size=batch)),
                             ("ray", RayExecutor(harness, args.env, args.model, cfg=cfg, batch_size=batch))):
                with ex:
                    ex.run(reqs[:1])  # warm: the exported tree, the workers' imports
                    t0 = time.perf_counter()
                    trajs = ex.run(reqs)
                    figures[f"{kind}_{name}_s"] = round(time.perf_counter() - t0, 3)
                failures[f"{kind}_{name}"] = sum(1 for t in trajs if t.meta.get("rollout_failure"))
            figures[f"ray_over_pool_{name}"] = round(figures[f"ray_{name}_s"] / figures[f"pool_{name}_s"], 3)


def main() -> None:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--env", default="synthetic", help="environment spec")
    ap.add_argument("--model", default="scripted:weak", help="model spec")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--rollouts", type=int, default=8, help="rollouts per configuration")
    ap.add_argument("--batch", type=int, default=1, help="rollouts of one commit per sandboxed worker "
                    "(a run uses sandbox.batch_size, 8)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--docker", action="store_true", help="add Docker rows: a fresh container per rollout "
                    "(cold) and warm pooled containers (needs dockerd and ops/sandbox/build-image.sh)")
    ap.add_argument("--ray", action="store_true", help="add Ray rows: a local Ray with this machine's CPUs, one "
                    "task per rollout and per batch of 4, against a local bwrap pool of as many workers")
    ap.add_argument("--fork-floor", action="store_true", help="only measure what a fork per rollout costs in this "
                    "process, without sandbox or gateway (see above)")
    ap.add_argument("--breakdown", action="store_true", help="only measure where a warm rollout's CPU goes: host "
                    "threads, fork server, batch children, and the socket's own floor per model call (see above)")
    ap.add_argument("--warm-fork", choices=WARM_FORKS, default="batch", help="with --breakdown: what the warm "
                    "worker forks a child for (sandbox.warm_fork; default batch)")
    add_repeat(ap)
    args = ap.parse_args()
    check_repeat(ap, args.repeat)
    if args.rollouts < 1 or args.batch < 1:
        ap.error("--rollouts and --batch must be at least 1")
    if args.fork_floor:
        _fork_floor(args)
        return
    if args.breakdown:
        from evoharness.model_specs import is_offline

        if args.batch < 2:
            ap.error("--breakdown measures a warm worker's batch children: --batch 2 or more (with 1 every rollout "
                     "gets a fresh sandbox)")
        if not is_offline(args.model):
            ap.error("--breakdown needs an offline model (scripted: or standin:) served host-side behind the gateway")
        _breakdown(args)
        return

    from evoharness.harness_repo.init import init_harness

    with tempfile.TemporaryDirectory() as d:
        harness = Path(d) / "harness"
        init_harness(harness)
        reqs = _requests(args.env, args.rollouts, args.split)
        n = len(reqs)
        figures: dict[str, float | int | str] = {"rollouts": n, "env": args.env, "model": args.model,
                                                  "cpus": os.cpu_count() or 0}
        failures = {}
        per: dict[str, list[float]] = {name: [] for name in ROWS}
        cpu: dict[str, list[float]] = {name: [] for name in ROWS}
        faults: dict[str, list[float]] = {"bwrap-warm+start": [], "bwrap-warm": [], "bwrap-warm/batch": [],
                                          "bwrap-warm/rollout": []}
        round_trips: list[float] = []  # model calls per rollout through the gateway (bwrap-warm)
        configs = {"inprocess": (None, {}), "inprocess-prepared": (None, {"prepared": True}),
                   "process": (ProcessSandbox(), {}),
                   "bwrap-batch": (BwrapSandbox(), {"warm": False}),
                   "bwrap-warm+start": (BwrapSandbox(), {"restart": True}), "bwrap-warm": (BwrapSandbox(), {}),
                   "bwrap-warm/batch": (BwrapSandbox(), {"warm_fork": "batch"}),
                   "bwrap-warm/rollout": (BwrapSandbox(), {"warm_fork": "rollout"})}
        for _ in range(args.repeat):  # the configurations in turn, so load changes hit them all
            for name, (box, kw) in configs.items():
                elapsed, failures[name], seconds, flt, calls = _timed(harness, args, box, 1, reqs, **kw)
                if name == "bwrap-warm":
                    round_trips.append(calls / n)
                per[name].append(elapsed / n)
                cpu[name].append(seconds / n)
                if name.startswith("bwrap-warm"):
                    faults[name].append(flt / n)
        for name, xs in per.items():
            figures[f"{name}_s_per_rollout"] = round(statistics.median(xs), 4)
        for name in CPU_ROWS:
            figures[f"{name}_cpu_s_per_rollout"] = round(statistics.median(cpu[name]), 4)
        for name, xs in faults.items():
            figures[f"{name}_child_faults_per_rollout"] = round(statistics.median(xs))
        figures["gateway_round_trips_per_rollout"] = round(statistics.median(round_trips), 2)
        spreads = {}
        for name in BWRAP_ROWS:
            for base in ("process", "inprocess"):
                ratios = [b / p for b, p in zip(per[name], per[base], strict=True)]
                figures[f"{name}_over_{base}"] = round(statistics.median(ratios), 3)
                spreads[f"{name}_over_{base}"] = spread(ratios, ".2f", "x")
            if name in CPU_ROWS:
                ratios = [b / p for b, p in zip(cpu[name], cpu["inprocess"], strict=True)]
                figures[f"{name}_cpu_over_inprocess"] = round(statistics.median(ratios), 3)
                spreads[f"{name}_cpu_over_inprocess"] = spread(ratios, ".2f", "x")
        for name, _ in PREPARED_RATIOS:  # against the in-process default: its template prepared once per text
            ratios = [b / p for b, p in zip(cpu[name], cpu["inprocess-prepared"], strict=True)]
            figures[f"{name}_cpu_over_inprocess-prepared"] = round(statistics.median(ratios), 3)
            spreads[f"{name}_cpu_over_inprocess-prepared"] = spread(ratios, ".2f", "x")
        figures["bwrap_s_per_rollout"] = figures["bwrap-warm+start_s_per_rollout"]
        figures["bwrap_overhead_ms"] = round(
            1000 * (figures["bwrap_s_per_rollout"] - figures["process_s_per_rollout"]), 1)
        figures["bare_process_ms"] = round(1000 * _bare(ProcessSandbox()), 2)
        figures["bare_bwrap_ms"] = round(1000 * _bare(BwrapSandbox(python_runtime=True)), 2)
        ones, twos = [], []
        for _ in range(args.repeat):
            one, _, _, _, _ = _timed(harness, args, BwrapSandbox(), 1, reqs)
            two, failures["bwrap_2"], _, _, _ = _timed(harness, args, BwrapSandbox(), 2, reqs)
            ones.append(one)
            twos.append(two)
        figures["bwrap_1_worker_s"] = round(statistics.median(ones), 3)
        figures["bwrap_2_workers_s"] = round(statistics.median(twos), 3)
        speedups = [o / t for o, t in zip(ones, twos, strict=True)]
        figures["speedup_2_over_1"] = round(statistics.median(speedups), 3)
        spreads["speedup_2_over_1"] = spread(speedups, ".2f", "x")
        if args.docker:
            _docker_rows(harness, args, reqs, figures, failures)
        if args.ray:
            _ray_rows(harness, args, reqs, figures, failures)
        figures["sandbox_failures"] = sum(failures.values())

    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{n} rollouts of {args.model} on {args.env}, batch {args.batch}, medians of {args.repeat} repeats "
          f"({load_note()})")
    for name in ROWS:
        cpu_ms = f"{figures[f'{name}_cpu_s_per_rollout'] * 1000:6.1f} ms CPU" if name in CPU_ROWS else "(CPU not seen)"
        print(f"  {name:<18} {figures[f'{name}_s_per_rollout'] * 1000:8.1f} ms / rollout wall, {cpu_ms}")
    print("  against in-process (the inprocess row: its template compiled every rollout, prepare=False):")
    for name in BWRAP_ROWS:
        print(f"  {name + ' / plain process':<34}: {spreads[f'{name}_over_process']}")
        print(f"  {name + ' / in-process':<34}: {spreads[f'{name}_over_inprocess']}")
        if name in CPU_ROWS:
            print(f"  {name + ' / in-process, CPU':<34}: {spreads[f'{name}_cpu_over_inprocess']}")
    print("  against in-process as it runs by default (the inprocess-prepared row: template, policies and modules "
          "prepared once per text, as a fork server does), CPU:")
    for name, what in PREPARED_RATIOS:
        print(f"  {name + ' / in-process prepared':<40}: {spreads[f'{name}_cpu_over_inprocess-prepared']} ({what})")
    print(f"  warm children: minor page faults per rollout {figures['bwrap-warm_child_faults_per_rollout']} (a child "
          f"per commit), {figures['bwrap-warm/batch_child_faults_per_rollout']} (a child per batch), "
          f"{figures['bwrap-warm/rollout_child_faults_per_rollout']} (a child per rollout)")
    print(f"  model calls per rollout : {figures['gateway_round_trips_per_rollout']:.2f} HTTP round trips over the "
          "gateway's Unix socket (bwrap-warm; in-process: direct calls)")
    print(f"  bwrap-warm+start - plain process  : {figures['bwrap_overhead_ms']:+.1f} ms per rollout")
    print(f"  start-up of `true`    : {figures['bare_process_ms']:.1f} ms plain, "
          f"{figures['bare_bwrap_ms']:.1f} ms bwrap")
    print(f"  2 workers vs 1 (bwrap): {figures['bwrap_1_worker_s']:.2f}s -> {figures['bwrap_2_workers_s']:.2f}s, "
          f"speed-up {spreads['speedup_2_over_1']}")
    if args.docker:
        for name in ("docker_cold", "docker_pool"):
            print(f"  {name:<11}{figures[f'{name}_s_per_rollout'] * 1000:8.1f} ms / rollout "
                  f"({figures[f'{name}_over_bwrap']:.2f}x bwrap)")
        print(f"  start-up of `true`    : {figures['bare_docker_cold_ms']:.1f} ms docker cold, "
              f"{figures['bare_docker_pool_ms']:.1f} ms docker pooled")
    if args.ray:
        print(f"  local Ray start-up    : {figures['ray_start_s']:.1f}s")
        for name in ("batch1", "batch4"):
            print(f"  Ray vs {figures['cpus']}-worker pool ({name}): {figures[f'pool_{name}_s']:.2f}s -> "
                  f"{figures[f'ray_{name}_s']:.2f}s ({figures[f'ray_over_pool_{name}']:.2f}x)")
    if figures["sandbox_failures"]:
        print(f"  note: {figures['sandbox_failures']} rollouts failed in the sandbox (see their meta)")


if __name__ == "__main__":
    same_checkout(__file__)
    main()
