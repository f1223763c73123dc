"""The warm worker: ``python -m evoharness.agent.worker --serve WARM.json``, a fork server in a sandbox.

The host (``sandbox/warm.py``) starts one per sandbox slot and harness commit. It imports what a rollout
needs once (the agent, the environment of ``WARM.json``'s ``env_spec``, the model client), says
``{"ready": ...}`` on its protocol channel (its stdout), then reads one request per line on stdin::

    {"n": 3, "dir": "/scratch/3", "wall": 300.0, "cpu": 120}

and forks one child per request. Before each fork it compiles the prompt template and parses the
``policies.yaml`` of the tree the sandbox shows at ``WARM.json``'s ``harness_dir`` -- once per text,
bounded in size and time, running no harness code (``agent.harness.prepare``) -- so the child finds them
made instead of doing two thirds of a synthetic rollout's work again. The child gets its own session,
``dir`` as its working directory, stdin from /dev/null, stdout and stderr to ``dir/stdout`` and
``dir/stderr``, and runs the one-rollout worker (``worker.main([dir/request.json, dir/out.json])``) with
RLIMIT_CPU set to ``cpu`` seconds
(the server's own limit is higher: it lives for many rollouts); the server waits for it (killing its
process group at ``wall`` seconds), then removes everything the rollout left inside the sandbox --
every other process, the contents of /tmp and /dev/shm, System V IPC objects -- and answers one line::

    {"n": 3, "returncode": 0, "timed_out": false, "clean": true, "cost": {"child_cpu_s": 0.012, ...}}

(``cost``: the child's CPU seconds and minor page faults -- copy-on-write copies of the server's pages,
mostly -- the children forked for the request, and the server's own CPU for the request: fork, wait, sweep;
the ready line carries the CPU its start-up took, ``start_cpu_s``).

**One child per batch.** A request may carry ``"batch": ID`` (and ``"last": true`` on the batch's last
rollout): the rollouts of one batch -- one harness commit's, sent in turn by one host thread -- then run one
after another in one forked child (``BatchChild``), which saves a fork, its copy-on-write faults and an
exit per rollout (~10 ms of CPU against a rollout's few ms on a fast environment). Each rollout still gets
its own directory, stdout/stderr, output and seal, its own RLIMIT_CPU (the child's usage so far plus
``cpu``; the hard limit covers ``CHILD_ROLLOUTS`` rollouts), ``random`` seeded for it (``worker._run``), a fresh
state of the environment (``reset``), and the harness's own modules imported afresh (removed from ``sys.modules``
after each rollout); the server kills the child at the rollout's ``wall``. After each rollout the child
compares its process with what it held before the first (``_Baseline``) and the server checks that nothing
of the rollout runs or stays in /tmp, /dev/shm or System V IPC (``child_clean``); if anything differs, the
rollout failed or crashed the child, or the batch ended, the child is ended, the sandbox swept as above, and
the next rollout gets a fresh child. What the checks cannot see -- a change made inside an object of a module
they do not check, such as a function of it replaced, which the child may call again after the rollout (and
harness code running then could also write the protocol pipe) -- reaches only the later rollouts of the same
batch, which are the same commit's: never another commit's, nor a later batch's (docs/sandbox.md, "One child
per batch").
A request without ``batch`` gets a child of its own, as above (``sandbox.warm_fork = "rollout"``). With
``sandbox.warm_fork = "commit"`` (opt-in; the default is ``"batch"``) the host sends every rollout of one commit
with the same ``batch`` key (``commit:<sha>``) and never ``last``: the child then stays across that commit's
batches, until a rollout with another key comes (another commit: the child is ended and the sandbox swept before the
next child is forked), it has run ``CHILD_ROLLOUTS``, or a rollout ends it as above; what the checks cannot see then
reaches later rollouts of the same commit on this worker, never another commit's (docs/sandbox.md, "One child per
commit").

Why this keeps rollouts apart: harness code only ever runs in a child, which exits (after its rollout, or
after its batch), so no Python state (modules, globals, caches, monkey-patches) of one batch reaches the
next; what a child can leave
outside its process is swept before the next request is read, and a sweep that cannot finish answers
``"clean": false`` and ends the server (the host then starts a fresh sandbox). The server is
non-dumpable, so a child (same uid) can neither ptrace it nor read its memory or file descriptors;
a child that kills the server fails only its own rollout. The sandbox's limits still apply to each
child: rlimits are per process (a child's CPU time starts at zero), the cgroup is the sandbox's.

The server refuses to start outside a private PID namespace (``kill(-1)`` there would reach the host).
"""

from __future__ import annotations

import _signal
import atexit
import ctypes
import gc
import json
import operator
import os
import resource
import select
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

SWEPT_DIRS = ("/tmp", "/dev/shm")
_KEEP: set[str] = set()  # what those held before the first rollout (``snapshot``)
_SNAPSHOT: _Spaces | None = None  # the fork server's snapshot of what a batch child checks (``server_snapshot``)
_IPC_RMID = 0


def serve(warm_path: str) -> int:
    """The server loop; exit 0 at end of input, 2 when it cannot run here, 3 after an unclean sweep."""
    proto = os.dup(1)  # the protocol channel; stray prints of the server itself go to stderr
    os.dup2(2, 1)
    os.chdir("/")
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and not p.startswith("/scratch")]
    if not _private_pid_namespace():
        print("worker: --serve needs a private PID namespace (bwrap --unshare-pid)", file=sys.stderr)
        return 2
    _not_dumpable()
    snapshot()
    warm = _warm(warm_path)
    harness_dir = _spec(warm_path).get("harness_dir")
    global _SNAPSHOT
    sys.argv = sys.argv[:1]  # the list a batch child keeps as its own (``_batch_child``): no change to ``sys`` there
    _SNAPSHOT = server_snapshot()  # before the freeze: what it holds is never collected in a child either
    gc.freeze()  # what the server holds is never collected in a child: fewer copy-on-write page faults per fork
    ru = resource.getrusage(resource.RUSAGE_SELF)
    _say(proto, {"ready": True, "pid": os.getpid(), "warm": warm, "start_cpu_s": round(ru.ru_utime + ru.ru_stime, 6)})
    lines = os.fdopen(0, "rb", buffering=0)
    buf = b""
    child: BatchChild | None = None  # the live child of the current batch, between its rollouts
    while True:
        while b"\n" not in buf:
            chunk = lines.read(65536)
            if not chunk:
                if child is not None:
                    child.end()
                return 0
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        try:
            req = json.loads(line)
            n, workdir, wall, cpu = int(req["n"]), str(req["dir"]), float(req["wall"]), int(req["cpu"])
        except (ValueError, KeyError, TypeError) as e:
            print(f"worker: bad serve request: {e}", file=sys.stderr)
            if child is not None:
                child.end()
            return 2
        batch = req.get("batch") if isinstance(req.get("batch"), str) else None
        before = resource.getrusage(resource.RUSAGE_SELF)
        extra_cpu = extra_flt = 0.0  # what a batch child ended here used beyond what it reported
        if child is not None and (batch is None or batch != child.batch):  # a batch the host left unfinished
            extra_cpu, extra_flt = child.end()
            child = None
            if not sweep():
                _say(proto, {"n": n, "returncode": 1, "timed_out": False, "clean": False, "cost": {}})
                return 3
        if isinstance(harness_dir, str) and child is None:
            _prepare(harness_dir)
        forks = 0
        if batch is None:
            rc, timed_out, usage = _run_child(workdir, wall, cpu)
            cost = {"child_cpu_s": usage.ru_utime + usage.ru_stime, "child_minflt": usage.ru_minflt}
            clean, forks = sweep(), 1
        else:
            if child is None:
                child, forks = BatchChild(batch, cpu), 1
            rc, timed_out, cost, keep = child.run(n, workdir, wall, cpu, last=bool(req.get("last")))
            if not keep:
                cost = _plus(cost, child.end())
                child = None
            clean = sweep() if child is None else child_clean(child.pid)
            if not clean and child is not None:  # something of the rollout stayed: end the child, sweep fully
                cost = _plus(cost, child.end())
                child = None
                clean = sweep()
        after = resource.getrusage(resource.RUSAGE_SELF)
        _say(proto, {"n": n, "returncode": rc, "timed_out": timed_out, "clean": clean, "cost": {
            "child_cpu_s": round(cost.get("child_cpu_s", 0.0) + extra_cpu, 6),
            "child_minflt": int(cost.get("child_minflt", 0) + extra_flt), "child_forks": forks,
            "changed": cost.get("changed", []),
            "server_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 6)}})
        if not clean:
            return 3


def _plus(cost: dict, ended: tuple[float, float]) -> dict:
    return cost | {"child_cpu_s": cost.get("child_cpu_s", 0.0) + ended[0],
                   "child_minflt": cost.get("child_minflt", 0) + ended[1]}


PREPARE_S = 2.0  # at most this long compiling a tree's template and parsing its policies (else left to the rollout)


def _prepare(harness_dir: str) -> None:
    """Compile the template and parse the policies of the tree ``harness_dir`` shows now, once per text
    (``agent.harness.prepare``; the host may have switched the tree since the last rollout), and compile its
    middleware and tool modules' source (``prepare_code``: each rollout still runs them afresh), so each forked
    rollout finds them made. Bounded in time: what takes longer is left to the rollout."""
    from evoharness.agent.harness import prepare, prepare_code

    def too_long(_sig: int, _frame: object) -> None:
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, PREPARE_S)
    try:
        added = prepare(harness_dir)
        added = prepare_code(harness_dir) or added
    except TimeoutError:
        added = False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if added:
        gc.freeze()  # as at start: the new entries are never collected in a child


def _say(fd: int, obj: dict) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _private_pid_namespace() -> bool:
    """True when this process sees only itself and the namespace's init (a fresh bwrap PID namespace)."""
    pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return 1 in pids and pids <= {1, os.getpid(), os.getppid()}


def _not_dumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_dumpable = 4
    if libc.prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _spec(warm_path: str) -> dict:
    try:
        spec = json.loads(Path(warm_path).read_text())
    except (OSError, ValueError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _warm(warm_path: str) -> list[str]:
    """Import (once, here) what every rollout needs; what failed is left to the rollouts to report."""
    done: list[str] = []
    spec = _spec(warm_path)
    if not spec:
        return done
    try:
        import jinja2.sandbox  # noqa: F401 -- the harness's prompt templates

        from evoharness.agent import runner, worker  # noqa: F401 -- the agent loop, harness loader, trace models
        from evoharness.sandbox import scoring  # noqa: F401

        _warm_caches()
        done.append("agent")
        if spec.get("env_spec"):
            from evoharness.envs import get_environment

            get_environment(spec["env_spec"])
            done.append("env")
        if spec.get("gateway"):  # the gateway client: its own HTTP for offline models, else langchain-openai
            import socket  # noqa: F401

            from evoharness.agent import models  # noqa: F401
            from evoharness.model_specs import is_offline

            if not is_offline(spec.get("model_spec", "")):
                import http.client  # noqa: F401

                import langchain_openai  # noqa: F401
        elif spec.get("model_spec"):
            from evoharness.model_specs import agent_model

            agent_model(spec["model_spec"], 0)
        done.append("model")
    except Exception as e:  # noqa: BLE001 -- a rollout meets the same error and reports it as its failure
        print(f"worker: warm-up stopped: {type(e).__name__}: {e}", file=sys.stderr)
    return done


def _warm_caches() -> None:
    """Fill the caches every rollout would otherwise fill in its own child, with the package's code only
    (no harness code runs here): the template sandbox's lexer, the YAML loader."""
    import yaml

    from evoharness.untrusted import template_environment

    template_environment().from_string("{{ task }}{% for t in tools %}{{ t.name }}{% endfor %}").render(
        task="", tools=[{"name": ""}])
    yaml.safe_load("a: [1, 'b', {c: true}]\n")


def _fork(body: Callable[[], int]) -> int:
    """Fork; the child runs ``body`` and exits with its status (1, the traceback on its stderr, if it raised),
    never returning; the parent gets the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 1
        try:
            rc = body()
        except BaseException:  # noqa: BLE001 -- reported on the child's stderr, exit 1
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc)
    return pid


def _kill_group(pid: int) -> None:
    """SIGKILL a child's process group, else the child (it may not have made its group yet); gone is fine."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _run_child(workdir: str, wall: float, cpu: int) -> tuple[int, bool, resource.struct_rusage]:
    """Fork, run one rollout in the child, wait (kill at ``wall``); (exit status as Popen gives it, timed out,
    the child's resource use)."""
    pid = _fork(lambda: _child(workdir, cpu))
    timed_out = not _wait(pid, wall)
    if timed_out:
        _kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), timed_out, usage


CHILD_ROLLOUTS = 64  # rollouts one batch child runs at most (its hard CPU limit is sized for them)
HARNESS_MODULE_PREFIXES = ("_evoharness_middleware_", "_evoharness_tools_")  # ``agent.harness._load_module``


class BatchChild:
    """A forked child running the rollouts of one batch -- rollouts of one harness commit, in the order the host
    sends them -- one after another in one process (the server's side; the child's is ``_batch_child``).

    The server hands it each rollout's directory over a pipe; the child runs the rollout as a forked child
    would (``worker.main``), with the rollout's own working directory, stdout/stderr files, CPU limit and
    ``random`` seeded for the rollout (``worker._run``), removes the harness's modules, checks that the rollout
    left nothing in the process (``_Baseline``) and answers one line. The server kills it at the rollout's wall
    limit; a rollout that crashed it, timed out, answered out of protocol, failed or left something behind ends
    it, and the next rollout gets a fresh child (``run``'s ``keep``)."""

    def __init__(self, batch: str, cpu: int) -> None:
        self.batch, self.rollouts = batch, 0
        self.reported = [0.0, 0.0]  # CPU seconds and minor faults the child reported for its rollouts
        self.ended: tuple[float, float] | None = None
        down_r, down_w = os.pipe()  # server -> child: one rollout per line
        up_r, up_w = os.pipe()  # child -> server: one answer per rollout

        def child() -> int:
            os.close(down_w)
            os.close(up_r)
            return _batch_child(down_r, up_w, cpu)

        pid = _fork(child)
        os.close(down_r)
        os.close(up_w)
        self.pid, self.down, self.up, self._buf = pid, down_w, up_r, b""
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self.pidfd = None

    def run(self, n: int, workdir: str, wall: float, cpu: int, *, last: bool) -> tuple[int, bool, dict, bool]:
        """Run one rollout in the child: (exit status as Popen gives it, timed out, its cost, keep the child)."""
        line: bytes | None = b""
        try:
            _write_all(self.down, (json.dumps({"n": n, "dir": workdir, "cpu": cpu}) + "\n").encode())
        except OSError:  # the child is gone
            line = b""
        else:
            line = self._line(wall)
        if line is None:  # past the rollout's wall limit
            self._kill()
            rc, cost = self._reap()
            return rc, True, cost, False
        msg = _answer_of(line, n)
        if msg is None:  # exited (crashed, killed, over its CPU limit) or answered out of protocol
            if line:  # out of protocol: ended, and the rollout fails (exit 1)
                self._kill()
            rc, cost = self._reap()
            return (1 if line else rc), False, cost, False
        self.rollouts += 1
        cost = {"child_cpu_s": msg["cpu"], "child_minflt": msg["minflt"], "changed": msg["changed"]}
        self.reported[0] += msg["cpu"]
        self.reported[1] += msg["minflt"]
        keep = msg["rc"] == 0 and not msg["dirty"] and not last and self.rollouts < CHILD_ROLLOUTS
        return msg["rc"], False, cost, keep

    def end(self) -> tuple[float, float]:
        """Stop the child (end of its batch); what it used beyond its reports (CPU seconds, minor faults)."""
        if self.ended is None:
            os.close(self.down)  # the child's read ends: it exits
            if not self._exited(2.0):
                self._kill()
            self._reap()
        return self.ended or (0.0, 0.0)

    def _line(self, wall: float) -> bytes | None:
        """The child's next line; b"" when it exited first, None past ``wall`` seconds."""
        end = time.monotonic() + wall
        watch = [self.up] + ([self.pidfd] if self.pidfd is not None else [])
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready = select.select(watch, [], [], left if self.pidfd is not None else min(left, 0.05))[0]
            if self.up in ready:
                chunk = os.read(self.up, 65536)
                if not chunk:
                    return b""
                self._buf += chunk
                if len(self._buf) > 65536:
                    return b"?"  # out of protocol
            elif self._exited(0):
                return b""
        line, self._buf = self._buf.split(b"\n", 1)
        return line or b"?"

    def _exited(self, timeout: float) -> bool:
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], timeout)[0])
        end = time.monotonic() + timeout
        while True:
            if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.002)

    def _kill(self) -> None:
        _kill_group(self.pid)

    def _reap(self) -> tuple[int, dict]:
        """Wait for the child; (its exit status, what it used beyond its reports)."""
        _, status, usage = os.wait4(self.pid, 0)
        self.ended = (max(0.0, usage.ru_utime + usage.ru_stime - self.reported[0]),
                      max(0.0, usage.ru_minflt - self.reported[1]))
        for fd in (self.up, self.pidfd) + (() if _closed(self.down) else (self.down,)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        return os.waitstatus_to_exitcode(status), {"child_cpu_s": self.ended[0], "child_minflt": self.ended[1]}


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _answer_of(line: bytes, n: int) -> dict | None:
    """A batch child's answer for rollout ``n``, its fields checked; None for anything else."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("n") != n or not isinstance(msg.get("rc"), int):
        return None

    def num(v: object) -> float:
        return float(v) if isinstance(v, int | float) and v >= 0 else 0.0

    changed = msg.get("changed")
    return {"rc": msg["rc"], "dirty": msg.get("dirty") is not False, "cpu": num(msg.get("cpu")),
            "minflt": num(msg.get("minflt")),
            "changed": [str(c)[:40] for c in changed[:20]] if isinstance(changed, list) else []}


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _batch_child(down: int, up: int, cpu: int) -> int:
    """The batch child's loop (see ``BatchChild``): one rollout per line read from ``down``, one answer per
    rollout written to ``up``; exits 0 when ``down`` closes."""
    import math

    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    total = CHILD_ROLLOUTS * (cpu + 1) + 2  # every rollout may use its own limit; each is held to it (soft)
    hard = total if hard == resource.RLIM_INFINITY else min(hard, total)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, hard), hard))
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    low, high = sorted((down, up))
    os.closerange(3, low)  # the server's protocol channel and anything else it holds
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
    atexit._clear()
    from evoharness.agent.worker import main

    reader = os.fdopen(down, "rb", buffering=0)
    argv = sys.argv if len(sys.argv) == 1 else [sys.argv[0]]  # the server's, left as its snapshot saw it
    sys.argv = argv
    base = _Baseline(_SNAPSHOT)
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = reader.read(65536)
            if not chunk:
                return 0
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        req = json.loads(line)
        n, workdir, limit = int(req["n"]), str(req["dir"]), int(req["cpu"])
        before = resource.getrusage(resource.RUSAGE_SELF)
        # this rollout's CPU limit: what the child used so far plus the rollout's own
        soft = min(hard, math.ceil(before.ru_utime + before.ru_stime) + limit)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        os.chdir(workdir)
        out = os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        sys.argv = [sys.argv[0], f"{workdir}/request.json", f"{workdir}/out.json"]
        rc = 1
        try:
            rc = main(sys.argv[1:])
        except BaseException:  # noqa: BLE001 -- as a forked child: the traceback on its stderr, exit 1
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        # one pass over the module names: the harness's modules the rollout loaded go (the names new since the
        # baseline, a set difference that reads no other name's string), the rest is what the check compares
        loaded = frozenset(sys.modules)
        harness = [m for m in loaded - base.modules if m.startswith(HARNESS_MODULE_PREFIXES)]
        for name in harness:
            sys.modules.pop(name, None)
        sys.argv = argv  # the list the baseline holds (one it changed in place is seen below)
        changed = base.changed(loaded.difference(harness))
        after = resource.getrusage(resource.RUSAGE_SELF)
        used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if after.ru_utime + after.ru_stime > soft:  # harness code raised its soft limit (the hard one covers the
            rc = -signal.SIGXCPU  # batch), or caught SIGXCPU: over its CPU limit all the same, as a forked child
        answer = {"n": n, "rc": rc, "dirty": rc != 0 or bool(changed), "changed": changed, "cpu": round(used, 6),
                  "minflt": after.ru_minflt - before.ru_minflt}
        _write_all(up, (json.dumps(answer) + "\n").encode())


class _Baseline:
    """What a batch child's process holds before its first rollout, for the check after each rollout: a rollout
    that left anything different (a module imported, a thread, an open file, an atexit handler, an environment
    variable, a signal handler, a trace or profile function, an attribute of ``builtins``, ``sys``, ``os``,
    ``json``, ``random``, ``threading``, ... or of any ``evoharness`` module or class set, replaced or removed)
    ends the child, and the next rollout runs in a fresh one. Not checked: changes inside other objects (a
    third-party or other standard module's attributes, the contents of a package object's dict or list).
    Attributes are compared by identity (``operator.is_``, against the objects themselves, held since the baseline),
    so an object whose ``__eq__`` lies cannot hide a change, nor a replacement that got a freed object's id; a
    namespace whose dict version tag has not moved is not read at all (``_Spaces``).

    ``spaces``: the snapshot of the namespaces the fork server took before forking (``server_snapshot``); the
    child takes it over, re-reading only the modules whose namespaces changed since (``threading``'s, which
    ``fork`` resets), when it holds the same modules; else it snapshots every namespace itself."""

    CHECKED = ("builtins", "sys", "os", "json", "random", "threading", "atexit", "signal", "gc", "io")
    NAMES = ("modules", "attributes", "sys.path", "sys.meta_path", "sys.path_hooks", "trace function",
             "profile function", "environment", "signal handlers", "threads", "tasks", "atexit handlers", "gc",
             "gc thresholds", "open files", "sys.argv")

    def __init__(self, spaces: _Spaces | None = None) -> None:
        if spaces is None or spaces.module_names != frozenset(sys.modules):
            spaces = _Spaces()
        else:
            spaces.refresh()
        self.spaces = spaces
        self.signals = [int(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]
        self.state = self._state()

    @property
    def modules(self) -> frozenset[str]:
        """The names in ``sys.modules`` at the baseline."""
        return self.state[0]

    def changed(self, modules: frozenset[str] | None = None) -> list[str]:
        """What differs from the baseline now (empty: nothing). ``modules``: the names in ``sys.modules`` now, when
        the caller has just taken them (the batch child does, to remove the harness's modules), so that the check
        does not walk every module name again: each walk reads ~400 strings, cold after a rollout."""
        out = []
        for name, a, b in zip(self.NAMES, self.state, self._state(modules), strict=True):
            if a != b:
                where = sorted(b - a) + sorted(a - b) if name == "modules" else []
                out.append(f"{name} ({where[0]})" if where else name)
        if not self.spaces.unchanged():
            where = self.spaces.differ()
            out.insert(1 if out[:1] and out[0].startswith("modules") else 0,
                       f"attributes ({where[0]})" if where else "attributes")
        return out

    def _state(self, modules: frozenset[str] | None = None) -> tuple:
        import threading

        return (frozenset(sys.modules) if modules is None else modules, None, tuple(sys.path),
                tuple(map(id, sys.meta_path)), tuple(map(id, sys.path_hooks)), id(sys.gettrace()),
                id(sys.getprofile()), dict(os.environ._data),
                tuple(map(id, map(_getsignal, self.signals))), threading.active_count(),
                len(os.listdir("/proc/self/task")), atexit._ncallbacks(), gc.isenabled(), gc.get_threshold(),
                sorted(os.listdir("/proc/self/fd")), tuple(sys.argv))


def server_snapshot() -> _Spaces:
    """The fork server's snapshot of the namespaces its batch children check, taken once before it forks any:
    a child takes it over (``_Baseline``) instead of reading every object of every checked namespace itself --
    which, in a forked child, copies the page of each object whose reference count the reading writes."""
    return _Spaces()


def _getsignal(signum: int) -> object:
    """``signal.getsignal`` without its conversion of the handler to an enum (the same handler otherwise)."""
    return _signal.getsignal(signum)


def _dict_of(cls: type) -> dict:
    """The dict behind a class's ``__dict__`` (a read-only proxy of it), so that a check reads it at C speed."""
    proxy = vars(cls)
    inner = gc.get_referents(proxy)
    return inner[0] if len(inner) == 1 and type(inner[0]) is dict else proxy


def _version_tag_offset() -> int | None:
    """Where a dict's version tag lies in this interpreter's dict objects (PEP 509: CPython gives a dict a new,
    globally unique tag whenever an entry is added, removed or set to another object), when it can be read there
    and behaves so on scratch dicts; None otherwise (the check then compares every entry each time)."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 11), (3, 12)) \
            or hasattr(sys, "gettotalrefcount"):  # a debug build lays objects out otherwise
        return None
    offset = 3 * ctypes.sizeof(ctypes.c_ssize_t)  # after ob_refcnt, ob_type and ma_used

    def tag(d: dict) -> int:
        return ctypes.c_uint64.from_address(id(d) + offset).value

    probe, other = {"a": 1}, {"a": 1}
    first = tag(probe)
    probe["a"] = probe["a"]  # the same object: nothing changed, the same tag
    same = tag(probe)
    probe["a"] = object()
    replaced = tag(probe)
    del probe["a"]
    removed = tag(probe)
    ok = first != 0 and first == same and len({first, replaced, removed, tag(other)}) == 4
    return offset if ok else None


_TAG_OFFSET = _version_tag_offset()


class _Space:
    """One checked namespace at the snapshot: its keys and values held (not their ids: an object freed since
    cannot lend its id to a replacement) and a reader of its dict's version tag (None: no tag to read)."""

    __slots__ = ("name", "module", "space", "keys", "values", "reader")

    def __init__(self, name: str, module: str, space: dict) -> None:
        self.name, self.module, self.space = name, module, space
        self.keys, self.values = list(space), list(space.values())
        self.reader = ctypes.c_uint64.from_address(id(space) + _TAG_OFFSET) \
            if _TAG_OFFSET is not None and type(space) is dict else None

    def same(self) -> bool:
        """The namespace holds the same key and value objects, in the same order (compared by identity)."""
        space = self.space
        return (len(space) == len(self.keys) and all(map(operator.is_, space, self.keys))
                and all(map(operator.is_, space.values(), self.values)))


class _Spaces:
    """The namespaces a batch child checks (``CHECKED`` modules, every ``evoharness`` module and the classes each
    defines: a class's dict behind its proxy) at one moment. ``unchanged()``: each still holds the same key and
    value objects (``operator.is_``: an object whose ``__eq__`` lies cannot hide a change) -- compared only for the
    namespaces whose version tag moved (a dict's tag moves with every entry added, removed or set to another
    object; one set back, or to the same object, is compared and found unchanged), so a check of unchanged
    namespaces reads none of their objects. Without readable tags every namespace is compared each time."""

    def __init__(self) -> None:
        self.module_names = frozenset(sys.modules)
        self.entries: list[_Space] = []
        for name, mod in list(sys.modules.items()):
            if mod is not None and (name in _Baseline.CHECKED or name.partition(".")[0] == "evoharness"):
                self._add(name, mod)
        self.tags = self._tags()

    def _add(self, name: str, mod: object) -> None:
        space = vars(mod)
        space.pop("__warningregistry__", None)  # as ``_moved`` does before each check: else its first check differs
        self.entries.append(_Space(name, name, space))
        for key, value in list(space.items()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                self.entries.append(_Space(f"{name}.{key}", name, _dict_of(value)))

    def _tags(self) -> list[int]:
        return [-1 if e.reader is None else e.reader.value for e in self.entries]  # -1: none, always compared

    def _moved(self) -> list[_Space]:
        """The namespaces that may have changed: whose tag moved, or that have none."""
        for e in self.entries:  # what the warnings module notes of warnings it showed goes
            if e.module == e.name:
                e.space.pop("__warningregistry__", None)
        tags = self._tags()
        if tags == self.tags and -1 not in tags:
            return []
        return [e for e, a, b in zip(self.entries, self.tags, tags, strict=True) if a != b or a == -1]

    def unchanged(self) -> bool:
        """Every namespace holds the same keys and values (the same objects) as at the snapshot. When so, the tags
        read now are the ones compared with next (a namespace set back to what it held is not read again)."""
        moved = self._moved()
        if not moved:
            return True
        if not all(e.same() for e in moved):
            return False
        self.tags = self._tags()
        return True

    def differ(self) -> list[str]:
        """The name of the first namespace that changed since the snapshot (empty: none)."""
        return [e.name for e in self._moved() if not e.same()][:1]

    def refresh(self) -> None:
        """Re-take the modules (each with its classes) whose namespaces changed since the snapshot: a forked child
        taking over its server's snapshot as its own baseline (``threading`` resets its globals at a fork)."""
        stale = {e.module for e in self._moved() if not e.same()}
        if stale:
            self.entries = [e for e in self.entries if e.module not in stale]
            for name in stale:
                if sys.modules.get(name) is not None:
                    self._add(name, sys.modules[name])
        self.tags = self._tags()


def child_clean(pid: int) -> bool:
    """Between two rollouts of a batch child ``pid``: nothing but the server, the child and init runs, /tmp and
    /dev/shm hold only what bwrap put there, no System V IPC object exists (``sweep``, checked only)."""
    if _others() - {pid}:
        return False
    for root in SWEPT_DIRS:
        for dirpath, dirnames, filenames in os.walk(root):
            if any(os.path.join(dirpath, name) not in _KEEP for name in dirnames + filenames):
                return False
    return not any(len(_ipc_rows(kind) or ()) > 1 for kind in ("shm", "sem", "msg"))


def _ipc_rows(kind: str) -> list[bytes] | None:
    """The lines of ``/proc/sysvipc/KIND`` (a header, then one per object), None when it cannot be read. Plain
    ``os`` calls: the server reads all three after every rollout (~7 us each here, ~20 through ``read_text``)."""
    try:
        fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.splitlines()


def _wait(pid: int, wall: float) -> bool:
    """True when ``pid`` exited within ``wall`` seconds (it stays a zombie for ``waitpid``)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # no pidfds (old kernel): poll
        end = time.monotonic() + wall
        while time.monotonic() < end:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(0.002)
        return False
    try:
        return bool(select.select([fd], [], [], wall)[0])
    finally:
        os.close(fd)


def _child(workdir: str, cpu: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    hard = cpu + 2 if hard == resource.RLIM_INFINITY else min(hard, cpu + 2)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, hard), hard))  # this child's CPU time starts at zero
    os.setsid()
    os.chdir(workdir)
    null = os.open("/dev/null", os.O_RDONLY)
    out = os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # the server's protocol channel and anything else it holds
    from evoharness.agent.worker import main

    # as the one-rollout worker process would be: its argv, and at the end no interpreter shutdown -- the
    # worker ends with os._exit right after its sealed output, so no thread or atexit handler the rollout
    # left runs after it (the caller's os._exit); the server's handlers are cleared all the same
    sys.argv = [sys.argv[0], f"{workdir}/request.json", f"{workdir}/out.json"]
    atexit._clear()
    return main(sys.argv[1:])


def sweep() -> bool:
    """Remove what a rollout can leave in the sandbox outside its process; False if something stayed."""
    return _kill_others() & _empty_dirs() & _remove_ipc()


def _kill_others() -> bool:
    for _ in range(500):
        try:
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except this one and init
        except (ProcessLookupError, PermissionError):
            pass
        while True:  # reap our own (only children are ours; orphans go to init)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if _others() == set():
            return True
        time.sleep(0.002)
    return False


def _others() -> set[int]:
    me, parent = os.getpid(), os.getppid()
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) not in (1, me, parent):
            out.add(int(p))
    return out


def snapshot() -> None:
    """Note what /tmp and /dev/shm hold before any rollout (the gateway socket's bind mount and its
    parents, which bwrap made): the sweep keeps those and removes everything else."""
    for root in SWEPT_DIRS:
        for dirpath, dirnames, filenames in os.walk(root):
            _KEEP.add(dirpath)
            _KEEP.update(os.path.join(dirpath, name) for name in dirnames + filenames)


def _empty_dirs() -> bool:
    ok = True
    for root in SWEPT_DIRS:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in filenames:
                path = os.path.join(dirpath, name)
                if path not in _KEEP:
                    try:
                        os.unlink(path)
                    except OSError:
                        ok = False
            for name in list(dirnames):
                path = os.path.join(dirpath, name)
                if path in _KEEP:
                    continue
                dirnames.remove(name)
                try:
                    if os.path.islink(path):
                        os.unlink(path)
                    else:
                        shutil.rmtree(path, onerror=_writable_and_retry)
                except OSError:
                    ok = False
    return ok


def _writable_and_retry(func, path: str, _exc: object) -> None:
    """rmtree's error hook: make the parent (and the dir itself) writable again, then retry once."""
    for p in (os.path.dirname(path), path):
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
        except OSError:
            pass
    func(path)


def _remove_ipc() -> bool:
    """Remove System V shared memory, semaphores and message queues (the IPC namespace is the sandbox's)."""
    libc = None
    ok = True
    for kind, ctl in (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl")):
        rows = _ipc_rows(kind)
        for row in (rows or [])[1:]:
            libc = libc or ctypes.CDLL(None, use_errno=True)
            ident = int(row.split()[1])
            args = (ident, 0, _IPC_RMID) if kind == "sem" else (ident, _IPC_RMID, None)
            if getattr(libc, ctl)(*args) != 0:
                ok = False
    return ok
