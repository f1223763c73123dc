"""Data of one sandboxed command: the limits it runs under and what came back."""

from __future__ import annotations

import signal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LimitHit = Literal["wall", "cpu", "memory", "pids", "output"]


class Limits(BaseModel):
    """Resource limits for one sandboxed command (a rollout).

    ``memory_mb`` is an address-space limit (RLIMIT_AS) per process and, with bwrap where a cgroup can
    be made, also the sandbox's total memory; ``pids`` bounds the processes and threads the command may
    have at once (a cgroup's pids.max with bwrap, else RLIMIT_NPROC), ``cpu_seconds`` is CPU time per
    process (RLIMIT_CPU), ``wall_seconds`` is enforced by killing the whole sandbox.
    """

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    cpu_seconds: int = Field(120, ge=1, description="CPU seconds per process (RLIMIT_CPU).")
    memory_mb: int = Field(3072, ge=16, description="Address space per process in MiB (RLIMIT_AS).")
    pids: int = Field(64, ge=1, description="Processes + threads the command may hold at once.")
    wall_seconds: float = Field(300.0, gt=0, description="Wall-clock limit; the sandbox is killed past it.")
    file_mb: int = Field(256, ge=1, description="Largest file the command may write, in MiB (RLIMIT_FSIZE).")
    tmp_mb: int = Field(256, ge=1, description="Size of the private /tmp (tmpfs), in MiB.")
    scratch_mb: int = Field(512, ge=1, description="Size of /scratch (the work directory) in all, in MiB "
                            "(bwrap as root: a tmpfs; elsewhere only each file is capped, by file_mb).")


class SandboxResult(BaseModel):
    """What one sandboxed command did. ``limit`` names the limit it hit, if one was: ``memory`` with ``timed_out``
    for a command that hit the memory limit (something in it OOM-killed) and then ran on to the wall limit."""

    returncode: int = Field(description="exit status; negative = killed by that signal")
    shell_status: bool = Field(False, description="the status came through bwrap, a shell or a container "
                               "runtime, which report a child killed by signal N as 128 + N: a status above 128 "
                               "is then that or a plain exit (False: the process's own status)")
    stdout: str = Field("", description="tail of standard output")
    stderr: str = Field("", description="tail of standard error")
    timed_out: bool = False
    limit: LimitHit | None = None
    wall_seconds: float = Field(0.0, description="seconds the host waited for the command: to its end, or past the "
                                "wall limit to the kill (a silent warm worker: the limit and the answer grace)")
    memory_unknown: bool = Field(False, description="whether the memory limit was hit could not be told (a Docker "
                                 "engine whose cgroup OOM count and inspect were both unreadable): ``limit`` then "
                                 "names what else is known, never memory, and the reason says it is unknown")
    backend: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.limit is None

    def reason(self) -> str:
        """One line saying why the command failed ('' when it did not)."""
        if self.ok:
            return ""
        unknown = " (whether the memory limit was hit is unknown)" if self.memory_unknown else ""
        if self.timed_out:  # a memory limit hit before it is named too (``limit``: the backend found both)
            before = f" (the {self.limit} limit was hit before it)" if self.limit not in (None, "wall") else unknown
            return f"wall-time limit hit, ended after {self.wall_seconds:.1f}s{before}"
        if self.limit:
            return f"{self.limit} limit hit, {exit_words(self.returncode, shell=self.shell_status)}"
        last = next((ln for ln in reversed(self.stderr.splitlines()) if ln.strip()), "")
        return exit_words(self.returncode, shell=self.shell_status) + unknown + (f": {last[:300]}" if last else "")


def exit_words(returncode: int | None, *, shell: bool = False) -> str:
    """An exit status in words: ``exit 3``; ``killed by SIGSEGV`` for a negative status (killed by that
    signal, as ``subprocess`` and ``os.waitstatus_to_exitcode`` give it).

    ``shell``: the status came through bwrap, a shell or a container runtime, which report a child killed by
    signal N as 128 + N, so a status above 128 is either: ``exit 139 (killed by SIGSEGV, or exited 139)``.
    Without it the status is the process's own and ``exit 130`` is only that (a process that exits 130 was
    not killed by SIGINT)."""
    if returncode is None:
        return "no exit status"
    if returncode < 0:
        return f"killed by {_signal_name(-returncode)}"
    name = signal_in_status(returncode, shell=shell)
    return f"exit {returncode}" + (f" (killed by {_signal_name(name)}, or exited {returncode})" if name else "")


def signal_in_status(returncode: int, *, shell: bool) -> int | None:
    """The signal a status may stand for: -N is signal N; with ``shell`` (see ``exit_words``) 128 + N may be."""
    if returncode < 0:
        return -returncode
    if shell and 128 < returncode < 128 + signal.NSIG:
        return returncode - 128
    return None


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"

