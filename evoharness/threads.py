"""Thread starts that give up when the new thread dies before it has started.

CPython's ``Thread.start`` waits, with no timeout, for the new thread to say it has started. A new thread that
runs out of memory before it says so (a ``MemoryError`` while the interpreter calls its bootstrap, printed as
"Exception ignored in thread started by: ...") leaves the starting thread waiting forever: CPython issue
gh-140746, open as of Python 3.14. Under an address-space limit (``ulimit -v``) ``evoharness rollout`` hung there,
starting its model gateway's thread, until it was killed; any thread pool (the rollout pool, LangGraph's, the
service's) can hang the same way.

``guard_thread_starts()`` makes every later ``Thread.start`` of the process raise ``MemoryError`` in that case:
the new thread's bootstrap is a bound method the interpreter holds until the thread ends, so when it is freed
before the thread said it started, the thread is gone and will never say so. The CLI's ``main`` installs it;
so does the service's app factory.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import weakref

_ORIGINAL_START = threading.Thread.start
_POLL_S = 0.05  # how often a waiting start looks whether the new thread is gone (a healthy start takes microseconds)


class ThreadDiedStarting(MemoryError):
    """A new thread ended before it started running: out of memory in its bootstrap (CPython gh-140746)."""


class _Started(threading.Event):
    """A thread's ``_started`` event while it is being started: ``wait()`` gives up when the thread's bootstrap
    was freed before the event was set (the thread is gone)."""

    def __init__(self, thread: threading.Thread, bootstrap) -> None:
        super().__init__()
        self._thread = thread
        self._bootstrap = weakref.ref(bootstrap)

    def wait(self, timeout: float | None = None) -> bool:
        thread, self._thread = self._thread, None
        if thread is None or timeout is not None:  # any later wait (none in CPython): as Event does
            return super().wait(timeout)
        vars(thread).pop("_bootstrap", None)  # the new thread holds the bootstrap now; only it
        del thread
        while not super().wait(_POLL_S):
            if self._bootstrap() is None and not self.is_set():
                raise ThreadDiedStarting("a new thread ran out of memory before it started")
        return True


_HOLD = threading.RLock()  # one start at a time puts its _HeldStderr in sys.stderr
# the interpreter's report of a thread that died starting, and of its hook failing to write it for want of memory
_REPORT = ("Exception ignored in thread started by", "Exception ignored in sys.unraisablehook")


class _HeldStderr:
    """``sys.stderr`` while a guarded start waits: what a thread that was not there when the start began writes (the
    thread being started: the one that dies starting prints the interpreter's report there) is held; every other
    thread's writes (``known``: the idents ``threading.enumerate()`` gave just before the start), and every other
    attribute (``fileno``, ``isatty``, ``buffer``, ``flush``), go to the stream it stands for, at once. After the
    start it passes everything through (``done``). A ``redirect_stderr`` entered by another thread while the start
    waited puts this object back in ``sys.stderr`` when it leaves, after the start: its next write puts the stream it
    stands for back there instead (``sys.stderr is sys.__stderr__`` again), and writes through.

    Until 2026-12-06 the start put a ``StringIO`` there for every thread: another thread's lines were held back,
    ``sys.stderr.fileno()`` raised ``UnsupportedOperation``, and such a ``redirect_stderr`` left the ``StringIO`` in
    ``sys.stderr`` for good, every later line lost. Until 2026-12-07 it asked threading's private ``_active`` table
    which threads were registered, and such a redirect left this object in ``sys.stderr`` for the process's life."""

    def __init__(self, shown, known: frozenset[int]) -> None:
        self.shown, self.known, self.held, self.done = shown, known, io.StringIO(), False

    def write(self, text: str) -> int:
        if self.done:
            if sys.stderr is self:  # put back by a redirect_stderr left after the start: the plain stream again
                sys.stderr = self.shown
        elif threading.get_ident() not in self.known:
            return self.held.write(text)
        return self.shown.write(text)

    def __getattr__(self, name: str):
        return getattr(self.shown, name)


def _start(self: threading.Thread) -> None:
    if self._started.is_set() or "_bootstrap" in vars(self) or not isinstance(self._started, threading.Event):
        return _ORIGINAL_START(self)  # started twice (CPython says so), or a thread this guard does not know
    bootstrap = self._bootstrap  # a new bound method: the one object the new thread holds while it lives
    self._bootstrap = bootstrap
    self._started = _Started(self, bootstrap)
    del bootstrap
    with _HOLD:
        # the new thread's stderr is held while it starts: a thread that dies starting has the interpreter print its
        # report there ("Exception ignored in thread started by: ..." and a traceback), which beside the error
        # line the caller prints for the MemoryError raised here only repeated it, as a traceback
        shown = sys.stderr
        stderr = sys.stderr = _HeldStderr(shown, frozenset(t.ident for t in threading.enumerate()))
        died = False
        try:
            _ORIGINAL_START(self)
        except ThreadDiedStarting:
            died = True
            with threading._active_limbo_lock:  # CPython leaves the dead thread in its limbo (enumerate() lists it)
                threading._limbo.pop(self, None)
            raise
        finally:
            vars(self).pop("_bootstrap", None)
            stderr.done = True
            if sys.stderr is stderr:
                sys.stderr = shown
            if text := stderr.held.getvalue():  # what the new thread wrote is kept, less its report when it died
                with contextlib.suppress(Exception):
                    shown.write(_without_report(text) if died else text)
                    shown.flush()


def _without_report(text: str) -> str:
    """``text`` less the interpreter's report of a thread that died starting: its first line (``_REPORT``), the
    traceback's indented lines and header, and the exception's line."""
    kept, lines, i = [], text.splitlines(keepends=True), 0
    while i < len(lines):
        if not lines[i].startswith(_REPORT):
            kept.append(lines[i])
            i += 1
            continue
        i += 1
        while i < len(lines) and (lines[i].startswith((" ", "\t")) or lines[i].startswith("Traceback ")):
            i += 1
        i += 1  # the exception's own line (MemoryError)
    return "".join(kept)


def guard_thread_starts() -> None:
    """Make ``Thread.start`` raise ``ThreadDiedStarting`` (a ``MemoryError``) where it waited forever. Idempotent;
    changes nothing where CPython's ``Thread`` lacks the parts it relies on (``_bootstrap``, ``_started``).

    The dying thread's own report ("Exception ignored in thread started by: ...") is left out: each start holds
    what the new thread writes to ``sys.stderr`` (``_HeldStderr``, one start at a time; other threads write through)
    while it waits, and writes it back after, less that report when the thread died.
    (A ``sys.unraisablehook`` that would leave it out is itself a call that fails for
    want of memory there: "Exception ignored in sys.unraisablehook", one more line.)"""
    if not hasattr(threading.Thread, "_bootstrap"):
        return
    if not isinstance(getattr(threading.current_thread(), "_started", None), threading.Event):
        return
    threading.Thread.start = _start
