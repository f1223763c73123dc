"""Limits that hold per sandbox, not per process: a cgroup, no nested user namespaces, a capped scratch.

rlimits bind each process alone: six processes could each hold the per-process memory limit, and a
nested user namespace could mount its own tmpfs past the /tmp and file-size limits. For bwrap:

- ``SandboxCgroup``: the sandbox's processes share one memory and pids cgroup (v2 when
  ``/sys/fs/cgroup`` has the memory and pids controllers, else the v1 ``memory`` and ``pids``
  hierarchies), capped at ``Limits.memory_mb`` and ``Limits.pids`` in total; tmpfs pages the sandbox
  writes (its /tmp, its scratch) are charged to it as well. Its counters say which limit ended the
  command. Without a writable cgroup file system the backend warns once and falls back to rlimits.
- ``no_userns_filter``: a seccomp filter (classic BPF, x86_64 and aarch64; on any other machine the
  bwrap backend refuses to run, fail closed) under which ``unshare`` and ``clone``
  with ``CLONE_NEWUSER`` fail with EPERM and ``clone3`` with ENOSYS (glibc then uses ``clone``), so the
  command cannot make a user namespace of its own (bwrap's ``--disable-userns`` needs a user
  namespace, which a root bwrap does not make); ``mq_open``, ``add_key``, ``request_key`` and ``keyctl``
  fail with EPERM (no POSIX message queues, no kernel keyrings: they would outlive a warm worker's
  rollout, see ``sandbox/warm.py``).
- ``capped_scratch``: the work directory the sandbox sees at ``/scratch`` is a tmpfs of
  ``Limits.scratch_mb`` (root only); what the command left there is copied back afterwards
  (regular files, directories, symlinks and FIFOs as such; the host reads outputs with ``O_NOFOLLOW``).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evoharness.logging import get_logger
from evoharness.sandbox.models import LimitHit, Limits

log = get_logger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("sandbox_limit_fallback", detail=message)


# ---- cgroups ------------------------------------------------------------------------------------

def _cgroup_layout() -> tuple[str, dict[str, Path]] | None:
    """("v2", {"": dir}) or ("v1", {"memory": dir, "pids": dir}) where a sandbox's cgroup can be made."""
    ctrl = CGROUP_ROOT / "cgroup.controllers"
    if ctrl.is_file():
        have = set(ctrl.read_text().split())
        own = CGROUP_ROOT / _own_v2_path()
        if {"memory", "pids"} <= have and _writable_dir(own):
            return "v2", {"": own}
        return None
    dirs = {c: CGROUP_ROOT / c / _own_v1_path(c).lstrip("/") for c in ("memory", "pids")}
    if all(_writable_dir(d) for d in dirs.values()):
        return "v1", dirs
    return None


def _own_v1_path(controller: str) -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(","):
                return path
    except OSError:
        pass
    return "/"


def _own_v2_path() -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:].lstrip("/")
    except OSError:
        pass
    return ""


def _writable_dir(path: Path) -> bool:
    probe = path / f"evoharness-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        probe.rmdir()
    except OSError:
        pass
    return True


_LAYOUT: tuple[str, dict[str, Path]] | None | bool = False


def cgroup_layout() -> tuple[str, dict[str, Path]] | None:
    global _LAYOUT
    if _LAYOUT is False:
        _LAYOUT = _cgroup_layout()
    return _LAYOUT  # type: ignore[return-value]


class SandboxCgroup:
    """One sandbox's cgroup(s): made with its limits, entered by ``prefix()``, read and removed after."""

    def __init__(self, layout: tuple[str, dict[str, Path]], limits: Limits) -> None:
        self.version, parents = layout
        name = f"evoharness-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.dirs = {c: p / name for c, p in parents.items()}
        # the counter files ``limit_hit`` reads, by name: their paths made once (joining and hashing a Path at each
        # read cost more than the read), their descriptors opened on the first call
        self._paths = ({"memory.events": str(self.dirs[""] / "memory.events"),
                        "pids.events": str(self.dirs[""] / "pids.events")} if self.version == "v2" else
                       {"memory.oom_control": str(self.dirs["memory"] / "memory.oom_control"),
                        "memory.failcnt": str(self.dirs["memory"] / "memory.failcnt"),
                        "pids.events": str(self.dirs["pids"] / "pids.events")})
        self._fds: dict[str, int] = {}
        mem, pids = limits.memory_mb * 1024 * 1024, limits.pids
        for d in self.dirs.values():
            d.mkdir()
        if self.version == "v2":
            d = self.dirs[""]
            _write(d / "memory.max", str(mem))
            _write(d / "memory.swap.max", "0", missing_ok=True)
            _write(d / "pids.max", str(pids))
        else:
            _write(self.dirs["memory"] / "memory.limit_in_bytes", str(mem))
            _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(mem), missing_ok=True)
            _write(self.dirs["pids"] / "pids.max", str(pids))

    def prefix(self) -> list[str]:
        """argv that puts itself into the cgroup(s), then execs the rest (children inherit it)."""
        procs = [str(d / "cgroup.procs") for d in self.dirs.values()]
        script = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; '
                  'exec "$@"')
        return ["/bin/sh", "-c", script, "cgroup-enter", str(len(procs)), *procs]

    def limit_hit(self) -> LimitHit | None:
        """``memory`` or ``pids`` when the cgroup refused memory or a process at some point.

        A warm worker asks after every rollout: the counter files are opened once, on the first call, and read
        again from their start each time (``os.pread``: the kernel writes them afresh on every read), by paths made
        once: ~5 us for the three of them (v1) against ~14 us with a Path joined and hashed at each read, and ~65 us
        opening, reading and closing them each time."""
        if self.version == "v2":
            ev = _events(self._counter("memory.events"))
            if ev.get("oom_kill", 0) or ev.get("max", 0) and ev.get("oom", 0):
                return "memory"
            if _events(self._counter("pids.events")).get("max", 0):
                return "pids"
            return None
        if _events(self._counter("memory.oom_control")).get("oom_kill", 0) or _int(self._counter("memory.failcnt")):
            return "memory"
        if _events(self._counter("pids.events")).get("max", 0):
            return "pids"
        return None

    def _counter(self, name: str) -> str:
        """The text of the cgroup's counter file ``name``, through a descriptor kept open ('' when unreadable)."""
        fd = self._fds.get(name)
        try:
            if fd is None:
                fd = self._fds[name] = os.open(self._paths[name], os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(fd, 4096, 0).decode("ascii", "replace")
        except OSError:
            return ""

    def _close_counters(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        """Kill what is left in the cgroup(s) and remove them."""
        self._close_counters()
        for d in self.dirs.values():
            for _ in range(50):
                pids = _pids(d)
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("cgroup_not_removed", path=str(d))


def _write(path: Path, value: str, missing_ok: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not missing_ok:
            raise
    except OSError:
        if not missing_ok:
            raise


def _int(text: str) -> int:
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return 0


def _events(text: str) -> dict[str, int]:
    """``key value`` lines as a dict (what it could read of them)."""
    out: dict[str, int] = {}
    try:
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v or 0)
    except ValueError:
        pass
    return out


def _pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


@contextmanager
def sandbox_cgroup(limits: Limits) -> Iterator[SandboxCgroup | None]:
    """The sandbox's cgroup, or None (with a warning, once) where cgroups cannot be made here."""
    layout = cgroup_layout()
    if layout is None:
        _warn_once("cgroup", "no writable memory+pids cgroup: memory and pids limits hold per process only")
        yield None
        return
    try:
        cg = SandboxCgroup(layout, limits)
    except OSError as e:
        _warn_once("cgroup", f"cannot make a cgroup ({e.strerror}): memory and pids limits hold per process only")
        yield None
        return
    try:
        yield cg
    finally:
        cg.close()


# ---- seccomp: no user namespaces ---------------------------------------------------------------

_CLONE_NEWUSER = 0x10000000
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
# per machine: the audit arch, the syscall numbers, whether another ABI shares the arch (x32 on x86_64)
_ARCHES = {
    "x86_64": (0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435, "mq_open": 240, "add_key": 248,
                            "request_key": 249, "keyctl": 250}, True),
    "aarch64": (0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435, "mq_open": 180, "add_key": 217,
                             "request_key": 218, "keyctl": 219}, False),
}
SECCOMP_MACHINES = tuple(_ARCHES)
# refused outright (EPERM): state that outlives a process and that a warm worker could not list to sweep
# between rollouts -- POSIX message queues (listing needs the mqueue file system mounted), kernel keyrings
# (the user keyring is per uid, shared by every rollout of a sandbox)
_REFUSED = ("mq_open", "add_key", "request_key", "keyctl")


def no_userns_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter (``struct sock_filter[]``) for ``machine`` (default: this one's), None for a
    machine it has no syscall table for (``SECCOMP_MACHINES``). It also refuses ``_REFUSED`` (EPERM):
    POSIX message queues and kernel keyrings outlive the process that made them and cannot be listed
    from inside, so a warm worker (``sandbox/warm.py``) could not sweep them between rollouts."""
    machine = machine or os.uname().machine
    if machine not in _ARCHES or sys.byteorder != "little":
        return None
    arch, nr, x32 = _ARCHES[machine]
    ld_w_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    # the x32 check (a syscall number with bit 30 set: refused) is one more instruction before the table
    skip = 1 if x32 else 0
    r = len(_REFUSED)
    prog = [
        (ld_w_abs, 0, 0, 4),                         # arch
        (jeq, 1, 0, arch),                           # this machine's ABI -> load the number
        (ret, 0, 0, _ERRNO | _EPERM),                # another ABI: refused
        (ld_w_abs, 0, 0, 0),                         # syscall number
        *([(jge, 7 + r, 0, 0x40000000)] if x32 else []),  # x32 ABI -> EPERM
        (jeq, 3 + r, 0, nr["unshare"]),              # -> check the flags
        (jeq, 2 + r, 0, nr["clone"]),                # -> check the flags
        (jeq, 5 + r, 0, nr["clone3"]),               # -> ENOSYS
        *[(jeq, 3 + r - i, 0, nr[name]) for i, name in enumerate(_REFUSED)],  # -> EPERM
        (ret, 0, 0, _ALLOW),
        (ld_w_abs, 0, 0, 16),                        # args[0], low 32 bits
        (jset, 1, 0, _CLONE_NEWUSER),                # CLONE_NEWUSER -> EPERM
        (ret, 0, 0, _ALLOW),
        (ret, 0, 0, _ERRNO | _EPERM),
        (ret, 0, 0, _ERRNO | _ENOSYS),
    ]
    assert len(prog) == 13 + r + skip
    return b"".join(struct.pack("<HBBI", *ins) for ins in prog)


@contextmanager
def seccomp_fd() -> Iterator[int | None]:
    """An open file descriptor holding ``no_userns_filter()`` (for ``bwrap --seccomp FD``), or None."""
    prog = no_userns_filter()
    if prog is None:  # fail closed: without the filter a sandbox could make its own user namespace
        from evoharness.errors import InfraError

        raise InfraError(f"sandbox backend unusable: no seccomp filter for {os.uname().machine} (has: "
                         f"{', '.join(SECCOMP_MACHINES)}), so bwrap cannot block nested user namespaces; "
                         "use the docker backend", retryable=False)
    with tempfile.TemporaryFile(prefix="evoharness-seccomp-") as fh:
        fh.write(prog)
        fh.flush()
        fh.seek(0)
        yield fh.fileno()


# ---- a size-capped scratch ---------------------------------------------------------------------

_MOUNT_OK: bool | None = None


def _can_mount() -> bool:
    global _MOUNT_OK
    if _MOUNT_OK is None:
        _MOUNT_OK = False
        if os.geteuid() == 0 and shutil.which("mount") and shutil.which("umount"):
            probe = Path(tempfile.mkdtemp(prefix="evoharness-mount-probe-"))
            try:
                ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                                    capture_output=True, timeout=10).returncode == 0
                if ok:
                    subprocess.run(["umount", str(probe)], capture_output=True, timeout=10)
                _MOUNT_OK = ok
            except (OSError, subprocess.TimeoutExpired):
                _MOUNT_OK = False
            finally:
                shutil.rmtree(probe, ignore_errors=True)
    return _MOUNT_OK


@contextmanager
def capped_scratch(workdir: Path, limits: Limits) -> Iterator[Path]:
    """A tmpfs of ``limits.scratch_mb`` holding a copy of ``workdir``, copied back into it afterwards;
    ``workdir`` itself (with a warning, once) where tmpfs cannot be mounted."""
    if not _can_mount():
        _warn_once("scratch", "cannot mount a tmpfs: /scratch is capped per file only (RLIMIT_FSIZE)")
        yield workdir
        return
    mnt = Path(tempfile.mkdtemp(prefix="evoharness-scratch-"))
    size = limits.scratch_mb * 1024 * 1024
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755,nosuid,nodev", "tmpfs",
                              str(mnt)], capture_output=True, timeout=30).returncode == 0
    if not mounted:
        shutil.rmtree(mnt, ignore_errors=True)
        _warn_once("scratch", "cannot mount a tmpfs: /scratch is capped per file only (RLIMIT_FSIZE)")
        yield workdir
        return
    try:
        _copy_tree(workdir, mnt)
        st = os.stat(workdir)
        os.chown(mnt, st.st_uid, st.st_gid)
        os.chmod(mnt, stat.S_IMODE(st.st_mode))
        yield mnt
        for entry in list(workdir.iterdir()):  # the sandbox's view is the truth now (it may have deleted)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        _copy_tree(mnt, workdir)
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30).returncode == 0:
                break
            time.sleep(0.05)
        else:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(mnt, ignore_errors=True)


def _copy_tree(src: Path, dst: Path) -> None:
    """Regular files, directories, symlinks (as links) and FIFOs (as FIFOs); nothing else; owners kept."""
    for root, dirs, files in os.walk(src, followlinks=False):
        rel = Path(root).relative_to(src)
        for name in dirs + files:
            s, d = Path(root) / name, dst / rel / name
            st = os.lstat(s)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(s), d)
            elif stat.S_ISDIR(st.st_mode):
                d.mkdir()
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(s, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as fin, open(d, "xb") as fout:
                    _copy_data(fin.fileno(), fout.fileno())
            elif stat.S_ISFIFO(st.st_mode):
                os.mkfifo(d)
            else:
                continue
            os.chown(d, st.st_uid, st.st_gid, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(d, stat.S_IMODE(st.st_mode))


def _copy_data(src: int, dst: int) -> None:
    """Copy the file ``src`` into the empty file ``dst``, its holes left holes: only what the file holds is written.
    A sparse file costs a tmpfs nothing beyond its data, so a sandbox could leave (under RLIMIT_FSIZE each, past the
    scratch cap in all) files of 256 MiB apparent size that held nothing, and copying them back wrote every zero to the
    host's disk: 8 such files, 0.2 s of the sandbox's time, were 1.6 GB written and ~14 s of the host's, past every
    limit. Where the file system cannot say where the data is (no SEEK_DATA), the whole file is copied."""
    size = os.fstat(src).st_size
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
            end = os.lseek(src, start, os.SEEK_HOLE)
        except OSError as e:
            if e.errno == errno.ENXIO:  # nothing but a hole from ``pos`` to the end
                break
            start, end = pos, size  # SEEK_DATA unsupported (EINVAL): the rest as it reads
        if end <= start:
            start, end = pos, size
        while start < end:
            chunk = os.pread(src, min(1 << 20, end - start), start)
            if not chunk:  # the file shrank meanwhile (nothing of the sandbox runs now: a guard all the same)
                end = size = start
                break
            written = 0
            while written < len(chunk):
                written += os.pwrite(dst, chunk[written:], start + written)
            start += len(chunk)
        pos = end
    os.ftruncate(dst, size)
