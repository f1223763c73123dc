"""``F4.handoff_code``: an opening handoff whose handed-over results report a failure is redone, not relied on. A
report is what the handoff's prose says, or what a section headed for errors or issues lists: a template heading
("## Errors or issues in the conversation", over "None.") or the handed-over code (``except ValueError:``, ``raise
KeyError``) says nothing of the sort."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

OPENING = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n"
           "# Task and suggestions from manager\n## Task description\nCount the even house numbers.\n"
           "## Results (including code blocks) and reason from last response\n{results}\n"
           "## Errors or issues in the conversation\n{issues}\n"
           "### Need to double-check?\nYes\n")
CODE = ("```python\ndef count_even(rows):\n    try:\n        return sum(int(r) % 2 == 0 for r in rows)\n"
        "    except ValueError:\n        raise KeyError('bad row')\n```")


def _label(opening: str):
    turns = [("Planner_Expert", opening),
             ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 4"),
             ("Verification_Expert", "The count is 4. FINAL ANSWER: four")]
    task = "How many house numbers are even?"
    msgs = [{"role": "user", "content": task}, *({"role": "assistant", "name": n, "content": c} for n, c in turns)]
    t = Trajectory(id="h", task_id="h", task=task, messages=msgs, final_answer=turns[-1][1],
                   meta={"failure_only": True})
    return Labeller().label(t).first_signal


@pytest.mark.parametrize("issues", ["None.", "- None", "No errors or issues were noted.", ""])
def test_a_template_heading_and_the_handed_over_code_are_no_report_of_a_failure(issues):
    signal = _label(OPENING.format(results=f"The function counts them:\n{CODE}", issues=issues))
    assert (signal.id, signal.step) == ("F4.handoff_code", 1)


def test_an_exception_named_in_inline_code_or_prose_is_no_report_either():
    results = ("`count_even` raises `ValueError` on a blank row, and a ValueError is what the task expects there:\n"
               + CODE)
    assert _label(OPENING.format(results=results, issues="None.")).id == "F4.handoff_code"


@pytest.mark.parametrize(("results", "issues"), [
    ("The function counts them:\n" + CODE, "- The script failed to read the file, so the count is unverified."),
    ("The last run ended with an error before printing the count:\n" + CODE, "None."),
    ("The task was not completed:\n" + CODE, "None."),
    # the section for errors lists one, in words of its own: a report
    ("The function counts them:\n" + CODE, "1. The OCR step returned no text, so the rows were guessed."),
])
def test_prose_that_reports_a_failure_still_means_the_handoff_is_redone(results, issues):
    assert _label(OPENING.format(results=results, issues=issues)).id != "F4.handoff_code"


def test_a_comment_in_the_handed_over_code_is_no_heading_of_an_errors_section():
    """A ``# ...`` line inside a fenced block is code, not a markdown heading: a comment naming errors or issues in
    the code the team builds on opened an "errors section" of the code's own lines, read as a report."""
    code = ("```python\n# skip rows with errors or issues in them\nrows = [r for r in rows if r.strip()]\n"
            "print(sum(int(r) % 2 == 0 for r in rows))\n```")
    signal = _label(OPENING.format(results=f"The function counts them:\n{code}", issues="None."))
    assert (signal.id, signal.step) == ("F4.handoff_code", 1)


def test_an_errors_section_that_shows_a_traceback_is_a_report():
    """What the errors section lists is a report whatever its form: a traceback shown as a code block too."""
    traceback = "```\nTraceback (most recent call last):\n  File \"count.py\", line 3\nZeroDivisionError\n```"
    assert _label(OPENING.format(results="The function counts them:\n" + CODE, issues=traceback)).id \
        != "F4.handoff_code"


@pytest.mark.parametrize("issues", ["None identified.", "- None noted so far.", "None found."])
def test_none_with_a_plain_qualifier_is_no_report(issues):
    signal = _label(OPENING.format(results=f"The function counts them:\n{CODE}", issues=issues))
    assert (signal.id, signal.step) == ("F4.handoff_code", 1)



def _labelled(turns: list[tuple[str, str]]):
    task = "How many house numbers are even?"
    msgs = [{"role": "user", "content": task}, *({"role": "assistant", "name": n, "content": c} for n, c in turns)]
    return Labeller().label(Trajectory(id="h", task_id="h", task=task, messages=msgs, final_answer=turns[-1][1],
                                       meta={"failure_only": True}))


def test_handed_over_code_that_never_ran_is_not_the_first_commitment():
    """The handoff's code is the first commitment only where the team runs it: an agent that writes its own code before
    anything runs builds on that code (Algorithm-Generated 15, 68, 90: the handoff was the step, code the run never
    ran)."""
    opening = OPENING.format(results=CODE, issues="None.")
    own = ("Verification_Expert", "Let me write it my way.\n```python\nprint(sum(r % 2 == 0 for r in rows))\n```")
    ran = ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 4")
    end = ("Verification_Expert", "The count is 4. TERMINATE")
    lab = _labelled([("Planner_Expert", opening), own, ran, end])
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 2, "Verification_Expert")
    lab = _labelled([("Planner_Expert", opening), ran, own, ran, end])  # the handoff's code ran first
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.handoff_code", 1, "Planner_Expert")
    lab = _labelled([("Planner_Expert", opening), end])  # nothing ran at all: read as before (no tuning log is so)
    assert lab.first_signal.id == "F4.handoff_code"
