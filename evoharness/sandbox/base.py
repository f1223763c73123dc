"""The `Sandbox` protocol and the plain-process backend (limits, no isolation).

Both backends share `run_limited`: start the command in its own session, write its output to
files (bounded by RLIMIT_FSIZE), kill the whole process group at the wall-time limit, and
classify which limit (if any) ended it.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import evoharness
from evoharness.errors import InfraError
from evoharness.sandbox.models import LimitHit, Limits, SandboxResult, signal_in_status

TAIL_BYTES = 64 * 1024
# "failed to map segment from shared object": the dynamic loader's words when mmap of a library fails, which in the
# sandbox (no noexec mount, no seccomp rule on mmap) is the address-space limit: a worker importing a C extension
# under a few MiB of RLIMIT_AS died with it as an ImportError, recorded as a plain harness error
_MEMORY_MARKS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory",
                 "failed to map segment from shared object")
_PIDS_MARKS = ("Resource temporarily unavailable", "can't start new thread", "fork: retry")


class Sandbox(Protocol):
    """Runs one command in isolation under resource limits.

    Contract:
    - ``harness_dir`` is visible to the command read-only at ``view(...)[0]``; ``workdir`` is
      writable at ``view(...)[1]`` and (with a private ``/tmp``) the only writable place.
    - The command's environment is exactly ``env`` plus a minimal base (PATH, HOME pointing
      at an empty directory, LANG, TMPDIR); nothing is inherited from the caller.
    - ``sockets``: host Unix socket paths (e.g. the model gateway's) that the command can
      connect to inside, at the same path; nothing else of their directories is visible. They are
      the command's only way out: the sandbox has no network.
    - A command that crashes, hangs or hits a limit yields a ``SandboxResult`` saying so; it
      never raises. ``run`` raises ``InfraError`` only when the backend itself is unusable.
    """

    name: str

    def view(self, harness_dir: Path, workdir: Path) -> tuple[str, str]:
        """The paths at which the command sees ``harness_dir`` and ``workdir``."""
        ...

    def check(self) -> None:
        """Raise ``InfraError`` if this backend cannot run commands on this machine."""
        ...

    def run(self, command: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
            limits: Limits, sockets: Sequence[Path] = ()) -> SandboxResult: ...


def _within_hard(value: int, which: int, inherit: bool) -> int:
    """``value``, or the hard limit this process holds on ``which`` where that is lower and ``inherit`` (the command
    inherits this process's limits): an unprivileged child cannot raise a hard limit, so ``prlimit`` failed ('failed
    to set the AS resource limit: Operation not permitted') and every rollout of a service started under a lower
    ``ulimit -v`` than ``sandbox.memory_mb`` was recorded as failed. The lower limit is the stricter one."""
    if not inherit:
        return value
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def prlimit_prefix(limits: Limits, prlimit: str = "prlimit", *, inherit: bool = True) -> list[str]:
    """``prlimit`` arguments that set the rlimits of ``limits`` and exec the command, each capped at this process's
    own hard limit when the command inherits it (``inherit``; not in a container, whose limits are the runtime's)."""
    mem = _within_hard(limits.memory_mb * 1024 * 1024, resource.RLIMIT_AS, inherit)
    fsize = _within_hard(limits.file_mb * 1024 * 1024, resource.RLIMIT_FSIZE, inherit)
    cpu_hard = _within_hard(limits.cpu_seconds + 2, resource.RLIMIT_CPU, inherit)
    cpu = min(limits.cpu_seconds, cpu_hard)
    pids = _within_hard(limits.pids, resource.RLIMIT_NPROC, inherit)
    return [prlimit, f"--as={mem}:{mem}", f"--cpu={cpu}:{cpu_hard}",
            f"--nproc={pids}:{pids}", f"--fsize={fsize}:{fsize}", "--core=0:0", "--"]


def _tail(path: Path) -> str:
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - TAIL_BYTES))
        return fh.read().decode("utf-8", errors="replace")


def classify(returncode: int, stderr: str, timed_out: bool, *, shell: bool) -> LimitHit | None:
    """Which limit ended the command, judged from its exit and its last words (``shell``: the status came
    through bwrap, a shell or a container runtime, where 128 + N may be signal N; see ``exit_words``)."""
    if timed_out:
        return "wall"
    if returncode == 0:
        return None
    sig = signal_in_status(returncode, shell=shell)
    if sig == signal.SIGXCPU:
        return "cpu"
    if sig == signal.SIGXFSZ or "File too large" in stderr:
        return "output"
    tail = stderr[-4000:]
    if any(m in tail for m in _MEMORY_MARKS):
        return "memory"
    if any(m in tail for m in _PIDS_MARKS):
        return "pids"
    return None


def run_limited(argv: list[str], *, env: dict[str, str], cwd: Path, limits: Limits, backend: str,
                shell_status: bool, pass_fds: tuple[int, ...] = ()) -> SandboxResult:
    """Run ``argv`` (already wrapped by the backend) and enforce the wall-time limit. ``shell_status``: the
    status ``argv`` exits with reports a child killed by signal N as 128 + N (bwrap, a shell)."""
    with tempfile.TemporaryDirectory(prefix="evoharness-out-") as tmp:
        out_path, err_path = Path(tmp, "stdout"), Path(tmp, "stderr")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            start = time.monotonic()
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                        cwd=cwd, start_new_session=True, close_fds=True, pass_fds=pass_fds)
            except OSError as e:
                raise InfraError(f"{backend}: cannot start {argv[0]}: {e.strerror}", retryable=False) from None
            timed_out = False
            try:
                proc.wait(timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            wall = time.monotonic() - start
        stdout, stderr = _tail(out_path), _tail(err_path)
    rc = proc.returncode
    return SandboxResult(returncode=rc, stdout=stdout, stderr=stderr, timed_out=timed_out,
                         limit=classify(rc, stderr, timed_out, shell=shell_status), wall_seconds=wall,
                         backend=backend, shell_status=shell_status)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def is_shell(program: str) -> bool:
    """Whether ``program`` is a POSIX shell (whose status for a child killed by signal N is 128 + N)."""
    return Path(program).name in ("sh", "bash", "dash", "ash", "zsh", "ksh")


def base_env(home: str, tmp: str, path: str) -> dict[str, str]:
    return {"PATH": path, "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "MALLOC_ARENA_MAX": "2"}  # glibc arenas reserve 64 MiB of address space per thread


def python_env() -> dict[str, str]:
    """``PYTHONPATH`` for a sandboxed Python worker: the folder holding the evoharness package this process runs,
    where that is not the interpreter's own install (a source checkout or an editable install). Only that package is
    bound in (``bwrap.python_paths``), and a worker started with the environment's allow-list found evoharness through
    the venv alone: run from another checkout (``PYTHONPATH=other/checkout evoharness run``) the venv's editable
    finder pointed at a folder the sandbox does not show, every rollout was 'worker did not start', recorded as
    the harness's failure (F2.harness_error)."""
    package = Path(evoharness.__file__).resolve().parent
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(package.is_relative_to(p) for p in prefixes):
        return {}
    return {"PYTHONPATH": str(package.parent)}


class ProcessSandbox:
    """No isolation: the command runs as a plain child process with rlimits and a wall limit.

    The environment is still an allow-list and HOME is an empty directory under ``workdir``,
    but the command can read the host file system and use the network. It exists to measure
    what bubblewrap costs and for machines without it; never use it for untrusted harnesses.
    The pids limit is RLIMIT_NPROC, which does not bind when running as root.
    """

    name = "none"

    def view(self, harness_dir: Path, workdir: Path) -> tuple[str, str]:
        return str(harness_dir), str(workdir)

    def check(self) -> None:
        if shutil.which("prlimit") is None:
            raise InfraError("prlimit (util-linux) not found on PATH", retryable=False)

    def run(self, command: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
            limits: Limits, sockets: Sequence[Path] = ()) -> SandboxResult:
        self.check()  # ``sockets`` need nothing: the host file system is visible as it is
        home, tmp = workdir / ".home", workdir / ".tmp"
        home.mkdir(exist_ok=True)
        tmp.mkdir(exist_ok=True)
        full_env = base_env(str(home), str(tmp), os.environ.get("PATH", "/usr/bin:/bin")) | python_env() | env
        # prlimit execs the command: its status is the command's own, unless the command is a shell
        return run_limited(prlimit_prefix(limits) + command, env=full_env, cwd=workdir, limits=limits,
                           backend=self.name, shell_status=is_shell(command[0]))
