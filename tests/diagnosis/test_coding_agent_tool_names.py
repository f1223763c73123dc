"""Other coding agents' tool names: a shell tool is read by its command whatever the agent calls it (Claude Code's
``Bash``, OpenHands' ``execute_bash``, ``run_terminal_cmd``), so a command that only reads is no write; search, to-do
and web tools only read. Before, every call of such a tool counted as a write: a failed run sat on its first ``ls``
or ``TodoWrite``, and a read between two re-runs hid a loop."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

PATCH = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
SHELLS = ["Bash", "execute_bash", "run_terminal_cmd", "shell_command", "execute_command"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_read_through_another_agents_shell_tool_is_no_write(shell):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call(shell, {"command": "cat pkg/core.py"}, result="a = 1")
    b.call("TodoWrite", {"todos": [{"content": "fix pkg/core.py", "status": "in_progress"}]}, result="ok")
    b.call("Grep", {"pattern": "a", "path": "pkg/core.py"}, result="pkg/core.py:1:a = 1")
    b.call(shell, {"command": "sed -i 's/a = 1/a = 2/' pkg/core.py"}, result="")
    label = Labeller().label(b.deliver(PATCH).build(score=0.0))
    assert (label.first_signal.id, label.first_signal.step) == ("F4.first_write", 7), label.first_signal


@pytest.mark.parametrize("shell", SHELLS)
def test_a_read_between_reruns_does_not_hide_a_loop(shell):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call(shell, {"command": "sed -i 's/a/b/' pkg/core.py"}, result="")
    for _ in range(3):
        b.call(shell, {"command": "python reproduce.py"}, result="AssertionError: 1 != 2")
        b.call(shell, {"command": "grep -n b pkg/core.py"}, result="1:b = 1")
    label = Labeller().label(b.deliver(PATCH).build(score=0.0))
    assert label.first_signal.id == "F3.repeated_action", label.first_signal


@pytest.mark.parametrize("shell", SHELLS)
def test_an_edit_rerun_cycle_through_another_agents_shell_is_no_loop(shell):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    for k in range(3):
        b.call(shell, {"command": f"sed -i 's/x{k}/y{k}/' pkg/core.py"}, result="")
        b.call(shell, {"command": "python reproduce.py"}, result="AssertionError: 1 != 2")
    label = Labeller().label(b.deliver(PATCH).build(score=0.0))
    assert not [s.id for s in label.signals if s.id.startswith("F3.")]
    assert (label.first_signal.id, label.first_signal.step) == ("F4.first_write", 1)


@pytest.mark.parametrize("name", ["BashOutput", "KillShell", "update_reservation", "send_certificate"])
def test_tools_that_only_share_a_word_are_no_shell(name):
    from evoharness.diagnosis.detectors import is_shell

    assert not is_shell(name)
