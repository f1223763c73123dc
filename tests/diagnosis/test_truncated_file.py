"""F2.truncated_file: a failed run whose delivered patch cuts off the end of a file that existed before (the last
hunk's changes reach the file's end and remove lines the patch adds nowhere), located at the write that cut it."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.coding import cut_tails
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

HEAD = "diff --git a/pkg/core.py b/pkg/core.py\nindex 1111111..2222222 100644\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
# the tail of run() and the whole of main() gone, a new block added in their place
CUT = HEAD + ("@@ -10,10 +10,6 @@ def run(args):\n"
              "     env = dict(os.environ)\n"
              "     if secret:\n"
              "         env['SECRET'] = secret\n"
              "-    try:\n"
              "-        subprocess.run(args, env=env)\n"
              "-    finally:\n"
              "-        restore()\n"
              "-\n"
              "-def main():\n"
              "-    run(sys.argv)\n"
              "+    mode = options.get('mode')\n"
              "+    if mode:\n"
              "+        env['MODE'] = mode\n")
# the same change with the rest of the file still after it (trailing context: not the file's end)
KEPT = HEAD + ("@@ -10,8 +10,11 @@ def run(args):\n"
               "     env = dict(os.environ)\n"
               "     if secret:\n"
               "         env['SECRET'] = secret\n"
               "+    mode = options.get('mode')\n"
               "+    if mode:\n"
               "+        env['MODE'] = mode\n"
               "     try:\n"
               "         subprocess.run(args, env=env)\n"
               "     finally:\n"
               "         restore()\n"
               " \n")
# lines removed at the end but re-added above (a block moved up): no cut
MOVED = HEAD + ("@@ -10,6 +10,6 @@ def run(args):\n"
                "     env = dict(os.environ)\n"
                "+    try:\n"
                "+        subprocess.run(args, env=env)\n"
                "+    finally:\n"
                "     if secret:\n"
                "         env['SECRET'] = secret\n"
                "-    try:\n"
                "-        subprocess.run(args, env=env)\n"
                "-    finally:\n")
# the last lines of the file's last function rewritten (as many lines added there as removed): a fix, no cut
LAST_LINES = HEAD + ("@@ -10,7 +10,7 @@ def run(args):\n"
                     "     env = dict(os.environ)\n"
                     "     if secret:\n"
                     "         env['SECRET'] = secret\n"
                     "-    try:\n"
                     "-        subprocess.run(args, env=env)\n"
                     "-    finally:\n"
                     "-        restore()\n"
                     "+    with restoring():\n"
                     "+        result = subprocess.run(args, env=env, check=False)\n"
                     "+        log(result.returncode)\n"
                     "+    return result\n")
REWRITE = ("awk 'skip && /^try:/ { skip=0; print; next } /SECRET/ { print; skip=1; next } skip { next } { print }' "
           "pkg/core.py > /tmp/core.py && mv /tmp/core.py pkg/core.py")


def _run(patch: str, score: float = 0.0):
    b = TraceBuilder("t").user("Pass the mode option to the subprocess")
    b.call("bash", {"command": "sed -i 's/secret = None/secret = opts.get(\"secret\")/' pkg/core.py"},
           result="<returncode>0</returncode>")
    b.call("bash", {"command": "python -m py_compile pkg/core.py"}, result="<returncode>0</returncode>")
    b.call("bash", {"command": REWRITE}, result="<returncode>0</returncode>")
    b.call("bash", {"command": "sed -i 's/  / /' pkg/core.py"}, result="<returncode>0</returncode>")
    b.call("bash", {"command": "python -m py_compile pkg/core.py"}, result="<returncode>0</returncode>")
    return Labeller().label(b.deliver(patch).build(score=score))


def test_a_patch_that_cuts_off_the_files_end_is_f2_at_the_rewrite_that_cut_it():
    label = _run(CUT)
    assert label.failure_class == "F2" and label.first_signal is not None
    assert (label.first_signal.id, label.first_signal.step) == ("F2.truncated_file", 5), label.first_signal
    assert "cuts off the end of pkg/core.py: 6 lines" in label.first_signal.evidence


@pytest.mark.parametrize("patch", [KEPT, MOVED, LAST_LINES])
def test_a_patch_that_keeps_the_files_end_is_no_cut(patch):
    label = _run(patch)
    assert label.first_signal is not None and label.first_signal.id == "F4.first_write"
    assert not [s for s in label.signals if s.id == "F2.truncated_file"]


def test_a_resolved_run_with_the_shape_stays_healthy():
    assert _run(CUT, score=1.0).failure_class == "healthy"


def test_with_no_whole_rewrite_the_last_write_of_the_file_is_the_step():
    b = TraceBuilder("t").user("Pass the mode option")
    b.call("bash", {"command": "sed -i '12,20d' pkg/core.py"}, result="<returncode>0</returncode>")
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/core.py"}, result="<returncode>0</returncode>")
    label = Labeller().label(b.deliver(CUT).build(score=0.0))
    assert (label.first_signal.id, label.first_signal.step) == ("F2.truncated_file", 3), label.first_signal


def _counts_agree(patch: str) -> bool:
    """The sample's hunk has the line counts its header says (else cut_tails skips it, whatever its shape)."""
    from evoharness.diagnosis.coding import HUNK

    lines = patch.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("@@"))
    old, new = (int(n) for n in HUNK.match(lines[at]).groups())
    body = [line for line in lines[at + 1:] if line]
    return sum(x[0] in " -" for x in body) == old and sum(x[0] in " +" for x in body) == new


@pytest.mark.parametrize("patch", [CUT, KEPT, MOVED, LAST_LINES])
def test_the_samples_are_whole_hunks(patch):
    assert _counts_agree(patch)


def test_cut_tails_reads_only_whole_hunks_of_existing_files():
    assert [(p, len(g)) for p, g in cut_tails(CUT)] == [("pkg/core.py", 6)]
    assert cut_tails(KEPT) == [] and cut_tails(MOVED) == []
    assert cut_tails(CUT[:-60]) == []  # a patch stored cut short: its hunk's counts disagree with its header
    new_file = CUT.replace("index 1111111..2222222 100644\n", "new file mode 100644\n")
    assert cut_tails(new_file) == []  # no file was there to cut
    two = CUT.replace("-    run(sys.argv)\n", "-    run(sys.argv)\n\\ No newline at end of file\n")
    assert [(p, len(g)) for p, g in cut_tails(two)] == [("pkg/core.py", 6)]
