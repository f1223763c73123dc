"""Warm containers for the Docker backend: start-up paid once, isolation between rollouts kept.

A cold container costs ~0.3 s to create, start and remove -- about half of a synthetic-env rollout.
A pool keeps up to ``size`` containers running ``sleep infinity`` (tini as PID 1 reaps orphans),
each with its own host directory ``slot`` bind-mounted as ``slot/harness`` -> ``/harness``
(read-only), ``slot/scratch`` -> ``/scratch`` and ``slot/io`` -> ``/.io``. One command at a time
runs in a slot, by ``docker exec`` as a uid drawn for that command alone. Per command:

1. the harness is copied into ``slot/harness`` (skipped when the slot already holds the same tree);
   the work directory's entries are moved into ``slot/scratch`` and moved back afterwards;
2. the command runs, its output in ``/.io`` files, then -- in the same exec, as the same uid --
   every process of that uid is killed and ``/tmp``, ``/dev/shm``, ``/dev/mqueue`` and SysV IPC
   are emptied; the cleanup writes ``/.io/clean`` only when it verified that nothing is left;
3. past ``wall_seconds`` the container is killed (and the slot replaced): a fork bomb can leave
   no pid free for a cleanup exec.

A slot whose cleanup did not verify, whose container died, or that saw an OOM kill is destroyed and
recreated on demand, so nothing of one rollout reaches the next. Per-command memory, pids and /tmp
limits are fixed when a container is created: a command with other limits (or other sockets) gets
a slot created for them. When every slot is busy the command runs in a cold container instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evoharness.errors import InfraError
from evoharness.logging import get_logger
from evoharness.sandbox.bwrap import _chown_tree
from evoharness.sandbox.docker import IO_MOUNT, WORK_MOUNT, _kill, _remove, labels
from evoharness.sandbox.models import Limits, SandboxResult

if TYPE_CHECKING:
    from evoharness.sandbox.docker import DockerSandbox

log = get_logger(__name__)

# Kill every process of this uid (all but init and the shell itself), empty the shared writable
# places, and say so only if nothing is left. Runs as the command's uid: no privilege needed.
CLEANUP = (
    f"rm -f {IO_MOUNT}/clean\n"
    # kill(-1) succeeds whenever any other process exists (init's sleep is one), so look in /proc
    'others() { for p in /proc/[0-9]*; do [ "${p#/proc/}" != "$$" ] && [ -O "$p" ] && return 0; done; return 1; }\n'
    # killed orphans stay in /proc until tini reaps them: give it up to ~10 s on a loaded machine
    "n=0; while others && [ $n -lt 200 ]; do kill -9 -1 2>/dev/null; sleep 0.05; n=$((n+1)); done\n"
    "ipcrm -a 2>/dev/null\n"
    "find /tmp /dev/shm /dev/mqueue -xdev -mindepth 1 -type d -exec chmod u+rwx {} \\; 2>/dev/null\n"
    # -xdev: read-only mounts under /tmp (a venv or source checked out below /tmp) are not ours to
    # delete; they and the directories leading to them are not leftovers
    "find /tmp /dev/shm /dev/mqueue -xdev -mindepth 1 -delete 2>/dev/null\n"
    "mounts=$(awk '$5 ~ \"^/(tmp|dev/shm|dev/mqueue)/\" {print $5}' /proc/self/mountinfo)\n"
    "left=$(find /tmp /dev/shm /dev/mqueue -xdev -mindepth 1 2>&1 | while read -r p; do\n"
    '  keep=; for m in $mounts; do case "$m/" in "$p"/*) keep=1;; esac; done; [ -z "$keep" ] && echo "$p"\n'
    "done | head -n 1)\n"
    f'if ! others && [ -z "$left" ]; then : > {IO_MOUNT}/clean; fi\n'
)
RUN_THEN_CLEAN = f'"$@" </dev/null >{IO_MOUNT}/stdout 2>{IO_MOUNT}/stderr\nrc=$?\n{CLEANUP}exit $rc\n'


class _Slot:
    def __init__(self, container, root: Path, key: tuple) -> None:
        self.container, self.root, self.key = container, root, key
        self.harness, self.scratch, self.io = root / "harness", root / "scratch", root / "io"
        self.harness_sig: tuple | None = None


class ContainerPool:
    """Up to ``size`` warm containers of ``box``'s image (see the module docstring)."""

    def __init__(self, box: DockerSandbox, size: int) -> None:
        self.box, self.size = box, size
        self._idle: list[_Slot] = []
        self._count = 0
        self._lock = threading.Lock()
        self._closed = False
        self._registered = False

    # ---- leasing ---------------------------------------------------------------------------

    def run(self, argv: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str], limits: Limits,
            sockets: Sequence[Path]) -> SandboxResult | None:
        """Run ``argv`` (the prlimit-wrapped command) in a warm slot; None when every slot is busy."""
        key = (limits.memory_mb, limits.pids, limits.tmp_mb, tuple((str(s), s.stat().st_ino) for s in sockets))
        slot = self._acquire(key, limits, sockets)
        if slot is None:
            return None
        healthy = False
        try:
            result, healthy = self._run_in(slot, argv, harness_dir, workdir, env, limits)
            return result
        finally:
            self._release(slot, healthy)

    def _acquire(self, key: tuple, limits: Limits, sockets: Sequence[Path]) -> _Slot | None:
        stale = None
        with self._lock:
            if self._closed:
                raise InfraError("docker sandbox: the container pool is closed", retryable=False)
            for i, s in enumerate(self._idle):
                if s.key == key:
                    return self._idle.pop(i)
            if self._count < self.size:
                self._count += 1
            elif self._idle:
                stale = self._idle.pop(0)  # replaced by a slot with this command's limits
            else:
                return None
            if not self._registered:
                atexit.register(self.close)
                self._registered = True
        if stale is not None:
            self._destroy(stale)
        try:
            return self._create(key, limits, sockets)
        except BaseException:
            with self._lock:
                self._count -= 1
            raise

    def _release(self, slot: _Slot, healthy: bool) -> None:
        with self._lock:
            if healthy and not self._closed:
                self._idle.append(slot)
                return
            self._count -= 1
        self._destroy(slot)

    def _create(self, key: tuple, limits: Limits, sockets: Sequence[Path]) -> _Slot:
        import docker

        root = Path(tempfile.mkdtemp(prefix="evoharness-pool-"))
        root.chmod(0o755)
        for d in ("harness", "scratch", "io"):
            (root / d).mkdir(mode=0o755)
        try:
            container = self.box.client.containers.run(
                self.box.image, ["sleep", "infinity"], detach=True, user="65534:65534",
                mounts=self.box.mounts(root / "harness", root / "scratch", root / "io", sockets),
                labels=labels("pool"), **self.box.host_options(limits))
        except docker.errors.DockerException as e:
            shutil.rmtree(root, ignore_errors=True)
            raise InfraError(f"docker sandbox: cannot start a pool container: {e}") from None
        return _Slot(container, root, key)

    def _destroy(self, slot: _Slot) -> None:
        _remove(slot.container)
        _force_rmtree(slot.root)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for slot in idle:
            self._destroy(slot)

    # ---- one command -----------------------------------------------------------------------

    def _run_in(self, slot: _Slot, argv: list[str], harness_dir: Path, workdir: Path, env: dict[str, str],
                limits: Limits) -> tuple[SandboxResult, bool]:
        uid = self.box.take_uid()
        moved_in = False
        try:
            self._sync_harness(slot, harness_dir)
            _move_entries(workdir, slot.scratch)
            moved_in = True
            _chown_tree(slot.scratch, uid)
            slot.scratch.chmod(0o700)
            _empty(slot.io)
            os.chown(slot.io, uid, uid)
            oom_before = _oom_kills(slot.container.id)
            start = time.monotonic()
            rc, timed_out, exec_ok = self._exec_with_deadline(slot, argv, uid, env, limits.wall_seconds)
            wall = time.monotonic() - start
            if exec_ok and not (slot.io / "clean").exists():  # the command's cleanup did not run or verify
                self._exec(slot, ["/bin/sh", "-c", CLEANUP], uid, env, timeout=30)
            clean = exec_ok and (slot.io / "clean").exists()
            oom_after = _oom_kills(slot.container.id)
            if oom_before is None or oom_after is None:
                oom = _inspect_oom(slot.container)
            else:
                oom = oom_after > oom_before
            result = self.box.result(rc, slot.io, timed_out=timed_out, oom=oom, wall=wall)
            return result, clean and oom is False
        finally:
            if moved_in:
                _move_entries(slot.scratch, workdir)
            self.box.give_uid(uid)

    def _exec_with_deadline(self, slot: _Slot, argv: list[str], uid: int, env: dict[str, str],
                            wall: float) -> tuple[int, bool, bool]:
        """Run ``argv`` then the cleanup in one exec; kill it past ``wall``. -> (rc, timed_out, ok)."""
        api = self.box.client.api
        try:
            exec_id = api.exec_create(slot.container.id, ["/bin/sh", "-c", RUN_THEN_CLEAN, "sh", *argv],
                                      user=f"{uid}:{uid}", environment=env, workdir=WORK_MOUNT)["Id"]
        except Exception as e:  # noqa: BLE001 -- the container died: the caller destroys the slot
            log.warning("docker_pool_exec_failed", error=str(e))
            return -1, False, False
        errors: list[BaseException] = []

        def start() -> None:
            try:
                api.exec_start(exec_id)
            except BaseException as e:  # noqa: BLE001 -- reported below
                errors.append(e)

        t = threading.Thread(target=start, name="docker-exec", daemon=True)
        t.start()
        t.join(wall)
        timed_out = t.is_alive()
        if timed_out:  # kill the whole container: a fork bomb may leave no pid for a cleanup exec
            _kill(slot.container)
            t.join(30)
            return 137, True, False
        if t.is_alive() or errors:
            return -1, timed_out, False
        info = api.exec_inspect(exec_id)
        rc = info.get("ExitCode")
        return (137 if rc is None else int(rc)), timed_out, True

    def _exec(self, slot: _Slot, cmd: list[str], uid: int, env: dict[str, str], timeout: float) -> None:
        api = self.box.client.api
        try:
            exec_id = api.exec_create(slot.container.id, cmd, user=f"{uid}:{uid}", environment=env)["Id"]
            t = threading.Thread(target=api.exec_start, args=(exec_id,), name="docker-exec", daemon=True)
            t.start()
            t.join(timeout)
        except Exception as e:  # noqa: BLE001 -- the slot is destroyed when its cleanup did not verify
            log.warning("docker_pool_cleanup_failed", error=str(e))

    def _sync_harness(self, slot: _Slot, harness_dir: Path) -> None:
        sig = _signature(harness_dir)
        if slot.harness_sig == sig:
            return
        slot.harness_sig = None
        _empty(slot.harness)
        shutil.copytree(harness_dir, slot.harness, symlinks=True, dirs_exist_ok=True)
        slot.harness.chmod(0o755)
        slot.harness_sig = sig


def _signature(root: Path) -> tuple:
    """What identifies a tree's content cheaply: every entry's path, mode, size and mtime."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            st = os.lstat(os.path.join(dirpath, name))
            entries.append((os.path.relpath(os.path.join(dirpath, name), root), st.st_mode, st.st_size,
                            st.st_mtime_ns))
    return str(root.resolve()), tuple(entries)


def _move_entries(src: Path, dst: Path) -> None:
    for name in os.listdir(src):
        try:
            os.rename(src / name, dst / name)
        except OSError:
            shutil.move(src / name, dst / name)


def _empty(d: Path) -> None:
    for name in os.listdir(d):
        p = d / name
        if p.is_dir() and not p.is_symlink():
            _force_rmtree(p)
        else:
            p.unlink()


def _force_rmtree(p: Path) -> None:
    def writable(func, path, _exc):
        os.chmod(os.path.dirname(path), 0o755)
        func(path)

    for dirpath, _dirs, _files in os.walk(p):
        os.chmod(dirpath, 0o755)
    shutil.rmtree(p, onerror=writable)


def _inspect_oom(container) -> bool | None:
    """The engine's word on an OOM kill in ``container``; None when the inspect fails (logged): the rollout is still
    recorded, not lost to the exception, and the slot, whose state is unknown, is not reused."""
    import docker
    import requests

    try:
        container.reload()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        log.warning("docker_pool_inspect_failed", container=container.id[:12], error=str(e))
        return None
    return bool(container.attrs.get("State", {}).get("OOMKilled"))


def _oom_kills(container_id: str) -> int | None:
    """The cgroup's OOM-kill count (cgroup v1 or v2, cgroupfs or systemd driver); None if unreadable."""
    for path, key in ((f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control", "oom_kill"),
                      (f"/sys/fs/cgroup/docker/{container_id}/memory.events", "oom_kill"),
                      (f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events", "oom_kill"),
                      (f"/sys/fs/cgroup/memory/system.slice/docker-{container_id}.scope/memory.oom_control",
                       "oom_kill")):
        try:
            for line in Path(path).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except OSError:
            continue
    return None
