"""What a command's log lines look like on a stderr that is not a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from evoharness.cli import main
from evoharness.cli_support import AppState
from evoharness.logging import get_logger


def test_a_command_logs_a_warning_as_one_readable_line(capsys):
    """`demo` with `sandbox.warm=false` printed a JSON object among its progress lines."""
    assert main(["--set", "log_level=warning", "noise", "--sigma", "0.02"]) == 0  # installs the command's logging
    capsys.readouterr()
    get_logger("evoharness.sandbox.containment").warning(
        "sandbox_limit_fallback", detail="cannot mount a tmpfs:\n/scratch is capped per file only")
    err = capsys.readouterr().err
    assert err == "warning: sandbox_limit_fallback: cannot mount a tmpfs: /scratch is capped per file only\n"


def test_other_fields_follow_the_line_and_info_stays_below_warning(capsys):
    assert main(["noise", "--sigma", "0.02", "--set", "sandbox.workers=2"]) == 0  # given after the command
    capsys.readouterr()
    log = get_logger("t")
    log.info("anchor measured", commit="abc")  # log_level defaults to warning
    log.warning("worktree_not_updated", reason="locked", main="0123")
    assert capsys.readouterr().err == "warning: worktree_not_updated (reason=locked main=0123)\n"


def test_a_service_logs_json_lines_and_log_format_is_checked(capsys):
    state = AppState(None, ["log_level=info"])
    _ = state.settings  # `serve --set ...`: the settings are read before the command runs ...
    state.collected()  # ... and then serve says a collector reads its log
    get_logger("t").error("service.loop_error", error="boom")
    line = json.loads(capsys.readouterr().err)
    assert line["event"] == "service.loop_error" and line["level"] == "error" and line["error"] == "boom"
    assert main(["--set", "log_format=jsno", "noise", "--sigma", "0.02"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "log_format" in err[0]
    assert main(["--set", "log_level=INFO", "noise", "--sigma", "0.02"]) == 0  # read as before: any case


def _fresh(code: str, *, tty: bool = False) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (structlog not imported by a test's conftest there), stderr a pipe."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def test_a_command_that_logs_nothing_does_not_import_structlog_and_its_first_warning_reads_as_before(tmp_path):
    """structlog (~0.13 s of CPU with rich and asyncio) is imported at the first log call at or above the level, not
    when a command configures its logging: an event below the level is dropped without it, and the first warning
    is configured as the command asked (the plain line on a pipe), not structlog's default (stdout, colours)."""
    done = _fresh(f"""
        import sys
        from evoharness.cli import main
        assert main(["--set", "home={tmp_path}", "--set", "log_level=warning", "noise", "--sigma", "0.02"]) == 0
        from evoharness.logging import get_logger
        log = get_logger("evoharness.t")
        log.info("below the level", n=1)
        log.debug("below the level")
        print("imported after info:", "structlog" in sys.modules, file=sys.stderr)
        log.warning("sandbox_limit_fallback", detail="cannot mount a tmpfs:\\n/scratch is capped per file only")
        print("imported after warning:", "structlog" in sys.modules, file=sys.stderr)
        log.info("still below the level")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-3:] == [
        "imported after info: False",
        "warning: sandbox_limit_fallback: cannot mount a tmpfs: /scratch is capped per file only",
        "imported after warning: True"]
    assert "sandbox_limit_fallback" not in done.stdout


def test_a_service_configured_before_structlog_logs_json_lines_and_a_later_capture_stands(tmp_path):
    done = _fresh(f"""
        import json, sys
        from evoharness.cli_support import AppState
        from evoharness.logging import get_logger
        state = AppState(None, ["home={tmp_path}", "log_level=info"])
        _ = state.settings
        state.collected()
        assert "structlog" not in sys.modules
        get_logger("t").info("service.started", port=1)
        from structlog.testing import capture_logs
        with capture_logs() as captured:
            get_logger("t").error("service.loop_error", error="boom")
        print("captured:", [e["event"] for e in captured], file=sys.stderr)
    """)
    assert done.returncode == 0, done.stderr
    first, last = done.stderr.splitlines()[-2:]
    assert json.loads(first)["event"] == "service.started" and json.loads(first)["level"] == "info"
    assert last == "captured: ['service.loop_error']"


def test_threads_whose_first_log_calls_meet_wait_for_the_kept_configuration(tmp_path):
    """The service logs from several threads: a second thread's first call while the first one still configures
    structlog used to find nothing kept and log with structlog's default (to stdout, another format)."""
    done = _fresh(f"""
        import sys, threading, time
        import evoharness.logging as logs
        from evoharness.cli_support import AppState
        _ = AppState(None, ["home={tmp_path}", "log_level=warning"]).settings
        import structlog  # imported (not configured) before the threads: the race is the configuration's alone
        configure = logs._configure
        logs._configure = lambda *a: (time.sleep(0.3), configure(*a))
        threads = [threading.Thread(target=lambda i=i: logs.get_logger("t").warning(f"thread_{{i}}")) for i in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join()
    """)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stderr.splitlines()) == ["warning: thread_0", "warning: thread_1"]
    assert done.stdout == ""
