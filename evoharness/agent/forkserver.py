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
mostly -- and the server's own CPU for the request: fork, wait, sweep; the ready line carries the CPU
its start-up took, ``start_cpu_s``).

Why this keeps rollouts apart: harness code only ever runs in a child, which exits, so no Python state
(modules, globals, caches, monkey-patches) of one rollout reaches the next; what a child can leave
outside its process is swept before the next request is read, and a sweep that cannot finish answers
``"clean": false`` and ends the server (the host then starts a fresh sandbox). The server is
non-dumpable, so a child (same uid) can neither ptrace it nor read its memory or file descriptors;
a child that kills the server fails only its own rollout. The sandbox's limits still apply to each
child: rlimits are per process (a child's CPU time starts at zero), the cgroup is the sandbox's.

The server refuses to start outside a private PID namespace (``kill(-1)`` there would reach the host).
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import json
import os
import resource
import select
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

SWEPT_DIRS = ("/tmp", "/dev/shm")
_KEEP: set[str] = set()  # what those held before the first rollout (``snapshot``)
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
    gc.freeze()  # what the server holds is never collected in a child: fewer copy-on-write page faults per fork
    ru = resource.getrusage(resource.RUSAGE_SELF)
    _say(proto, {"ready": True, "pid": os.getpid(), "warm": warm, "start_cpu_s": round(ru.ru_utime + ru.ru_stime, 6)})
    lines = os.fdopen(0, "rb", buffering=0)
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = lines.read(65536)
            if not chunk:
                return 0
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        try:
            req = json.loads(line)
            n, workdir, wall, cpu = int(req["n"]), str(req["dir"]), float(req["wall"]), int(req["cpu"])
        except (ValueError, KeyError, TypeError) as e:
            print(f"worker: bad serve request: {e}", file=sys.stderr)
            return 2
        before = resource.getrusage(resource.RUSAGE_SELF)
        if isinstance(harness_dir, str):
            _prepare(harness_dir)
        rc, timed_out, child = _run_child(workdir, wall, cpu)
        clean = sweep()
        after = resource.getrusage(resource.RUSAGE_SELF)
        _say(proto, {"n": n, "returncode": rc, "timed_out": timed_out, "clean": clean, "cost": {
            "child_cpu_s": round(child.ru_utime + child.ru_stime, 6), "child_minflt": child.ru_minflt,
            "server_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 6)}})
        if not clean:
            return 3


PREPARE_S = 2.0  # at most this long compiling a tree's template and parsing its policies (else left to the rollout)


def _prepare(harness_dir: str) -> None:
    """Compile the template and parse the policies of the tree ``harness_dir`` shows now, once per text
    (``agent.harness.prepare``; the host may have switched the tree since the last rollout), so each
    forked rollout finds them made. Bounded in time: a template that takes longer is left to the rollout."""
    from evoharness.agent.harness import prepare

    def too_long(_sig: int, _frame: object) -> None:
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, PREPARE_S)
    try:
        added = prepare(harness_dir)
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
        if spec.get("gateway"):  # the gateway client: stdlib HTTP for offline models, else langchain-openai
            import http.client  # noqa: F401
            import socket  # noqa: F401

            from evoharness.agent import models  # noqa: F401
            from evoharness.model_specs import is_offline

            if not is_offline(spec.get("model_spec", "")):
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


def _run_child(workdir: str, wall: float, cpu: int) -> tuple[int, bool, resource.struct_rusage]:
    """Fork, run one rollout in the child, wait (kill at ``wall``); (exit status as Popen gives it, timed out,
    the child's resource use)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 1
        try:
            rc = _child(workdir, cpu)
        except BaseException:  # noqa: BLE001 -- reported on the child's stderr, exit 1
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc)
    timed_out = not _wait(pid, wall)
    if timed_out:
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), timed_out, usage


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
        try:
            rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            libc = libc or ctypes.CDLL(None, use_errno=True)
            ident = int(row.split()[1])
            args = (ident, 0, _IPC_RMID) if kind == "sem" else (ident, _IPC_RMID, None)
            if getattr(libc, ctl)(*args) != 0:
                ok = False
    return ok
