"""An edit of a patched file refused before one went through (a reply rejected for its format, SWE-agent's linter
refusing it, a replacement that found nothing): the failing step is the first refused edit that makes the same change
as the accepted one (the agent committed to it there; its form was refused), else the accepted edit (the refused
change was dropped and never reached the state the run is judged on)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.write_targets import change_words, same_change
from evoharness.traces.builder import TraceBuilder

PATCH = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
REJECTION = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
LINT = ("Your proposed edit has introduced new syntax error(s). Please read this error message carefully and then "
        "retry editing the file.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n\nYour changes have NOT "
        "been applied.")


def _first_write(t):
    [s] = [s for s in Labeller().label(t).signals if s.id == "F4.first_write"]
    return s


def _rejected_then(refused: str, accepted: str, between: int = 0):
    """A mini-swe-agent-like run: a reply with two blocks (the edit ``refused`` and a re-run) rejected for its format
    at step 1, ``between`` read-only commands, then ``accepted`` ran."""
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.say(f"THOUGHT: fix it.\n\n```bash\n{refused}\n```\n\n```bash\npython reproduce.py\n```")
    b.user(REJECTION).event("format_rejected", "found 2 actions")
    for k in range(between):
        b.call("bash", {"command": f"grep -n foo{k} pkg/core.py"}, result="<returncode>0</returncode>")
    b.call("bash", {"command": accepted}, result="<returncode>0</returncode>\n<output>\n</output>")
    return _first_write(b.deliver(PATCH).build(score=0.0))


@pytest.mark.parametrize(("refused", "accepted"), [
    ("sed -i 's/x = 1/x = 2/' pkg/core.py", "sed -i 's/x = 1/x = 2/' pkg/core.py"),  # re-sent as it was
    # the same change, its address corrected (sympy-12489's shape)
    ("sed -i 's/@staticmethod/@classmethod/' pkg/core.py", "sed -i '927s/staticmethod/classmethod/' pkg/core.py"),
    ("sed -i 's/return a/return a.clone()/' pkg/core.py",
     "cd /testbed && sed -i '12s/return a/return a.clone()/' pkg/core.py && python reproduce.py"),
])
def test_a_rejected_edit_resent_with_the_same_change_is_the_failing_step(refused, accepted):
    s = _rejected_then(refused, accepted)
    assert s.step == 1 and "the same change went through at step 3" in s.evidence, s.evidence


@pytest.mark.parametrize(("refused", "accepted"), [
    # another location, another change
    ("sed -i 's/def area/def size/' pkg/core.py", "sed -i '40s/return total/return max(total, 0)/' pkg/core.py"),
    # the same location, another change
    ("sed -i 's/timeout=10/timeout=None/' pkg/core.py", "sed -i 's/timeout=10/retries=3, timeout=10/' pkg/core.py"),
])
def test_a_rejected_edit_replaced_by_another_change_is_not_the_failing_step(refused, accepted):
    s = _rejected_then(refused, accepted)
    assert s.step == 3 and "that went through" in s.evidence, s.evidence


def test_a_format_rejection_fixed_two_turns_later_keeps_the_rejected_edit():
    s = _rejected_then("sed -i 's/x = 1/x = 2/' pkg/core.py", "sed -i 's/x = 1/x = 2/' pkg/core.py", between=2)
    assert s.step == 1, s.evidence
    s = _rejected_then("sed -i 's/def area/def size/' pkg/core.py", "sed -i 's/return a/return b/' pkg/core.py", 2)
    assert s.step == 7, s.evidence


def _editor_run(first: dict, first_result: str, second: dict):
    """SWE-agent's str_replace_editor: ``first`` answered ``first_result`` at step 1, then ``second`` went through."""
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("str_replace_editor", {"command": "str_replace", "path": "/testbed/pkg/core.py", **first},
           result=first_result)
    b.call("str_replace_editor", {"command": "str_replace", "path": "/testbed/pkg/core.py", **second},
           result="The file /testbed/pkg/core.py has been edited.")
    return _first_write(b.deliver(PATCH).build(score=0.0))


def test_a_linter_refusal_then_the_same_change_indented_right_is_located_at_the_refusal():
    s = _editor_run({"old_str": "    return x", "new_str": "      return validate(x)"}, LINT,
                    {"old_str": "    return x", "new_str": "    return validate(x)"})
    assert s.step == 1 and "refused edit" in s.evidence, s.evidence


def test_a_linter_refusal_then_another_change_is_located_at_the_accepted_edit():
    s = _editor_run({"old_str": "    return x", "new_str": "      return validate(x)"}, LINT,
                    {"old_str": "def f(x):", "new_str": "def f(x, strict=False):"})
    assert s.step == 3, s.evidence


def test_a_replacement_that_found_nothing_then_the_same_change_is_located_at_the_first_try():
    s = _editor_run({"old_str": "return  x", "new_str": "return validate(x)"},
                    "No replacement was performed, old_str `return  x` did not appear verbatim in pkg/core.py.",
                    {"old_str": "return x", "new_str": "return validate(x)"})
    assert s.step == 1, s.evidence


def test_an_edit_refused_every_time_stays_at_the_first_refusal():
    b = TraceBuilder("t").user("Fix the bug in pkg")
    for _ in range(2):
        b.call("str_replace_editor", {"command": "str_replace", "path": "pkg/core.py", "old_str": "a", "new_str": " b"},
               result=LINT)
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == 1


def test_a_failed_command_is_no_refusal():
    # a non-zero exit after the edit ran (the re-run failed): the edit changed the file, it is the first write
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/core.py && python reproduce.py"},
           result="<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n</output>")
    b.call("bash", {"command": "sed -i 's/c/d/' pkg/core.py"}, result="<returncode>0</returncode>")
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == 1


@pytest.mark.parametrize(("a", "b", "same"), [
    ("sed -i 's/@staticmethod/@classmethod/' f.py", "sed -i '9s/staticmethod/classmethod/' f.py", True),
    ("sed -i 's/foo/bar/' f.py", "sed -i 's/foo/baz/' f.py", False),
    ("sed -i '/^x/d' f.py", "sed -i '/^y/d' f.py", True),  # two deletions: nothing added either way
    ('{"old_str":"a = 1","new_str":"a = compute(1)"}', '{"old_str":"a=1","new_str":"a = compute(1)"}', True),
])
def test_same_change_compares_the_words_an_edit_adds(a, b, same):
    assert same_change(change_words(a), change_words(b)) is same


@pytest.mark.parametrize("block", ["cat pkg/core.py > /tmp/orig.py", "cp pkg/core.py /tmp/x", "grep a pkg/core.py > o"])
def test_a_rejected_reply_that_only_names_the_patched_file_is_no_refused_edit(block):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.say(f"THOUGHT: save it first.\n\n```bash\n{block}\n```\n\n```bash\nls\n```")
    b.user(REJECTION).event("format_rejected", "found 2 actions")
    b.call("bash", {"command": block}, result="<returncode>0</returncode>")
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/core.py"}, result="<returncode>0</returncode>")
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == 5


def test_an_edit_refused_for_its_format_with_none_accepted_after_stays_at_the_rejection():
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.say("THOUGHT: fix.\n\n```bash\nsed -i 's/a/b/' pkg/core.py\n```\n\n```bash\nls\n```")
    b.user(REJECTION).event("format_rejected", "found 2 actions")
    b.call("str_replace_editor", {"command": "str_replace", "path": "pkg/core.py", "old_str": "a", "new_str": " b"},
           result=LINT)
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == 1


@pytest.mark.parametrize(("second", "step"), [
    ({"search": "    return x", "replace": "    return validate(x)"}, 3),  # the same change, indented right
    ({"search": "def f(x):", "replace": "def f(x, strict=False):"}, 5),  # another change
])
def test_swe_agents_search_replace_edit_of_the_open_file(second, step):
    """SWE-agent's edit_replace bundle: ``edit SEARCH REPLACE`` on the file ``open`` opened, no path argument."""
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("open", {"path": "/testbed/pkg/core.py"}, result="[File: /testbed/pkg/core.py (40 lines total)]")
    b.call("edit", {"search": "    return x", "replace": "      return validate(x)"}, result=LINT)
    b.call("edit", second, result="File updated.")
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == step


@pytest.mark.parametrize(("second", "step"), [({"old_string": "return x", "new_string": "return validate(x)"}, 1),
                                              ({"old_string": "def f(x):", "new_string": "def f(x, y):"}, 3)])
def test_claude_codes_edit_tool_after_a_failed_edit(second, step):
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("Edit", {"file_path": "/testbed/pkg/core.py", "old_string": "return  x", "new_string": "return validate(x)"},
           result="Error: String to replace not found in file.")
    b.call("Edit", {"file_path": "/testbed/pkg/core.py", **second}, result="The file has been updated.")
    assert _first_write(b.deliver(PATCH).build(score=0.0)).step == step


@pytest.mark.parametrize("hostile", ["s/" + "\\" * 40 + "x", ".replace('" * 999, '"old_str":"a"' * 999,
                                     " s/a" * 4000])
def test_change_words_of_a_hostile_edit_ends_and_reads_the_real_one(hostile):
    # "s/" and 40 backslashes took 2^40 steps: a backslash could be read as an escape or as a character
    assert "new_name" in change_words(hostile + "\nsed -i 's/old_name/new_name/' f.py")


def test_the_refusal_gate_lets_through_every_result_the_regex_matches():
    """``detectors._refused`` runs ``REFUSED_EDIT`` only on a result that opens, past blanks, with one of its openings'
    first letters or holds "have NOT been applied": on random results built from the regex's own pieces, Unicode blanks
    and noise, the gated answer is the regex's answer (a gate that skipped a blank the regex's ``\\s`` skips, or a
    letter an opening starts with, would call a refused write one that went through)."""
    import random

    from evoharness.diagnosis.context import TraceView
    from evoharness.diagnosis.detectors import REFUSED_EDIT, _refused

    rng = random.Random(13)
    pieces = ["Error: not enough seats", "ERROR:\nNo replacement", "No replacement was performed",
              "[Your proposed edit has introduced new syntax error",
              "Your bash command contained syntax errors and was NOT executed",
              "Your changes have NOT been applied.", "have NOT been applied", "\n", " ", "\t", "\u00a0", "\u2003",
              "\u3000", "\x1c", "\x85", "ok", "[", "Y", "N", "E", "e", "error:", '{"status": "ok"}', "x" * 150]
    agree = 0
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        b = TraceBuilder("t").user("Cancel ABC123.")
        t = b.call("cancel_reservation", {"reservation_id": "ABC123"}, result=text).deliver("Done.").build(0.0)
        view = TraceView.of(t)
        [c] = view.calls
        expected = REFUSED_EDIT.match(view.results[c.id][1][:400]) is not None
        assert _refused(view, c) == expected, repr(text)
        agree += expected
    assert 300 < agree < 2700  # both answers were tried, often
