"""evoharness.threads: a thread that dies as it starts (out of memory in its bootstrap, CPython gh-140746) makes
``Thread.start`` raise instead of waiting forever; and a command that runs out of memory exits with one `error:`
line instead of hanging."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.threads import ThreadDiedStarting, guard_thread_starts
from tests.modules import load_file

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fuzz_cli.py"


class _DiesStarting(threading.Thread):
    """What a MemoryError in the new thread's bootstrap does: the thread ends before it says it has started."""

    def _bootstrap_inner(self):
        raise MemoryError


def _start_within(thread: threading.Thread, seconds: float) -> BaseException | None:
    """What ``thread.start()`` raised (None: nothing), failing the test when it is still waiting after ``seconds``."""
    raised: list[BaseException | None] = []

    def start():
        try:
            thread.start()
            raised.append(None)
        except BaseException as e:  # noqa: BLE001 -- the outcome under test
            raised.append(e)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    starter.join(seconds)
    assert not starter.is_alive(), f"Thread.start() still waiting after {seconds} s"
    return raised[0]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dying thread's report
def test_a_thread_that_dies_as_it_starts_makes_start_raise_not_wait_forever():
    guard_thread_starts()
    thread = _DiesStarting(target=lambda: None, daemon=True)
    with contextlib.redirect_stderr(io.StringIO()):
        raised = _start_within(thread, 10)
    assert isinstance(raised, ThreadDiedStarting) and isinstance(raised, MemoryError)
    assert thread not in threading.enumerate()  # CPython left it in its limbo


def test_guarded_threads_still_run_and_start_once():
    guard_thread_starts()
    guard_thread_starts()  # twice: still one guard
    ran = []
    thread = threading.Thread(target=ran.append, args=(1,))
    assert _start_within(thread, 10) is None
    thread.join(10)
    assert ran == [1] and not thread.is_alive()
    assert "_bootstrap" not in vars(thread)
    with pytest.raises(RuntimeError, match="only be started once"):
        thread.start()


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc for the child's address-space limit")
def test_a_rollout_out_of_memory_exits_with_one_error_line_not_a_hang(tmp_path):
    """scripts/fuzz_cli.py saw `rollout` hang after "Exception ignored ... MemoryError" under a low RLIMIT_AS: the
    model gateway's Thread.start waited forever for a thread that had died starting. Here the child (forked from a
    process that has already run the command once, so nothing is left to import) may map less than it holds."""
    fuzz = load_file(SCRIPT, "fuzz_cli", register=True)
    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    fuzz.build_workspace(workspace)
    scratch.mkdir()
    argv = ["rollout", "--harness", "h", "--env", "synthetic", "--out", "oom.jsonl", "--model", "standin:weak",
            "--tasks", "2", "--seed", "0", "--commit", "main", "--workers", "1"]
    cwd = os.getcwd()
    try:  # warm: the modules the command imports are in this process before it forks
        os.chdir(workspace)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(argv) == 0
    finally:
        os.chdir(cwd)
    (workspace / "oom.jsonl").unlink()
    shutil.rmtree(workspace / "h" / ".evoharness", ignore_errors=True)
    case = fuzz.Case("rollout", argv)
    fuzz.run_case(case, workspace, scratch, [], timeout=60, headroom=-(2 << 20))
    assert case.rc == 2, (case.rc, case.problems, case.err[-2000:])
    assert "Traceback" not in case.err
    errors = [line for line in case.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and ("out of memory" in errors[0] or "thread could not start" in errors[0]), case.err
    assert case.problems == [], case.err  # no other line: the dying thread's report was printed above it


def _run_script(script: Path, source: str) -> subprocess.CompletedProcess:
    """``source`` written to ``script`` and run by this interpreter, importing this checkout's evoharness."""
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def test_the_dying_threads_report_is_not_printed_beside_the_error(tmp_path):
    """A thread that died starting left the interpreter's own "Exception ignored in thread started by: ..." report
    (with its traceback) on stderr, above the CLI's one error line. Now the start holds stderr while it waits, and
    drops that report when the thread died; what else was written meanwhile is kept."""
    done = _run_script(tmp_path / "dies.py", (
        "import sys, threading\n"
        "from evoharness.threads import ThreadDiedStarting, guard_thread_starts\n"
        "class Dies(threading.Thread):\n"
        "    def _bootstrap_inner(self):\n"
        "        print('written by another thread meanwhile', file=sys.stderr)\n"
        "        raise MemoryError\n"
        "guard_thread_starts()\n"
        "try:\n"
        "    Dies(daemon=True).start()\n"
        "except ThreadDiedStarting as e:\n"
        "    print(f'error: {e}', file=sys.stderr)\n"
        "ok = threading.Thread(target=print, args=('a thread that starts',), kwargs={'file': sys.stderr})\n"
        "ok.start(); ok.join()\n"))
    assert done.stderr.splitlines() == ["written by another thread meanwhile",
                                        "error: a new thread ran out of memory before it started",
                                        "a thread that starts"], done.stderr


def test_other_threads_keep_stderr_while_a_thread_starts(tmp_path):
    """A guarded start swapped ``sys.stderr`` for a StringIO for every thread while it waited: another thread writing
    then was held back, ``sys.stderr.fileno()`` raised, and a ``redirect_stderr`` entered in that moment and left after
    it put the StringIO back for good (every later line lost). Now only the thread being started is held back."""
    done = _run_script(tmp_path / "race.py", (
        "import contextlib, io, sys, threading\n"
        "from evoharness.threads import guard_thread_starts\n"
        "guard_thread_starts()\n"
        "inside, go, started = threading.Event(), threading.Event(), threading.Event()\n"
        "class Slow(threading.Thread):  # its start waits until the other thread has done its part\n"
        "    def _bootstrap_inner(self):\n"
        "        inside.set(); go.wait(); super()._bootstrap_inner()\n"
        "def other():\n"
        "    inside.wait()\n"
        "    print('written while a thread starts', file=sys.stderr, flush=True)\n"
        "    try:\n"
        "        print('fileno', sys.stderr.fileno())\n"
        "    except Exception as e:\n"
        "        print('fileno failed:', type(e).__name__)\n"
        "    with contextlib.redirect_stderr(io.StringIO()):  # entered while the start waits, left after it\n"
        "        go.set(); started.wait()\n"
        "o = threading.Thread(target=other); o.start()\n"
        "t = Slow(target=lambda: None); t.start(); started.set(); o.join(); t.join()\n"
        "print('written after', file=sys.stderr, flush=True)\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["fileno 2"], done.stdout
    assert done.stderr.splitlines() == ["written while a thread starts", "written after"], done.stderr


def test_a_redirect_left_after_a_start_gives_stderr_back_and_no_private_table_is_read(tmp_path):
    """The start's stand-in asked threading's private ``_active`` table which thread was writing, and a
    ``redirect_stderr`` another thread entered while a start waited and left after it put the stand-in back in
    ``sys.stderr`` for the process's life (``sys.stderr is sys.__stderr__`` false from then on). Here ``_active``
    refuses ``in`` (as a Python that reshaped it might), and after the redirect one write gives the stream back."""
    script = tmp_path / "race.py"
    script.write_text(
        "import contextlib, io, sys, threading\n"
        "from evoharness.threads import guard_thread_starts\n"
        "class NoIn(dict):\n"
        "    def __contains__(self, key):\n"
        "        raise RuntimeError('threading._active was asked')\n"
        "threading._active = NoIn(threading._active)\n"
        "guard_thread_starts()\n"
        "inside, go, started = threading.Event(), threading.Event(), threading.Event()\n"
        "class Slow(threading.Thread):\n"
        "    def _bootstrap_inner(self):\n"
        "        inside.set(); go.wait(); super()._bootstrap_inner()\n"
        "def other():\n"
        "    inside.wait()\n"
        "    print('written while a thread starts', file=sys.stderr, flush=True)\n"
        "    with contextlib.redirect_stderr(io.StringIO()):  # entered while the start waits, left after it\n"
        "        go.set(); started.wait()\n"
        "o = threading.Thread(target=other); o.start()\n"
        "t = Slow(target=lambda: None); t.start(); started.set(); o.join(); t.join()\n"
        "print('written after', file=sys.stderr, flush=True)\n"
        "print('plain stderr again', sys.stderr is sys.__stderr__)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["written while a thread starts", "written after"], done.stderr
    assert done.stdout.splitlines() == ["plain stderr again True"], done.stdout
