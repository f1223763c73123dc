"""Warm sandbox workers: one live sandbox per slot, forked children inside it, any harness commit.

Starting a sandboxed Python worker costs ~0.5 s (interpreter start and imports) against a few ms for a
rollout on a fast environment. A ``WarmWorker`` pays it once: it starts the fork server
(``python -m evoharness.agent.worker --serve``, ``agent/forkserver.py``) in a sandbox whose backend
can keep one running (``BwrapSandbox.start``), and runs each rollout in a forked child (one per commit it
serves, per batch or per rollout: ``sandbox.warm_fork``) with its own ``/scratch/<n>`` directory, under the same
limits, the child checked and the sandbox checked (or swept) between rollouts.

A ``WarmPool`` runs at most ``slots`` workers at once and keeps no more alive. A worker is not tied to a
harness commit: ``/harness`` is a read-only bind of a directory of the worker's own on the host, and
between rollouts (no process of the sandbox but its server alive: the sweep saw to that) the host
replaces what that directory holds with the tree of the next rollout's commit (``show``). So a round
that alternates between its baseline, its candidates and their per-hunk variants switches a worker's
tree -- a copy of a few files -- instead of starting a sandbox per commit and slot (46 starts, ~0.45 s
of CPU each, in a 3-round demo; now one per slot, plus one per ``MAX_ROLLOUTS_PER_WORKER``). A
request takes an idle worker showing its commit, else another idle worker, else free room. What a
rollout sees is what it saw before: its own commit's tree, read-only, at ``/harness``, and a sandbox
swept clean of the previous rollout -- which may now have been another commit's. A plain harness
directory (no git, ``sha`` None) is bound as it is and served only as itself. Workers idle for
``idle_s`` seconds are stopped by a reaper thread; ``close()`` (the executor's, at run end) stops all.
A worker whose server died, answered out of protocol, could not sweep, or hit a cgroup limit is not
reused: only its in-flight rollout fails (with the reason), the next one gets a fresh sandbox.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from evoharness.errors import InfraError
from evoharness.sandbox.base import TAIL_BYTES, classify
from evoharness.sandbox.models import LimitHit, Limits, SandboxResult, exit_words

WORKER_MODULE = "evoharness.agent.worker"
SCRATCH_MOUNT = "/scratch"
# past the rollout's own wall limit (which the server enforces), how long the host waits for an answer
ANSWER_GRACE_S = 15.0
START_TIMEOUT_S = 120.0  # for the worker's start-up and imports (not bound by a rollout's wall limit)
SERVER_CPU_S = 600  # the fork server's own RLIMIT_CPU (each child gets the rollout's ``cpu_seconds``)
# what the fork server reports: per rollout the child's CPU seconds and minor page faults (copy-on-write
# copies, mostly) and the server's own CPU seconds for the request (fork, wait, sweep); once, its start-up CPU
COST_KEYS = ("child_cpu_s", "child_minflt", "child_forks", "server_cpu_s", "start_cpu_s")
MAX_ROLLOUTS_PER_WORKER = 512  # then a fresh sandbox (bounds the server's own CPU time and any slow leak)


class LiveSandbox:
    """A command a sandbox backend started and left running (see ``BwrapSandbox.start``)."""

    def __init__(self, proc: subprocess.Popen, *, scratch: Path, uid: int | None, stderr: IO[bytes],
                 cleanup: ExitStack, limit_hit: Callable[[], LimitHit | None] | None, backend: str) -> None:
        self.proc, self.scratch, self.uid, self.backend = proc, Path(scratch), uid, backend
        self._stderr, self._cleanup, self._limit_hit = stderr, cleanup, limit_hit
        self._closed = False

    def limit_hit(self) -> LimitHit | None:
        """``memory`` or ``pids`` when the sandbox's cgroup refused memory or a process at some point."""
        return self._limit_hit() if self._limit_hit is not None else None

    def stderr_tail(self) -> str:
        self._stderr.flush()
        size = os.fstat(self._stderr.fileno()).st_size
        return os.pread(self._stderr.fileno(), TAIL_BYTES, max(0, size - TAIL_BYTES)).decode("utf-8", "replace")

    def close(self) -> None:
        """Kill the sandbox (its process group, then its cgroup) and release what it held."""
        if self._closed:
            return
        self._closed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:  # a write still buffered for a dead worker
                    pass
        self._cleanup.close()


class WorkerDied(Exception):
    """The warm worker can serve no more rollouts (the reason is its message)."""


class WarmWorker:
    """One sandboxed fork server, showing one harness commit's tree at a time (see the module docstring).

    ``sha``/``tree``: the commit it shows first and its exported tree (a read-only checkout); ``sha`` None
    binds ``tree`` itself, and the worker serves only that directory.
    """

    def __init__(self, sandbox, *, sha: str | None, tree: Path, env: dict[str, str], limits: Limits,
                 sockets: list[Path], warm: dict) -> None:
        self.sha, self.tree, self.limits = sha, tree, limits
        self.work = Path(tempfile.mkdtemp(prefix="evoharness-warm-"))
        self.view: Path | None = None  # the host directory bound at /harness (None: ``tree`` itself)
        if sha is not None:
            try:
                self.view = Path(tempfile.mkdtemp(prefix="evoharness-warm-harness-"))
                _fill(self.view, tree)
            except BaseException:
                shutil.rmtree(self.work, ignore_errors=True)
                _remove(self.view)
                raise
        self.switches = 0  # how many times it was handed another commit's tree
        self.rollouts = 0
        self.idle_since = time.monotonic()
        self.dead: str | None = None
        self.last_cost: dict[str, float] = {}  # the last rollout's CPU in the sandbox, as the server measured it
        self._silent = False  # the last failure was no answer in time (not an exit)
        self._buf = b""
        (self.work / "warm.json").write_text(json.dumps(warm))
        command = [sys.executable, "-m", WORKER_MODULE, "--serve", f"{SCRATCH_MOUNT}/warm.json"]
        start = time.monotonic()
        try:
            server = limits.model_copy(update={"cpu_seconds": max(limits.cpu_seconds, SERVER_CPU_S)})
            self.live: LiveSandbox = sandbox.start(command, harness_dir=self.view or tree, workdir=self.work,
                                                   env=env, limits=server, sockets=sockets)
        except BaseException:
            shutil.rmtree(self.work, ignore_errors=True)
            _remove(self.view)
            raise
        try:
            hello = self._answer(START_TIMEOUT_S)
        except WorkerDied as e:
            self.dead, self._silent = f"warm worker did not start: {e}", False
            hello = {}
        # read before the ready line; where the sandbox may write /scratch itself (unprivileged: a user
        # namespace) a rollout could otherwise leave a message in it for the next rollout, of any commit
        (self.live.scratch / "warm.json").unlink(missing_ok=True)
        self.start_seconds = time.monotonic() - start
        self.warmed = hello.get("warm", [])
        self.start_cpu_s = _cost({"start_cpu_s": hello.get("start_cpu_s")}).get("start_cpu_s", 0.0)

    @property
    def alive(self) -> bool:
        return self.dead is None and self.rollouts < MAX_ROLLOUTS_PER_WORKER

    def can_show(self, sha: str | None) -> bool:
        """Whether this worker can serve rollouts of ``sha`` (after ``show``)."""
        return sha == self.sha or (self.view is not None and sha is not None)

    def show(self, sha: str | None, tree: Path) -> None:
        """Show ``tree`` (commit ``sha``'s checkout) at ``/harness`` for the next rollouts.

        Called between rollouts only, when nothing but the server runs in the sandbox (each rollout's
        child and whatever it started were killed before its answer). ValueError when this worker cannot
        (``can_show``); a copy that fails leaves the worker dead (InfraError).
        """
        if sha == self.sha:
            return
        if not self.can_show(sha) or self.view is None:
            raise ValueError(f"this warm worker serves {self.sha!r} only, not {sha!r}")
        try:
            _fill(self.view, tree)
        except OSError as e:
            self.dead = f"could not show commit {str(sha)[:10]} to the warm worker: {e}"
            raise InfraError(self.dead) from None
        self.sha, self.tree = sha, tree
        self.switches += 1

    def run(self, payload: dict, *, batch: str | None = None, last: bool = True) -> tuple[SandboxResult, Path]:
        """Run one rollout (``payload``: the worker request); its result and the host path of its directory
        (``out.json``, ``stdout``, ``stderr`` inside, written by the sandbox: read them with O_NOFOLLOW).
        ``batch``: rollouts sent with the same ``batch`` (one commit's, in turn) may run in one forked child,
        which the server ends after the one sent with ``last`` (or when another batch's rollout comes); None:
        a fresh child for this rollout alone (``agent/forkserver.py``).
        After a failure the worker may be dead (``alive`` False): it then serves no more rollouts."""
        n = self.rollouts
        self.rollouts += 1
        self.last_changed: list[str] = []
        self.last_cost = {}  # a rollout without an answer (the server died) has no account: never the last one's
        rdir = self.live.scratch / str(n)
        for entry in self.live.scratch.iterdir():  # only an unprivileged sandbox can write /scratch itself
            self.forget(entry)
        rdir.mkdir()
        _request_file(rdir, json.dumps(payload).encode(), self.live.uid)
        start = time.monotonic()
        answer: dict = {}
        if self.dead is None:
            try:
                line = {"n": n, "dir": f"{SCRATCH_MOUNT}/{n}", "wall": self.limits.wall_seconds,
                        "cpu": self.limits.cpu_seconds}
                self._send(line | ({"batch": batch, "last": last} if batch is not None else {}))
                answer = self._answer(self.limits.wall_seconds + ANSWER_GRACE_S)
                if answer.get("n") != n:
                    raise WorkerDied(f"warm worker answered out of turn: {str(answer)[:200]}")
            except WorkerDied as e:
                self.dead, answer = str(e), {}
        wall = time.monotonic() - start
        stderr = _tail_in(rdir, "stderr")
        if self.dead is not None and not answer:
            hit = self.live.limit_hit()
            rc = self.live.proc.poll()
            rc = rc if rc else -9
            text = f"{stderr}{self.live.stderr_tail()}\n{self.dead}"
            if not self._silent and hit is None:  # the server's own last words (MemoryError at its imports under a
                # small memory_mb): the limit, as for a cold worker, not a plain harness error; not its whole stderr
                hit = classify(rc, f"{stderr}\n{self.dead}", False, shell=True)
            return SandboxResult(returncode=rc, stderr=text, timed_out=self._silent,
                                 limit=("memory" if hit == "memory" else "wall") if self._silent else hit,
                                 # a silent worker's rollout: what the host waited, the answer grace included
                                 # (the reason says "ended after" it, not that the limit was so long)
                                 wall_seconds=wall,
                                 backend=self.live.backend, shell_status=True), rdir  # bwrap's status
        rc, timed_out = int(answer.get("returncode", 1)), bool(answer.get("timed_out"))
        self.last_cost = _cost(answer.get("cost"))
        changed = (answer.get("cost") or {}).get("changed") if isinstance(answer.get("cost"), dict) else None
        # what a batch child found the rollout had left in its process (it was then ended): names only
        self.last_changed = [str(c) for c in changed] if isinstance(changed, list) else []
        limit = classify(rc, stderr, timed_out, shell=False)  # the child's own status (os.waitstatus_to_exitcode)
        hit = self.live.limit_hit()
        if hit is not None:  # a cgroup limit: this rollout hit it (the worker is not reused)
            limit = hit if limit is None or (limit == "wall" and hit == "memory") else limit
            self.dead = f"the sandbox hit its {hit} limit"
        if not answer.get("clean", False):
            self.dead = "the sandbox could not be swept clean after a rollout"
        if limit is not None and rc == 0:
            rc = 1
        return SandboxResult(returncode=rc, stderr=stderr, timed_out=timed_out, limit=limit, wall_seconds=wall,
                             backend=self.live.backend), rdir

    def forget(self, rdir: Path) -> None:
        """Remove a finished rollout's directory (the host does; the sandbox may not touch /scratch itself)."""
        if rdir.is_symlink() or not rdir.is_dir():
            rdir.unlink(missing_ok=True)
        else:  # a directory the sandbox (the host's own uid when unprivileged) made unreadable is opened up first
            _remove_tree(rdir)

    def close(self) -> None:
        try:
            self.live.close()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
            _remove(self.view)

    # ---- the protocol: one JSON line each way ---------------------------------------------------

    def _send(self, obj: dict) -> None:
        try:
            self.live.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.live.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerDied(self._death("warm worker exited")) from None

    def _answer(self, timeout: float) -> dict:
        fd = self.live.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self._silent = True
                raise WorkerDied(f"warm worker gave no answer within {timeout:.0f}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerDied(self._death("warm worker exited"))
            self._buf += chunk
            if len(self._buf) > 1 << 20:
                raise WorkerDied("warm worker answered out of protocol (over 1 MiB without a newline)")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            raise WorkerDied(f"warm worker answered out of protocol: {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise WorkerDied(f"warm worker answered out of protocol: {line[:200]!r}")
        return answer

    def _death(self, what: str) -> str:
        try:
            rc = self.live.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        last = next((ln for ln in reversed(self.live.stderr_tail().splitlines()) if ln.strip()), "")
        # the server's status as bwrap reports it: 128 + N for a server killed by signal N
        return f"{what}, {exit_words(rc, shell=True)}" + (f": {last[:300]}" if last else "")


def _request_file(rdir: Path, data: bytes, uid: int | None) -> None:
    """Write a rollout's ``request.json`` in the directory the host just made and hand both to the sandbox's ``uid``
    (``LiveSandbox.own`` of a directory holding this one file; the file made with O_EXCL: never through a planted
    link). Plain ``os`` calls: 92 against 150 us for ``open`` and ``own`` (ad-hoc, loaded machine)."""
    fd = os.open(rdir / "request.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        while data:
            data = data[os.write(fd, data):]
        if uid is not None:
            os.fchown(fd, uid, uid)
    finally:
        os.close(fd)
    if uid is not None:
        os.chown(rdir, uid, uid)


def _remove_tree(root: Path) -> None:
    """``shutil.rmtree`` of what a sandbox left in /scratch: unprivileged, its uid is the host's, so it may have
    made a directory unreadable or read-only. A directory that cannot be listed is opened up (0700, its parent
    0755) and removed whole, once; any other failed step is retried once after its parent is opened up; what
    still fails is left (the next ``run`` tries again). Nothing runs in the sandbox meanwhile (swept)."""
    tried: set[str] = set()

    def again(func, path: str, _exc: object) -> None:
        opened = False
        for p, mode in ((os.path.dirname(path), 0o755), (path, 0o700)):
            try:
                if os.path.isdir(p) and not os.path.islink(p):
                    os.chmod(p, mode)
                    opened = p == path
            except OSError:
                pass
        try:
            if opened and func in (os.open, os.scandir) and path not in tried:
                tried.add(path)
                shutil.rmtree(path, onerror=again)
            else:
                func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=again)


def _fill(view: Path, tree: Path) -> None:
    """Make ``view`` hold a copy of ``tree`` and nothing else: symlinks are copied as links (never followed
    on the host), files and directories with their modes (a checkout is read-only)."""
    _writable(view)
    for entry in os.scandir(view):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    shutil.copytree(tree, view, symlinks=True, dirs_exist_ok=True)
    view.chmod(0o555)


def _writable(root: Path) -> None:
    """The directories under ``root`` writable by their owner again (a copied checkout's are 0555)."""
    for dirpath, dirnames, _files in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755)


def _remove(view: Path | None) -> None:
    if view is not None and view.exists():
        _writable(view)
        shutil.rmtree(view, ignore_errors=True)


def _cost(raw: object) -> dict[str, float]:
    """The server's account (``COST_KEYS``), numbers only."""
    if not isinstance(raw, dict):
        return {}
    return {k: float(v) for k, v in raw.items() if k in COST_KEYS and isinstance(v, int | float)}


def _tail_in(rdir: Path, name: str) -> str:
    """The tail of ``rdir/name``, opened without following a symlink at either step ('' if absent)."""
    try:
        dfd = os.open(rdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return ""
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000) == 0o100000:
            return ""
        return os.pread(fd, TAIL_BYTES, max(0, st.st_size - TAIL_BYTES)).decode("utf-8", "replace")
    finally:
        os.close(fd)


_POOLS: weakref.WeakSet[WarmPool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS):
        pool.close()


class WarmPool:
    """At most ``slots`` warm workers, busy or idle. ``acquire(sha)`` hands out an idle worker showing
    ``sha``, else another idle worker that can show it (the caller then calls ``show``), else a new one while
    there is room, else stops an idle worker that cannot show it (a plain directory's) to make room, else
    waits; idle ones stop after ``idle_s`` (see the module docstring). ``start(sha)`` makes a worker for a
    commit (raises ``InfraError`` if the backend cannot)."""

    def __init__(self, start: Callable[[str | None], WarmWorker], slots: int, idle_s: float) -> None:
        self._start, self.slots, self.idle_s = start, slots, idle_s
        self._idle: list[WarmWorker] = []  # least recently used first
        self._busy = 0
        self._lock = threading.Condition()
        self._closed = False
        self._reaper: threading.Thread | None = None
        # bwrap --die-with-parent ties a sandbox to the *thread* that started it: start every worker from
        # this one long-lived thread, not from the caller's (a run's rollout threads end with the run)
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-spawner")
        _POOLS.add(self)  # closed at interpreter exit if nobody did (mounts, cgroups, temp dirs)

    def acquire(self, sha: str | None) -> WarmWorker:
        """A live worker that can show ``sha``, the caller's alone until ``release`` (it may show another
        commit: the caller calls ``show`` before running)."""
        stale: list[WarmWorker] = []
        pick: WarmWorker | None = None
        with self._lock:
            if self._closed:
                raise InfraError("warm worker pool is closed", retryable=False)
            while True:
                stale += [w for w in self._idle if not w.alive]
                self._idle = [w for w in self._idle if w.alive]
                if self._busy < self.slots:
                    same = [w for w in self._idle if w.sha == sha]
                    other = [w for w in self._idle if w.can_show(sha)]
                    pick = same[-1] if same else other[0] if other else None
                    if pick is not None:
                        self._idle.remove(pick)
                        self._busy += 1
                        break
                    if self._busy + len(self._idle) < self.slots:
                        break
                    if self._idle:  # room held by a worker that cannot show sha: stop the least recent
                        stale.append(self._idle.pop(0))
                        break
                self._lock.wait()
            if pick is None:
                self._busy += 1
                self._ensure_reaper()
        for w in stale:
            w.close()
        if pick is not None:
            return pick
        try:
            w = self._spawner.submit(self._start, sha).result()
        except BaseException:
            with self._lock:
                self._busy -= 1
                self._lock.notify_all()
            raise
        return w

    def release(self, w: WarmWorker) -> None:
        """Give ``w`` back: kept warm when it is alive, stopped otherwise."""
        with self._lock:
            self._busy -= 1
            keep = w.alive and not self._closed
            if keep:
                w.idle_since = time.monotonic()
                self._idle.append(w)
            self._lock.notify_all()
        if not keep:
            w.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._lock.notify_all()
        for w in idle:
            w.close()
        self._spawner.shutdown(wait=False)

    def _ensure_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="warm-reaper", daemon=True)
            self._reaper.start()

    def _reap(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._lock.wait(timeout=max(0.05, self.idle_s / 4))
                now = time.monotonic()
                old = [w for w in self._idle if now - w.idle_since >= self.idle_s]
                self._idle = [w for w in self._idle if w not in old]
            for w in old:
                w.close()
