"""F4.first_write locates a failed SWE run at the first write of the change its delivered patch keeps: a write the run
undid later -- an editor replacement put back by the swapped one, the file checked out or restored from git -- is none
of that change, and neither is the write that undid it (it put back what was there). Found on OpenHands runs
(docs/traces.md, "openhands"), general to any coding agent. An edit re-applied after a reset still starts where it
was first made."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

CORE = "/workspace/pkg/pkg/core.py"
PATCH = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,4 @@\n"
         " def mean(xs):\n+    if not xs:\n+        return 0.0\n     return sum(xs) / len(xs)\n")
EDITED = "The file /workspace/pkg/pkg/core.py has been edited."
WRONG = {"command": "str_replace", "path": CORE, "old_str": "    return sum(xs)\n",
         "new_str": "    return sum(xs) or 0\n"}
KEPT = {"command": "str_replace", "path": CORE, "old_str": "def mean(xs):\n",
        "new_str": "def mean(xs):\n    if not xs:\n        return 0.0\n"}
SWAPPED = {**WRONG, "old_str": WRONG["new_str"], "new_str": WRONG["old_str"]}


def _first_write(*undo: tuple[str, dict], redo: bool = False) -> tuple[int, int]:
    """(F4.first_write's step, the kept edit's step) in a failed run: a wrong edit of core.py (step 1), ``undo``,
    then the kept edit (or, with ``redo``, the wrong edit again)."""
    b = TraceBuilder("t").user("mean() of an empty list should return 0.0")
    b.call("str_replace_editor", WRONG, result=EDITED)
    b.call("execute_bash", {"command": "python reproduce.py"}, result="ZeroDivisionError\n[exit code 1]")
    for tool, args in undo:
        b.call(tool, args, result=EDITED if tool == "str_replace_editor" else "Updated 1 path from the index")
    kept = b.step
    b.call("str_replace_editor", WRONG if redo else KEPT, result=EDITED)
    label = Labeller().label(b.deliver(PATCH).build(score=0.0))
    assert label.first_signal.id == "F4.first_write"
    return label.first_signal.step, kept


@pytest.mark.parametrize("undo", [
    ("str_replace_editor", SWAPPED),  # the replacement put back
    ("execute_bash", {"command": "cd /workspace/pkg && git checkout pkg/core.py"}),
    ("execute_bash", {"command": "cd /workspace/pkg && git restore pkg/core.py"}),
    ("execute_bash", {"command": "git checkout -- ."}),
    ("bash", {"command": "git reset --hard"}),
])
def test_a_write_undone_later_is_not_where_the_kept_change_starts(undo):
    step, kept = _first_write(undo)
    assert step == kept  # was 1: the wrong edit, which the patch does not hold


def test_a_checkout_that_also_edits_the_file_undoes_nothing():
    step, _ = _first_write(("execute_bash", {"command": "git checkout pkg/core.py && sed -i 's/xs/v/' pkg/core.py"}))
    assert step == 1


def test_an_edit_re_applied_after_a_reset_starts_where_it_was_first_made():
    step, _ = _first_write(("execute_bash", {"command": "git checkout pkg/core.py"}), redo=True)
    assert step == 1


def test_without_an_undo_the_first_write_is_still_the_first_edit():
    step, _ = _first_write()
    assert step == 1
