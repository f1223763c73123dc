"""The Docker backend: each command runs in a container of the locally built sandbox image.

Layout inside: the image's minimal Debian 12 system (read-only root file system); the host's
Python interpreter, virtual environment and evoharness source bind-mounted read-only at their
host paths (as bwrap mounts them: the image holds no Python, so it never goes stale when the
code or its dependencies change; host and image are both bookworm, so glibc matches; a venv reached
through a symlink is mounted at the link's path too); the harness at ``/harness`` read-only; the
work directory at ``/scratch`` (writable); a private tmpfs ``/tmp`` that is also HOME; the Unix
sockets passed as ``sockets`` at their host paths, each alone. No network (``network_mode=none``),
every capability dropped, no-new-privileges, an unprivileged uid drawn for this run alone, and no
host environment variable.

Limits: the whole container is bounded by cgroups (``memory_mb`` of memory with no swap, ``pids``
tasks, optionally ``cpus``); inside, ``prlimit`` sets the same per-process rlimits as bwrap (address
space, CPU seconds, processes, file size), so a 4 GiB allocation fails with MemoryError in both.
Standard output and error go to files (bounded by RLIMIT_FSIZE), not to the Docker log. A command
the cgroup OOM-killed is reported as the ``memory`` limit; one past ``wall_seconds`` is killed.

Cold mode (``pool_size=0``) creates, starts and removes one container per command (~0.3 s of
start-up). Pooled mode keeps warm containers (``docker_pool.py``).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoharness.errors import InfraError
from evoharness.logging import get_logger
from evoharness.sandbox.base import TAIL_BYTES, base_env, classify, prlimit_prefix, python_env
from evoharness.sandbox.bwrap import _chown_tree, _dedupe, _UidPool, _venv_links, python_paths
from evoharness.sandbox.models import Limits, SandboxResult

log = get_logger(__name__)

HARNESS_MOUNT = "/harness"
WORK_MOUNT = "/scratch"
IO_MOUNT = "/.io"  # the command's stdout / stderr files (a per-run host directory)
DEFAULT_IMAGE = "evoharness-sandbox:latest"
BUILD_HINT = "bash ops/sandbox/build-image.sh"
LABEL = "org.evoharness.sandbox"
OWNER_LABEL = "org.evoharness.sandbox.owner"  # "HOST:PID" of the process that made the container
# sh opens the output files, then runs the (prlimit-wrapped) command and waits for it.
_REDIRECT = f'"$@" </dev/null >{IO_MOUNT}/stdout 2>{IO_MOUNT}/stderr'


class DockerSandbox:
    """Docker sandbox (see the module docstring for what is visible inside and which limits bind).

    ``image``: the sandbox image (built by ``ops/sandbox/build-image.sh``). ``pool_size``: warm
    containers kept for reuse (0 = a fresh container per command). ``cpus``: CPUs per container
    (None = unbounded, as bwrap). ``ro_paths``: extra host paths bound read-only at the same place.
    ``client``: a ``docker.DockerClient`` (default: ``docker.from_env()`` on first use).
    Call ``close()`` (or use ``with``) to remove pooled containers; they are also removed at exit.
    """

    name = "docker"

    def __init__(self, *, image: str = DEFAULT_IMAGE, pool_size: int = 0, cpus: float | None = None,
                 ro_paths: Sequence[Path] = (), python_runtime: bool = True, client: Any = None,
                 uid_base: int = 300_000, uid_span: int = 100_000) -> None:
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        self.image, self.pool_size, self.cpus = image, pool_size, cpus
        extra = [Path(p).resolve() for p in ro_paths]
        self.ro_paths = _dedupe((python_paths() if python_runtime else []) + extra)
        self._python_env = python_env() if python_runtime else {}
        self._links = _venv_links(self.ro_paths) if python_runtime else []
        self._client = client
        self._uids = _UidPool(uid_base, uid_span)
        self._checked = False
        self._lock = threading.Lock()
        self._pool = None

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def view(self, harness_dir: Path, workdir: Path) -> tuple[str, str]:
        return HARNESS_MOUNT, WORK_MOUNT

    # ---- availability ----------------------------------------------------------------------

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import docker

                try:
                    self._client = docker.from_env(timeout=60)
                except docker.errors.DockerException as e:
                    raise InfraError(f"docker sandbox unusable: the Docker engine is unreachable ({e})",
                                     retryable=False) from None
            return self._client

    def check(self) -> None:
        """Raise InfraError unless the engine answers and the sandbox image exists."""
        if self._checked:
            return
        import docker

        client = self.client
        try:
            client.ping()
        except (docker.errors.DockerException, OSError) as e:
            raise InfraError(f"docker sandbox unusable: the Docker engine is unreachable ({e})",
                             retryable=False) from None
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise InfraError(f"docker sandbox unusable: image {self.image!r} not found; build it with "
                             f"`{BUILD_HINT}`", retryable=False) from None
        except docker.errors.DockerException as e:
            raise InfraError(f"docker sandbox unusable: cannot inspect image {self.image!r} ({e})",
                             retryable=False) from None
        _reap_stale(client)
        self._checked = True

    # ---- running ---------------------------------------------------------------------------

    def run(self, command: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
            limits: Limits, sockets: Sequence[Path] = ()) -> SandboxResult:
        self.check()
        socks = _sockets(sockets)
        full_env = base_env("/tmp", "/tmp", self._path()) | {"USER": "sandbox", "LOGNAME": "sandbox"} \
            | self._python_env | env
        inner = [*prlimit_prefix(limits, inherit=False), *command]
        if self.pool_size > 0:
            result = self._get_pool().run(inner, harness_dir=Path(harness_dir), workdir=Path(workdir),
                                          env=full_env, limits=limits, sockets=socks)
            if result is not None:
                return result
        return self._run_cold(["/bin/sh", "-c", _REDIRECT, "sh", *inner], harness_dir=Path(harness_dir),
                              workdir=Path(workdir), env=full_env, limits=limits, sockets=socks)

    def _run_cold(self, argv: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
                  limits: Limits, sockets: list[Path]) -> SandboxResult:
        import docker
        import requests

        uid = self._uids.take()
        io = Path(tempfile.mkdtemp(prefix="evoharness-io-"))
        container = None
        try:
            _chown_tree(workdir, uid)
            os.chown(io, uid, uid)
            mounts = self.mounts(harness_dir, workdir, io, sockets)
            start = time.monotonic()
            try:
                container = self.client.containers.create(
                    self.image, argv, user=f"{uid}:{uid}", environment=env, working_dir=WORK_MOUNT,
                    mounts=mounts, labels=labels("cold"), **self.host_options(limits))
                container.start()
            except docker.errors.DockerException as e:
                raise InfraError(f"docker sandbox: cannot start a container: {e}") from None
            timed_out = False
            try:
                status = container.wait(timeout=max(0.1, limits.wall_seconds - (time.monotonic() - start)))
                rc = int(status.get("StatusCode", -1))
            except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
                timed_out = True
                _kill(container)
                try:
                    rc = int(container.wait(timeout=30).get("StatusCode", -9))
                except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
                    rc = 137  # killed, its end not confirmed (an engine slow to answer): removed by force below
            wall = time.monotonic() - start
            try:
                container.reload()
                oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
                log.warning("docker_inspect_failed", container=container.id[:12], error=str(e))
                oom = None  # unknown (said in the reason): the run is still recorded, never lost to an exception
            return self.result(rc, io, timed_out=timed_out, oom=oom, wall=wall)
        finally:
            if container is not None:
                _remove(container)
            shutil.rmtree(io, ignore_errors=True)
            self._uids.give(uid)

    # ---- shared with the pool --------------------------------------------------------------

    def mounts(self, harness_dir: Path | None, workdir: Path | None, io: Path | None,
               sockets: Sequence[Path]) -> list:
        """Bind mounts: the runtime and ro_paths, sockets, and (when given) harness, work and io dirs."""
        from docker.types import Mount

        m = [Mount(str(p), str(p), type="bind", read_only=True) for p in self.ro_paths]
        # a venv reached through a symlink is bound at the link's path as well (a read-only root file system
        # cannot hold the link bwrap makes), so sys.executable as the host spells it runs inside
        m += [Mount(str(link), str(target), type="bind", read_only=True) for link, target in self._links]
        m += [Mount(str(s), str(s), type="bind", read_only=True) for s in sockets]
        if harness_dir is not None:
            m.append(Mount(HARNESS_MOUNT, str(harness_dir.resolve()), type="bind", read_only=True))
        if workdir is not None:
            m.append(Mount(WORK_MOUNT, str(workdir.resolve()), type="bind", read_only=False))
        if io is not None:
            m.append(Mount(IO_MOUNT, str(io.resolve()), type="bind", read_only=False))
        return m

    def host_options(self, limits: Limits) -> dict[str, Any]:
        """The container's isolation and cgroup limits (the same for cold and pooled containers)."""
        from docker.types import LogConfig, Ulimit

        mem = f"{limits.memory_mb}m"
        opts: dict[str, Any] = dict(
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"}, hostname="sandbox",
            mem_limit=mem, memswap_limit=mem, pids_limit=limits.pids + 2,  # + tini and the sh wrapper
            ulimits=[Ulimit(name="core", soft=0, hard=0)], ipc_mode="private", shm_size="16m",
            log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": "1m", "max-file": "1"}),
            stdin_open=False, tty=False)
        if self.cpus:
            opts["nano_cpus"] = int(self.cpus * 1e9)
        return opts

    def result(self, rc: int, io: Path, *, timed_out: bool, oom: bool | None, wall: float) -> SandboxResult:
        """``oom``: whether the container saw an OOM kill; None when that could not be read (the result says so, and
        names a memory limit only from the command's own last words)."""
        stdout, stderr = _tail(io / "stdout"), _tail(io / "stderr")
        # the status is the /bin/sh wrapper's (cold and pooled alike): 128 + N for a command killed by signal N
        # an OOM kill before a wall timeout is named (the result stays timed out)
        limit = "memory" if oom else ("wall" if timed_out else classify(rc, stderr, timed_out, shell=True))
        return SandboxResult(returncode=rc, stdout=stdout, stderr=stderr, timed_out=timed_out, limit=limit,
                             wall_seconds=wall, memory_unknown=oom is None and limit != "memory", backend=self.name,
                             shell_status=True)

    def take_uid(self) -> int:
        return self._uids.take()

    def give_uid(self, uid: int) -> None:
        self._uids.give(uid)

    def close(self) -> None:
        """Remove the pooled containers (idempotent)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _get_pool(self):
        from evoharness.sandbox.docker_pool import ContainerPool

        with self._lock:
            if self._pool is None:
                self._pool = ContainerPool(self, self.pool_size)
            return self._pool

    def _path(self) -> str:
        bins = [str(Path(sys.prefix) / "bin")] if any(Path(sys.prefix).resolve() == p for p in self.ro_paths) else []
        return ":".join(bins + ["/usr/local/bin", "/usr/bin", "/bin"])


def labels(kind: str) -> dict[str, str]:
    return {LABEL: kind, OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"}


def _reap_stale(client) -> None:
    """Remove sandbox containers left by a process of this host that no longer exists (killed with -9)."""
    import docker

    me = socket.gethostname()
    try:
        found = client.containers.list(all=True, filters={"label": OWNER_LABEL})
    except docker.errors.DockerException:
        return
    for c in found:
        host, _, pid = c.labels.get(OWNER_LABEL, "").rpartition(":")
        if host == me and pid.isdigit() and not _alive(int(pid)):
            log.info("docker_reap_stale", container=c.id[:12], owner=pid)
            _remove(c)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sockets(sockets: Sequence[Path]) -> list[Path]:
    out = []
    for s in sockets:
        p = Path(s)
        if not p.is_socket():
            raise InfraError(f"docker: {p} is not a Unix socket", retryable=False)
        out.append(p.resolve())
    return out


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _kill(container) -> None:
    import docker

    try:
        container.kill()
    except docker.errors.APIError:
        pass  # it exited on its own in the meantime


def _remove(container) -> None:
    import docker

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:  # e.g. removal already in progress; say so, a leak is visible
        log.warning("docker_remove_failed", container=container.id[:12], error=str(e))
