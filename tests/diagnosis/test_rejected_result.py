"""F4.first_commitment where the team threw the first result away: a first code that ran clean, whose result the next
reasoning turn calls wrong and replaces with new code, is not what the run builds on -- the replacement is (issue 13,
Who&When Algorithm-Generated 5 and 60: the humans blame the replacement's author)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

HANDOFF = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n\n"
           "# General Task\nHow many revisions did the page have before the release month?")
FIRST = "Let's count the revisions.\n```python\nprint(count_revisions('God of War'))\n```"
REPLACE = ("Given the outputs from the script, it seems like there was an error or miscalculation since the number of "
           "revisions is zero, which is highly improbable.\n"
           "```python\nprint(count_revisions('God of War', all=True))\n```")


def _log(turns: list[tuple[str, str]]) -> Trajectory:
    task = "How many revisions did the page have before the release month?"
    msgs = [{"role": "user", "content": task}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="ma", task_id="ma", task=task, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def _turns(second: str, first_run: str = "exitcode: 0 (execution succeeded)\nCode output: 0") -> list[tuple[str, str]]:
    return [
        ("Planner_Expert", HANDOFF),
        ("Gaming_Expert", FIRST),
        ("Computer_terminal", first_run),
        ("DataVerification_Expert", second),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 610"),
        ("DataVerification_Expert", "There were 610 revisions. TERMINATE"),
    ]


def _first(turns: list[tuple[str, str]]) -> tuple[str, int, str | None]:
    lab = Labeller().label(_log(turns))
    return lab.first_signal.id, lab.first_signal.step, lab.agent


def test_a_clean_result_the_team_rejected_moves_the_commitment_to_the_code_that_replaced_it():
    assert _first(_turns(REPLACE)) == ("F4.first_commitment", 4, "DataVerification_Expert")
    lab = Labeller().label(_log(_turns(REPLACE)))
    assert "replaces the code of step 2, whose clean run's result (step 3) the team rejected" in \
        lab.first_signal.evidence


@pytest.mark.parametrize("verdict", [
    "It appears that the script did not work as intended and returned a count of zero.",
    "The output of 0 revisions seems to be incorrect for such a notable page.",
    "The result is wrong: the page certainly had edits before its release.",
])
def test_other_wordings_of_a_rejected_result(verdict):
    second = verdict + "\n```python\nprint(count_revisions('God of War', all=True))\n```"
    assert _first(_turns(second))[1:] == (4, "DataVerification_Expert")


@pytest.mark.parametrize("second", [
    # the result is kept: the next turn builds on it
    "The script returned 0 revisions. Let's double-check the dates.\n```python\nprint(dates())\n```",
    # the result is called wrong but nothing replaces the code (no code in the turn)
    "It seems like there was an error or miscalculation, since zero is highly improbable.",
    # the words of a rejection only inside the turn's code, not its prose
    "Let's look closer.\n```python\n# there was an error or miscalculation before\nprint(dates())\n```",
])
def test_a_kept_result_or_a_rejection_with_no_new_code_leaves_the_first_code(second):
    assert _first(_turns(second)) == ("F4.first_commitment", 2, "Gaming_Expert")


def test_a_run_of_later_code_is_not_the_first_codes_run():
    """Two code turns before the first run: the run (and the result rejected) is the second code's, so the first code
    was never judged: it stays the first commitment."""
    turns = _turns(REPLACE)
    turns.insert(2, ("Verification_Expert", "Let me redo it my way.\n```python\nprint(my_count())\n```"))
    assert _first(turns) == ("F4.first_commitment", 2, "Gaming_Expert")


def test_a_failed_first_run_is_still_the_code_whose_run_failed_first():
    failed = "exitcode: 1 (execution failed)\nCode output: NameError: name 'count_revisions' is not defined"
    lab = Labeller().label(_log(_turns(REPLACE, first_run=failed)))
    assert (lab.first_signal.step, lab.agent) == (2, "Gaming_Expert")
    assert "failed first (step 3)" in lab.first_signal.evidence


def test_the_commitment_moves_once_not_to_the_last_fix():
    """A replacement whose own result is rejected in turn is refined by the next code, not discarded: the run built its
    method on it (Algorithm-Generated 60: the humans blame the first replacement, not the third code)."""
    turns = _turns(REPLACE)[:5] + [
        ("Verification_Expert", "The output of 610 seems to be incorrect; let's refine it.\n```python\nprint(1)\n```"),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 67"),
        ("Verification_Expert", "67 it is. TERMINATE"),
    ]
    assert _first(turns)[1:] == (4, "DataVerification_Expert")
