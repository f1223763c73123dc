"""F4.first_write when no write touches a file the delivered patch changes: the first *in-place edit* is located.
A word ``patch`` that is no ``patch`` command (a reproduction script importing ``unittest.mock.patch``, a diff
saved to ``fix.patch``) is not an in-place edit of a file."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

# the environment's own setup.py change is all the diff holds: the agent's sed (line 999) matched nothing
PATCH = "diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n"


def _first_signal(first: str):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": first}, result="")
    b.call("bash", {"command": "sed -i '999s/a/b/' pkg/core.py"}, result="")
    return Labeller().label(b.deliver(PATCH).build(score=0.0)).first_signal


@pytest.mark.parametrize("first", [
    "cat > repro.py <<'EOF'\nfrom unittest.mock import patch\n\nwith patch('pkg.core.x'):\n    import pkg\nEOF",
    "git diff > /tmp/fix.patch",
    "pip download patch > /tmp/log.txt",
])
def test_a_scratch_write_that_only_says_patch_is_not_the_first_in_place_edit(first):
    s = _first_signal(first)
    assert (s.id, s.step) == ("F4.first_write", 3), s.evidence
    assert "sed -i" in s.evidence


@pytest.mark.parametrize("first", ["patch -p1 < /tmp/fix.diff", "cd pkg && patch core.py < /tmp/fix.diff"])
def test_a_patch_command_is_an_in_place_edit(first):
    s = _first_signal(first)
    assert (s.id, s.step) == ("F4.first_write", 1), s.evidence
    assert "in-place edit" in s.evidence
