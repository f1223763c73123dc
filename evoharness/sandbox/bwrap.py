"""The bubblewrap backend: no network, read-only system and harness, a private /tmp, limits.

Layout inside the sandbox: the host's /usr (and its /bin, /lib* links), a few /etc files,
the Python installation and virtual environment, the evoharness source -- all read-only; the
harness at ``/harness`` read-only; the work directory at ``/scratch`` (writable); a private
tmpfs ``/tmp`` that is also HOME; the Unix sockets passed as ``sockets`` (the model gateway's) at their
host paths, each alone. No host environment variable reaches the command.

Running as root, bwrap makes no user namespace: the command gets CAP_SETUID/CAP_SETGID only to
drop at once (``setpriv``) to an unprivileged uid picked for this run alone, so RLIMIT_NPROC
(which never binds root) bounds its processes, and no-new-privs forbids regaining any. As an
ordinary user, bwrap makes a user namespace, where RLIMIT_NPROC counts per namespace.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import evoharness
from evoharness.errors import InfraError
from evoharness.sandbox.base import base_env, prlimit_prefix, python_env, run_limited
from evoharness.sandbox.containment import capped_scratch, sandbox_cgroup, seccomp_fd
from evoharness.sandbox.models import Limits, SandboxResult
from evoharness.sandbox.warm import LiveSandbox

HARNESS_MOUNT = "/harness"
WORK_MOUNT = "/scratch"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "alternatives",
              "ssl", "mime.types")


def python_paths() -> list[Path]:
    """What a Python worker needs read-only: the interpreter, the venv and the evoharness source."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
             Path(os.path.realpath(sys.executable)).parent, Path(evoharness.__file__).resolve().parent]
    return [p.resolve() for p in paths]


class _UidPool:
    """Distinct unprivileged uids for concurrent sandboxes (so each one's NPROC count is its own)."""

    def __init__(self, base: int, span: int) -> None:
        self.base, self.span = base, span
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            while True:
                uid = self.base + random.randrange(self.span)
                if uid not in self._used:
                    self._used.add(uid)
                    return uid

    def give(self, uid: int) -> None:
        with self._lock:
            self._used.discard(uid)


class BwrapSandbox:
    """Bubblewrap sandbox (see the module docstring for what is visible inside).

    ``ro_paths``: extra host paths bound read-only at the same place (e.g. a data directory).
    ``python_runtime``: bind the current interpreter, venv and evoharness source (the worker
    needs them); switch off only for commands that need no Python.
    """

    name = "bwrap"

    def __init__(self, *, ro_paths: list[Path] | tuple[Path, ...] = (), python_runtime: bool = True,
                 bwrap: str = "bwrap", uid_base: int = 200_000, uid_span: int = 100_000) -> None:
        self.bwrap = bwrap
        self.privileged = os.geteuid() == 0
        extra = [Path(p).resolve() for p in ro_paths]
        self.ro_paths = _dedupe((python_paths() if python_runtime else []) + extra)
        self._python_env = python_env() if python_runtime else {}
        self._links = _venv_links(self.ro_paths) if python_runtime else []
        self._uids = _UidPool(uid_base, uid_span)
        self._checked = False
        self._check_lock = threading.Lock()

    def view(self, harness_dir: Path, workdir: Path) -> tuple[str, str]:
        return HARNESS_MOUNT, WORK_MOUNT

    # ---- availability ----------------------------------------------------------------------

    def check(self) -> None:
        """Raise InfraError unless bwrap (and prlimit, setpriv) exist and a trivial sandbox runs."""
        with self._check_lock:
            if self._checked:
                return
            tools = [self.bwrap, "prlimit"] + (["setpriv"] if self.privileged else [])
            missing = [t for t in tools if shutil.which(t) is None]
            if missing:
                raise InfraError(f"sandbox backend unusable: {', '.join(missing)} not found "
                                 "(install bubblewrap and util-linux)", retryable=False)
            argv = [self.bwrap, *self._namespace_args(), "--ro-bind", "/usr", "/usr", *self._system_links(),
                    "--", "true"]
            probe = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
            if probe.returncode != 0:
                raise InfraError(f"sandbox backend unusable: bwrap failed: {probe.stderr.strip()[:300]}",
                                 retryable=False)
            self._checked = True

    # ---- running ---------------------------------------------------------------------------

    def run(self, command: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
            limits: Limits, sockets: Sequence[Path] = ()) -> SandboxResult:
        """Run ``command``; memory and pids are capped for the sandbox as a whole where a cgroup can be
        made, no user namespace can be made inside, and /scratch is a capped tmpfs (``containment``)."""
        self.check()
        uid = self._uids.take() if self.privileged else None
        try:
            with sandbox_cgroup(limits) as cg, seccomp_fd() as sfd, capped_scratch(Path(workdir), limits) as scratch:
                if uid is not None:
                    _chown_tree(scratch, uid)
                argv = self.argv(command, harness_dir=Path(harness_dir), workdir=scratch, limits=limits,
                                 uid=uid, sockets=sockets, seccomp=sfd)
                if cg is not None:
                    argv = cg.prefix() + argv
                full_env = base_env("/tmp", "/tmp", self._path()) | {"USER": "sandbox", "LOGNAME": "sandbox"} \
                    | self._python_env | env
                result = run_limited(argv, env=full_env, cwd=Path(workdir), limits=limits, backend=self.name,
                                     shell_status=True, pass_fds=(sfd,) if sfd is not None else ())
                if cg is not None and not result.ok and result.limit in (None, "memory", "pids", "wall"):
                    hit = cg.limit_hit()
                    # past the wall a memory hit is named too (a fork bomb's pids hit is the wall's own story)
                    if hit is not None and (result.limit != "wall" or hit == "memory"):
                        result = result.model_copy(update={"limit": hit})
                return result
        finally:
            if uid is not None:
                self._uids.give(uid)

    def start(self, command: list[str], *, harness_dir: Path, workdir: Path, env: dict[str, str],
              limits: Limits, sockets: Sequence[Path] = ()) -> LiveSandbox:
        """Start ``command`` and leave it running (a warm worker, ``sandbox/warm.py``): its stdin and stdout
        are pipes, its stderr a file. The same isolation and limits as ``run`` (cgroup, seccomp, capped
        /scratch, its own uid), except the wall-time limit, which the caller enforces per request.

        ``workdir`` is the sandbox's /scratch; it stays owned by this process and world-readable, so the
        command (another uid as root) writes only inside the subdirectories the caller hands it
        (``LiveSandbox.own``), and cannot swap one for a symlink. ``LiveSandbox.scratch`` is where the
        host sees /scratch while the sandbox runs."""
        self.check()
        stack = ExitStack()
        try:
            uid = self._uids.take() if self.privileged else None
            if uid is not None:
                stack.callback(self._uids.give, uid)
            Path(workdir).chmod(0o755)
            cg = stack.enter_context(sandbox_cgroup(limits))
            sfd = stack.enter_context(seccomp_fd())
            scratch = stack.enter_context(capped_scratch(Path(workdir), limits))
            argv = self.argv(command, harness_dir=Path(harness_dir), workdir=scratch, limits=limits, uid=uid,
                             sockets=sockets, seccomp=sfd)
            if cg is not None:
                argv = cg.prefix() + argv
            full_env = base_env("/tmp", "/tmp", self._path()) | {"USER": "sandbox", "LOGNAME": "sandbox"} \
                    | self._python_env | env
            err = stack.enter_context(tempfile.TemporaryFile(prefix="evoharness-warm-stderr-"))
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=full_env,
                                        cwd=Path(workdir), start_new_session=True, close_fds=True,
                                        pass_fds=(sfd,) if sfd is not None else ())
            except OSError as e:
                raise InfraError(f"{self.name}: cannot start {argv[0]}: {e.strerror}", retryable=False) from None
        except BaseException:
            stack.close()
            raise
        return LiveSandbox(proc, scratch=scratch, uid=uid, stderr=err, cleanup=stack,
                           limit_hit=cg.limit_hit if cg is not None else None, backend=self.name)

    def argv(self, command: list[str], *, harness_dir: Path, workdir: Path, limits: Limits,
             uid: int | None, sockets: Sequence[Path] = (), seccomp: int | None = None) -> list[str]:
        """The full bwrap command line (exposed for inspection and tests); ``seccomp``: an open file
        descriptor with the compiled filter (``containment.no_userns_filter``)."""
        a, made = self._system_args(seccomp, limits.tmp_mb)
        for sock in sockets:  # the socket file alone, read-only (connect() needs no write access to the mount)
            sock = Path(sock)
            if not sock.is_socket():
                raise InfraError(f"bwrap: {sock} is not a Unix socket", retryable=False)
            a += _parents(sock, made) + ["--ro-bind", str(sock), str(sock)]
        a += ["--ro-bind", str(harness_dir.resolve()), HARNESS_MOUNT,
              "--bind", str(workdir.resolve()), WORK_MOUNT, "--chdir", WORK_MOUNT]
        inner = prlimit_prefix(limits)
        if uid is not None:
            a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            inner = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                     "--no-new-privs", "--"] + inner
        else:
            inner = ["setpriv", "--no-new-privs", "--"] + inner if shutil.which("setpriv") else inner
        return a + ["--"] + inner + command

    def jail_argv(self, command: list[str], *, uid: int | None, seccomp: int, tmp_mb: int = 16,
                  nproc: int = 64) -> list[str]:
        """A bwrap command line for a command that needs only the Python runtime and its own pipes (the
        host's template render process, ``untrusted_render``): the namespaces, seccomp filter, new session,
        die-with-parent, read-only system and Python binds and privilege drop of ``argv``, but no harness,
        no /scratch, no socket and no writable host path (a private ``/tmp`` of ``tmp_mb``); the working
        directory is ``/``. As root the command runs as ``uid`` with at most ``nproc`` processes (the uid
        is its own, so the count is too)."""
        a, _ = self._system_args(seccomp, tmp_mb)
        a += ["--chdir", "/"]
        if uid is not None:
            a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            inner = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                     "--no-new-privs", "--", "prlimit", f"--nproc={nproc}", "--"]
        else:
            inner = ["setpriv", "--no-new-privs", "--"] if shutil.which("setpriv") else []
        return a + ["--"] + inner + command

    def _system_args(self, seccomp: int | None, tmp_mb: int) -> tuple[list[str], set[str]]:
        """What every bwrap command line here starts with (``argv`` and ``jail_argv`` alike): the namespaces,
        the seccomp filter, new session, die-with-parent, /proc, /dev, a private ``/tmp`` of ``tmp_mb``, and
        read-only /usr, system links, /etc files and ``ro_paths``; with the mount points made so far."""
        a = [self.bwrap, *self._namespace_args(), *(["--seccomp", str(seccomp)] if seccomp is not None else []),
             "--die-with-parent", "--new-session", "--hostname", "sandbox",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
             "--ro-bind", "/usr", "/usr", *self._system_links()]
        for name in _ETC_FILES:
            if os.path.exists(f"/etc/{name}"):
                a += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        made: set[str] = {"/", "/usr", "/tmp", "/etc", "/proc", "/dev"}
        for p in self.ro_paths:
            a += _parents(p, made) + ["--ro-bind", str(p), str(p)]
        for link, target in self._links:
            a += _parents(link, made) + ["--symlink", str(target), str(link)]
            made.add(str(link))
        return a, made

    def _namespace_args(self) -> list[str]:
        ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        return ns if self.privileged else ["--unshare-user", *ns]

    def _system_links(self) -> list[str]:
        out: list[str] = []
        for d in _SYSTEM_DIRS[1:]:
            if os.path.islink(d):
                out += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                out += ["--ro-bind", d, d]
        return out

    def _path(self) -> str:
        bins = [str(Path(sys.prefix) / "bin")] if any(Path(sys.prefix).resolve() == p for p in self.ro_paths) else []
        return ":".join(bins + ["/usr/local/bin", "/usr/bin", "/bin"])


def _venv_links(bound: list[Path]) -> list[tuple[Path, Path]]:
    """(link, target) for an interpreter prefix reached through a symlink (a worktree's ``.venv`` linking
    another checkout's): bound at its real path only, ``sys.executable`` as the host spells it -- what an
    agent command written with it names -- was "not found" in the sandbox. Only a last path component that
    is the link, outside every bound path, is made (a link deeper in the path is left as it was)."""
    out: list[tuple[Path, Path]] = []
    for raw in {Path(os.path.abspath(p)) for p in (sys.prefix, sys.exec_prefix)}:
        target = raw.resolve()
        if raw == target or not raw.is_symlink() or raw.parent.resolve() != raw.parent:
            continue
        if target in bound and not any(raw == b or b in raw.parents for b in bound) \
                and not str(raw).startswith(("/usr/", "/proc/", "/dev/", "/etc/")):
            out.append((raw, target))
    return sorted(out)


def _dedupe(paths: list[Path]) -> list[Path]:
    """Drop duplicates and paths inside another listed path; keep a stable order."""
    out: list[Path] = []
    for p in sorted(set(paths), key=lambda x: len(x.parts)):
        if p.exists() and not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def _parents(path: Path, made: set[str]) -> list[str]:
    """``--dir`` arguments creating the (world-traversable) parents of ``path`` inside the sandbox."""
    args: list[str] = []
    for parent in reversed(path.parents):
        s = str(parent)
        if s not in made:
            made.add(s)
            args += ["--perms", "0755", "--dir", s]
    return args


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.chown(dirpath, uid, uid)
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
