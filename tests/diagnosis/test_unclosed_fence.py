"""A reply rejected for its format whose code fence never closes (the model stopped before the closing backticks;
mini-swe-agent answers it with its format error): its block is still the edit the agent committed to, and the
failing step when the same change is re-sent and goes through."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

PATCH = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
REJECTION = ("Please always provide EXACTLY ONE action in triple backticks, found 0 actions. If you want to end the "
             "task, please issue the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`")
PY_EDIT = ("python - <<'PY'\nfrom pathlib import Path\np = Path('pkg/core.py')\ns = p.read_text()\n"
           "s = s.replace('return total', 'return max(total, 0)')\np.write_text(s)\nPY")


def _run(rejected_reply: str, accepted: str):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "grep -n total pkg/core.py"}, result="<returncode>0</returncode>\n<output>\n"
                                                                     "12:    return total\n</output>")
    b.say(rejected_reply)
    b.user(REJECTION).event("format_rejected", "found 0 actions")
    b.call("bash", {"command": accepted}, result="<returncode>0</returncode>\n<output>\n</output>")
    t = b.deliver(PATCH).build(score=0.0)
    return Labeller().label(t)


def test_an_unclosed_block_rejected_then_resent_is_located_at_the_rejected_reply():
    label = _run(f"THOUGHT: clamp the total at zero.\n\n```bash\n{PY_EDIT}", PY_EDIT)
    assert label.first_signal is not None
    assert label.first_signal.step == 3, label.first_signal.evidence
    assert "the same change went through at step 5" in label.first_signal.evidence


def test_an_unclosed_block_with_another_change_is_not_the_failing_step():
    other = "sed -i 's/def area/def size/' pkg/core.py"
    label = _run(f"THOUGHT: rename it.\n\n```bash\n{other}", PY_EDIT)
    assert label.first_signal is not None and label.first_signal.step == 5, label.first_signal.evidence


def test_an_unclosed_block_that_only_reads_the_file_is_no_write():
    label = _run("THOUGHT: look first.\n\n```bash\ncat pkg/core.py", PY_EDIT)
    assert label.first_signal is not None and label.first_signal.step == 5, label.first_signal.evidence


@pytest.mark.parametrize(("text", "blocks"), [
    ("a\n```bash\nls\n```\nb", ["ls\n"]),
    ("a\n```bash\nls\n```\n```bash\nsed -i s/a/b/ f.py", ["ls\n", "sed -i s/a/b/ f.py"]),
    ("a\n```bash\nsed -i s/a/b/ f.py\n", ["sed -i s/a/b/ f.py\n"]),
    ("no block here", []),
    ("inline ``` mark with no newline", []),
])
def test_reply_blocks(text, blocks):
    from evoharness.diagnosis.detectors import reply_blocks

    assert reply_blocks(text) == blocks
