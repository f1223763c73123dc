"""What a command's log lines look like on a stderr that is not a terminal."""

from __future__ import annotations

import json

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
