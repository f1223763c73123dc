"""``F4.lost_task``: an opening handoff that no longer holds the user's request hands the team another task; the
handoff, the planner's instruction, is where the run fails, not the agents who carry it out."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

TASK = ("Could you please create an alphabetized list of just the vegetables from my grocery list: milk, eggs, "
        "sweet potatoes, fresh basil, plums, green beans, broccoli, celery, zucchini, lettuce?")
HANDOFF = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n"
           "Collect information from the general task, follow the suggestions from manager to solve the task.\n\n"
           "# General Task\n{general}\n\n# Task and suggestions from manager\n## Task description\n{description}\n"
           "## Plan for solving the task\n1. Follow the task description.\n2. Check the result.\n")
STALE = "exitcode: 1 (execution failed)\nCode output: \nunknown language plaintext"


def _label(handoff: str, task: str = TASK):
    turns = [("Planning_Expert", handoff),
             ("Debugging_Expert", "The error says the code block was tagged plaintext. Please share the code that "
                                  "failed so we can fix it."),
             ("Computer_terminal", "There is no code from the last 1 message for me to execute."),
             ("Debugging_Expert", "Without the code we cannot go further. TERMINATE")]
    msgs = [{"role": "user", "content": task}, *({"role": "assistant", "name": n, "content": c} for n, c in turns)]
    t = Trajectory(id="lost", task_id="lost", task=task, messages=msgs, final_answer=turns[-1][1],
                   meta={"failure_only": True})
    return Labeller().label(t)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])  # a blank line written CRLF still ends the opening lines
def test_a_handoff_that_lost_the_request_is_where_the_run_fails(newline):
    handoff = HANDOFF.format(general=STALE, description="Resolve the error in the code execution (exit code 1).")
    lab = _label(handoff.replace("\n", newline))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.lost_task", 1, "Planning_Expert")
    assert "unknown language plaintext" in lab.first_signal.evidence  # what it handed over instead


@pytest.mark.parametrize("description", [
    "List the vegetables of the grocery list, alphabetized.",
    # the plan is about something else, but the request is there for the team to read
    "Resolve the error in the code execution (exit code 1).",
])
def test_a_handoff_that_restates_the_request_is_not_a_lost_task(description):
    lab = _label(HANDOFF.format(general=TASK + " Please solve the problem carefully.", description=description))
    assert "F4.lost_task" not in {s.id for s in lab.signals}


def test_a_request_of_fewer_than_five_words_is_not_judged():
    """Too few words to say the handoff lost them: "Fix it, please." shares no word with any restatement."""
    lab = _label(HANDOFF.format(general=STALE, description="Resolve the error."), task="Fix it, please.")
    assert "F4.lost_task" not in {s.id for s in lab.signals}
