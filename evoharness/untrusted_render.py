"""Harness templates rendered on the host, in one child process with its own limits.

``dataset export --render-under`` (the CLI and the service's export route) renders a candidate's
``prompts/system.md`` once per record, on the host. The template is untrusted. The sandboxed
environment of ``untrusted.template_environment`` keeps it away from Python's internals and holds each
value it makes to ``MAX_RENDER_CHARS``, but a value is checked after it is made, loops over bounded
ranges can still be nested into hours of CPU, and Jinja folds constant filter calls while it compiles.
So the host never compiles or renders such a template itself: ``TemplateRenderer`` keeps one long-lived
child (``python -I``, working directory ``/``, no inherited descriptors, SIGINT ignored) that compiles
the template once and renders batches of records under

- ``RLIMIT_AS`` of ``RENDER_MEMORY_MB`` for the whole child: an allocation over it is a ``MemoryError``
  there (or the child's end), never the host's memory;
- ``RLIMIT_CPU``: ``RENDER_CPU_S`` more CPU-seconds for each render and for the compile (the kernel
  ends the child with SIGXCPU past it);
- a wall limit of ``RENDER_WALL_S`` per result, after which the host kills the child.

A render that hits a limit fails (``RenderFailed``, ``limit=True``); the child is started again and the
records after it render as before. After ``RENDER_MAX_HITS`` limit hits the renderer gives up: later
renders fail at once, without a child (a template that bombs on every record would otherwise cost the
CPU limit once per record). A template that does not compile (or whose compile hits a limit) fails
every render with that reason. ``datasets.prompts.SystemRenderer`` turns each failure into the raw-text
fallback and counts it.

Where bubblewrap works (the rollout sandbox's own check, ``BwrapSandbox.check``, and a seccomp filter for
this machine), the child runs inside a jail of the same kind as a rollout's (``BwrapSandbox.jail_argv``: no
network, read-only binds of what Python needs, no writable host path, a new session, its own pid namespace,
ended with its parent, as root another uid), so a template that escaped Jinja's sandbox would still run
code with no host file to write and no network to reach. Where it does not, the child runs as before (its
limits only); ``render_jail`` says why, logged once per process (``render.unjailed``), and each renderer
that started a child keeps it in ``unjailed`` (the export's summary, card and CLI line say it).

The host sends the child pickles (the child trusts the host); the child answers with one tagged UTF-8
frame per record (``O`` text, ``E`` error, ``L`` limit), which the host reads as text only.
"""

from __future__ import annotations

import math
import os
import pickle
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.errors import InfraError
from evoharness.logging import get_logger
from evoharness.untrusted import MAX_RENDER_CHARS

log = get_logger(__name__)

RENDER_MEMORY_MB = 512
RENDER_CPU_S = 2
RENDER_WALL_S = 30.0
RENDER_BATCH = 64
RENDER_MAX_HITS = 3
START_WALL_S = 30.0  # added to the wall limit of the first answer (the process starts, imports Jinja)

_ROOT = str(Path(__file__).resolve().parents[1])  # the directory evoharness is imported from
BWRAP = "bwrap"  # the bubblewrap program the render jail uses (``render_jail``)

_HEADER = struct.Struct(">I")
_MAX_FRAME = 4 * MAX_RENDER_CHARS + 1024  # a result is at most MAX_RENDER_CHARS characters of UTF-8


@dataclass(frozen=True)
class RenderLimits:
    """The child's limits (module constants by default, read when the renderer is made)."""

    memory_mb: int = field(default_factory=lambda: RENDER_MEMORY_MB)
    cpu_s: int = field(default_factory=lambda: RENDER_CPU_S)
    wall_s: float = field(default_factory=lambda: RENDER_WALL_S)
    batch: int = field(default_factory=lambda: RENDER_BATCH)
    max_hits: int = field(default_factory=lambda: RENDER_MAX_HITS)


class RenderFailed(Exception):
    """One record's render failed; ``limit`` when it hit a memory, CPU or wall limit."""

    def __init__(self, reason: str, limit: bool = False) -> None:
        self.reason = reason
        self.limit = limit
        super().__init__(reason)


class _Ended(RenderFailed):
    """The render process ended, or was killed, while an answer was awaited (not an answer of its own)."""


_jail_lock = threading.Lock()
_jail_checked: dict[str, tuple[Any, str]] = {}  # bwrap program -> (its BwrapSandbox or None, why not)


def render_jail() -> tuple[Any, str]:
    """``(BwrapSandbox, "")`` where the render process can run in a bubblewrap jail here, else ``(None, why
    not)``; checked once per process (per ``BWRAP``), and the fallback logged once."""
    with _jail_lock:
        if BWRAP not in _jail_checked:
            from evoharness.sandbox.bwrap import BwrapSandbox
            from evoharness.sandbox.containment import no_userns_filter

            sandbox: Any = BwrapSandbox(bwrap=BWRAP)
            why = ""
            if no_userns_filter() is None:
                why = f"no seccomp filter for {os.uname().machine}"
            else:
                try:
                    sandbox.check()
                    why = _jail_runs_python(sandbox)
                except InfraError as e:
                    why = str(e.args[0] if e.args else e).removeprefix("sandbox backend unusable: ")
                except (OSError, subprocess.SubprocessError) as e:
                    why = f"bwrap did not run: {e}"
            if why:
                sandbox = None
                log.warning("render.unjailed", reason=why,
                            detail="harness templates render in a plain child process (memory, CPU and wall "
                                   "limits only, as the service's user)")
            _jail_checked[BWRAP] = (sandbox, why)
        return _jail_checked[BWRAP]


def _jail_runs_python(sandbox: Any) -> str:
    """"" when the render process's interpreter starts in the jail and imports what it needs, else why not
    (a runtime the jail's uid cannot read, say: every render would otherwise fail and fall back)."""
    uid = sandbox._uids.take() if sandbox.privileged else None
    try:
        probe = _jail_popen(sandbox, [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {_ROOT!r}); "
                                      "import jinja2, evoharness.untrusted"],
                            uid, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, err = probe.communicate(timeout=START_WALL_S)
        except subprocess.TimeoutExpired:
            _reap(probe)
            return f"python did not start in the jail within {START_WALL_S:g} s"
    finally:
        if uid is not None:
            sandbox._uids.give(uid)
    if probe.returncode != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {probe.returncode}"]
        return f"python does not start in the jail: {tail[0][:200]}"
    return ""


def _jail_popen(sandbox: Any, command: list[str], uid: int | None, **streams: Any) -> subprocess.Popen:
    """``command`` started in ``sandbox.jail_argv`` (in its own session: a terminal's Ctrl-C reaches the export,
    which ends the render process by closing its input)."""
    from evoharness.sandbox.containment import no_userns_filter

    with tempfile.TemporaryFile(prefix="evoharness-seccomp-") as fh:
        fh.write(no_userns_filter())
        fh.flush()
        fh.seek(0)
        argv = sandbox.jail_argv(command, uid=uid, seccomp=fh.fileno())
        argv[0] = shutil.which(argv[0]) or argv[0]
        return subprocess.Popen(argv, cwd="/", close_fds=True, pass_fds=(fh.fileno(),), start_new_session=True,
                                env={"PATH": "/usr/bin:/bin"}, **streams)


class TemplateRenderer:
    """Renders one untrusted template with many sets of variables, in a limited child (see the module).

    ``constants`` are variables every render gets (sent once per child); ``render_many`` gives, for each
    set of variables, the text or a ``RenderFailed``. The child starts at the first render; ``close``
    (or leaving a ``with``) ends it. An ``InfraError`` when no child can be started at all."""

    def __init__(self, template: str, where: str, constants: dict[str, Any] | None = None,
                 limits: RenderLimits | None = None) -> None:
        self.template = template
        self.where = where
        self.constants = dict(constants or {})
        self.limits = limits or RenderLimits()
        self.limit_hits = 0
        self.restarts = 0
        self.broken: RenderFailed | None = None  # set when no later render can succeed
        self.jailed: bool | None = None  # whether the child runs in the bubblewrap jail; None before it starts
        self.unjailed = ""  # why it does not, when it does not
        self._uid: int | None = None  # the jail's uid (as root), one per renderer
        self._proc: subprocess.Popen | None = None
        self._buf = bytearray()

    def __enter__(self) -> TemplateRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def render_one(self, variables: dict[str, Any]) -> str:
        """The text, or ``RenderFailed``."""
        result = self.render_many([variables])[0]
        if isinstance(result, RenderFailed):
            raise result
        return result

    def render_many(self, variables: list[dict[str, Any]]) -> list[str | RenderFailed]:
        out: list[str | RenderFailed] = []
        alone = 0  # records to send one at a time: a process ended while they were unanswered (``_render_batch``)
        while len(out) < len(variables):
            if self.broken is not None:
                out.extend([self.broken] * (len(variables) - len(out)))
                break
            if self._proc is None and not self._start():
                continue  # ``broken`` is set
            batch = variables[len(out):len(out) + (1 if alone else self.limits.batch)]
            got = self._render_batch(batch)
            out.extend(got)
            alone = len(batch) - len(got) if len(got) < len(batch) else max(alone - len(got), 0)
        return out

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._give_uid()
        if proc is None:
            return
        try:
            proc.stdin.close()  # the child ends when its input does
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    # ---- the host's side of the pipe -------------------------------------------------------------

    def _child_code(self) -> str:
        """The Python the child runs (``python -I -c``); tests override it to probe the jail from inside."""
        return (f"import sys; sys.path.insert(0, {_ROOT!r}); "
                "from evoharness.untrusted_render import child_main; child_main()")

    def _start(self) -> bool:
        command = [sys.executable, "-I", "-c", self._child_code()]
        sandbox, self.unjailed = render_jail()
        self.jailed = sandbox is not None
        try:
            if sandbox is None:
                self._proc = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                    close_fds=True, env={"PATH": os.environ.get("PATH", "")})
            else:
                self._proc = self._start_jailed(sandbox, command)
        except OSError as e:
            raise InfraError(f"cannot start the template render process ({sys.executable}): {e}",
                             retryable=False) from None
        weakref.finalize(self, _reap, self._proc)  # a renderer dropped without ``close``
        self._buf.clear()
        lim = self.limits
        self._send(("compile", self.template, self.where, self.constants, lim.memory_mb, lim.cpu_s))
        result = self._result("compiling", self.limits.wall_s + START_WALL_S)
        if isinstance(result, RenderFailed):
            self.limit_hits += result.limit
            self.broken = result
            self._kill()
            return False
        return True

    def _start_jailed(self, sandbox: Any, command: list[str]) -> subprocess.Popen:
        if sandbox.privileged and self._uid is None:
            self._uid = sandbox._uids.take()
        return _jail_popen(sandbox, command, self._uid, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)

    def _give_uid(self) -> None:
        uid, self._uid = self._uid, None
        if uid is not None:
            sandbox, _ = render_jail()
            if sandbox is not None:
                sandbox._uids.give(uid)

    def _render_batch(self, batch: list[dict[str, Any]]) -> list[str | RenderFailed]:
        """The results of ``batch``, in order; of its first records only when the process ended (or was killed)
        with more than one of them unanswered. Which of those was running is not known then: answers are
        written by the batch and, while it runs, from a SIGALRM handler that a long C call holds off (a
        ``sum`` of lists, a sort: CPython checks no signals there), so earlier records may have rendered
        unsent. ``render_many`` sends the unanswered ones again one at a time, and only a record alone in the
        process when it ends is charged with the limit (before, the first unanswered record was, and the
        culprit again in the next process: one record that loops in C used up ``max_hits`` in one batch)."""
        self._send(("render", batch))
        out: list[str | RenderFailed] = []
        for i in range(len(batch)):
            result = self._result("rendering")
            if isinstance(result, _Ended) and len(batch) - i > 1:
                self._kill()
                self.restarts += 1
                return out
            out.append(result)
            if not (isinstance(result, RenderFailed) and result.limit):
                continue
            self.limit_hits += 1
            if self.limit_hits >= self.limits.max_hits:
                self.broken = RenderFailed(f"{self.limit_hits} renders hit a limit; the "
                                           f"rest are not rendered (last: {result.reason})", limit=True)
            elif self._proc is not None and self._proc.poll() is None and result.reason.startswith("memory"):
                continue  # the child caught its MemoryError and goes on with the batch
            self._kill()
            self.restarts += 1
            break  # the rest of the batch goes to a fresh child (or, broken, to none)
        return out

    def _send(self, message: tuple) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._proc.stdin.write(_HEADER.pack(len(data)) + data)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone; reading its result says why

    def _result(self, doing: str, wall_s: float | None = None) -> str | RenderFailed:
        """The child's next answer; a ``RenderFailed`` when it ends, overruns or says something odd."""
        wall_s = self.limits.wall_s if wall_s is None else wall_s
        deadline = time.monotonic() + wall_s
        fd = self._proc.stdout.fileno()
        poller = select.poll()  # not select(): a service may hold descriptors over FD_SETSIZE
        poller.register(fd, select.POLLIN)
        while True:
            if len(self._buf) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buf)
                if size > _MAX_FRAME or size == 0:
                    self._kill()
                    return _Ended(f"{doing}: the render process sent a malformed answer", limit=True)
                if len(self._buf) >= _HEADER.size + size:
                    frame = bytes(self._buf[_HEADER.size:_HEADER.size + size])
                    del self._buf[:_HEADER.size + size]
                    return _decode(frame, doing)
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                return _Ended(f"{doing}: over the {wall_s:g} s wall limit", limit=True)
            if not poller.poll(max(1, int(left * 1000))):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return _Ended(f"{doing}: {self._ended()}", limit=True)
            self._buf += chunk

    def _ended(self) -> str:
        proc = self._proc
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            rc = proc.returncode
        if self.jailed and rc is not None and rc > 128:  # bwrap reports a command ended by signal N as 128 + N
            rc = 128 - rc
        if rc == -signal.SIGXCPU:
            return f"over the {self.limits.cpu_s} CPU-second limit"
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return f"the render process ended by signal {name} (memory limit {self.limits.memory_mb} MiB)"
        return f"the render process ended (exit status {rc}; memory limit {self.limits.memory_mb} MiB)"

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _reap(proc)


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for f in (proc.stdin, proc.stdout):
        try:
            f.close()
        except OSError:
            pass


def _decode(frame: bytes, doing: str) -> str | RenderFailed:
    tag, body = frame[:1], frame[1:].decode("utf-8", "surrogatepass")
    if tag == b"O":
        return body
    if tag == b"E":
        return RenderFailed(body[:300])
    if tag == b"L":
        return RenderFailed(body[:300], limit=True)
    return RenderFailed(f"{doing}: the render process sent a malformed answer", limit=True)


# ---- the child ---------------------------------------------------------------------------------

class _Answers:
    """The child's answers, written in one go per batch, and every ``FLUSH_S`` while a batch runs (from a
    SIGALRM handler): a render that runs long, and may never end, is mostly not holding back the answers of
    the records before it. Not always -- the handler waits for a long C call to return -- so the host does
    not rely on it to know which record was running when the process ended (``_render_batch``). The handler and
    the batch's end never both write the same answers: ``busy`` is set while one of them does (the handler
    runs between the bytecodes of this one thread, to completion)."""

    FLUSH_S = 0.05

    def __init__(self) -> None:
        self.pending: list[bytes] = []
        self.busy = False

    def __call__(self, tag: bytes, text: str) -> None:
        data = tag + text.encode("utf-8", "surrogatepass")
        self.pending.append(_HEADER.pack(len(data)) + data)

    def flush(self, *_: object) -> None:
        if self.busy or not self.pending:
            return
        self.busy = True
        try:
            data = memoryview(b"".join(self.pending))
            self.pending.clear()
            while data:
                data = data[os.write(1, data):]
        finally:
            self.busy = False


def child_main() -> None:
    """The render process: read frames on stdin, answer on stdout, until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    answer = _Answers()
    signal.signal(signal.SIGALRM, answer.flush)

    def read() -> Any:
        head = stdin.read(_HEADER.size)
        if len(head) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack(head)
        return pickle.loads(stdin.read(size))

    message = read()
    if message is None or message[0] != "compile":
        return
    _, text, where, constants, memory_mb, cpu_s = message
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    def budget() -> None:  # ``cpu_s`` more CPU-seconds from now (the soft limit; SIGXCPU past it)
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(used.ru_utime + used.ru_stime + cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))

    budget()
    template = _compile(text, where, memory_mb, answer)
    answer.flush()
    if template is None:
        return
    while (message := read()) is not None:
        signal.setitimer(signal.ITIMER_REAL, answer.FLUSH_S, answer.FLUSH_S)
        for variables in message[1]:
            budget()
            _render(template, {**constants, **variables}, memory_mb, answer)
        signal.setitimer(signal.ITIMER_REAL, 0)
        answer.flush()


def _compile(text: str, where: str, memory_mb: int, answer: Any) -> Any:
    from jinja2 import TemplateError

    from evoharness.errors import InputError
    from evoharness.untrusted import check_template, template_environment

    try:
        check_template(text, where)
        template = template_environment().from_string(text)
    except InputError as e:
        answer(b"E", e.reason)
        return None
    except MemoryError:
        answer(b"L", f"memory: compiling went over the {memory_mb} MiB memory limit")
        return None
    except (TemplateError, RecursionError, ValueError, TypeError, ArithmeticError, LookupError) as e:
        answer(b"E", f"template does not compile: {type(e).__name__}: {e}"[:300])
        return None
    answer(b"O", "")
    return template


def _render(template: Any, variables: dict[str, Any], memory_mb: int, answer: Any) -> None:
    try:
        parts, size = [], 0
        for piece in template.generate(**variables):
            size += len(piece)
            if size > MAX_RENDER_CHARS:
                answer(b"E", f"template renders over {MAX_RENDER_CHARS} characters")
                return
            parts.append(piece)
        text = "".join(parts)
    except MemoryError:
        parts = None  # noqa: F841 -- frees what was made before answering
        answer(b"L", f"memory: the render went over the {memory_mb} MiB memory limit")
        return
    except Exception as e:  # noqa: BLE001 -- TemplateError (and the sandbox's SecurityError), TypeError ...
        answer(b"E", f"template does not render: {type(e).__name__}: {e}"[:300])
        return
    answer(b"O", text)
