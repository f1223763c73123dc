"""F1.unseen_report: an agent that showed a page and then reports what it found answers for every value it states --
one it did not see (on that page, in any earlier message or the task) is the failing step (issue 13, Who&When
Algorithm-Generated 29: a WebServing_Expert showed the current article and reported the date an image was first
added, which only the edit history holds)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

TASK = "When was a picture of St. Thomas Aquinas first added to the Wikipedia page on the Principle of double effect?"
HANDOFF = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n\n"
           "# General Task\n" + TASK)
PAGE = ("Address: https://en.wikipedia.org/wiki/Principle_of_double_effect\nTitle: Principle of double effect\n"
        "Viewport position: Showing page 1 of 13.\n=======================\n# Principle of double effect\n"
        "Thomas Aquinas (1225-1274) is credited with introducing the principle. Revised 1,482 times.")


def _log(turns: list[tuple[str, str]]) -> Trajectory:
    msgs = [{"role": "user", "content": TASK}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="ma", task_id="ma", task=TASK, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def _label(report: str, reporter: str = "WebServing_Expert", page: str = PAGE):
    return Labeller().label(_log([
        ("WebServing_Expert", HANDOFF),
        ("WebServing_Expert", page),
        (reporter, report),
        ("Validation_Expert", "Let me check the edit history.\n```python\nprint(history())\n```"),
        ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: KeyError: 'slots'"),
        ("Validation_Expert", "The date stands. TERMINATE"),
    ]))


def test_a_value_the_page_does_not_show_is_the_reporters_failing_step():
    lab = _label("A picture of St. Thomas Aquinas was first added on the revision dated October 2, 2019.")
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.unseen_report", 3, "WebServing_Expert")
    assert lab.failure_class == "F1"
    assert "does not hold: 2019" in lab.first_signal.evidence and "(step 2)" in lab.first_signal.evidence


@pytest.mark.parametrize("report", [
    "The page says Aquinas (1225-1274) introduced the principle; the article was revised 1,482 times.",  # on the page
    "The revision count is 1482; Aquinas lived 1225-1274.",  # the same numbers written without the comma
    "The picture is of Aquinas; I could not find when it was added.",  # no number at all
    "The picture was added by an editor living at 350 5th Ave, New York, NY 10118.",  # a place is no fact
])
def test_a_report_of_what_the_page_shows_is_no_signal(report):
    lab = _label(report)
    assert "F1.unseen_report" not in {s.id for s in lab.signals}


def test_a_value_rounded_from_the_page_is_relayed():
    page = PAGE + " Average views 791.6543403552349 a day."
    lab = _label("It gets about 791.65 views a day.", page=page)
    assert "F1.unseen_report" not in {s.id for s in lab.signals}


def test_only_the_agent_that_showed_the_page_reports_it():
    """Another agent's turn after the page is a reasoning turn like any other (``F1.unsupported_fact``'s bar of two
    new numbers), not the report of what it saw."""
    lab = _label("A picture was first added on October 2, 2019.", reporter="Wikipedia_Historian_Expert")
    assert "F1.unseen_report" not in {s.id for s in lab.signals}


def test_a_tool_agents_own_page_and_words_are_not_a_report_turn():
    """A web surfer by name (a tool agent: Magentic-One's WebSurfer) is no reasoning agent; its messages are what the
    tool did and saw, read by F2.guardrail and the page rules, not this one."""
    lab = Labeller().label(_log([
        ("Orchestrator", "Please open the article's history."),
        ("WebSurfer", PAGE),
        ("WebSurfer", "The picture was first added on October 2, 2019."),
        ("Orchestrator", "FINAL ANSWER: 02/10/2019"),
    ]))
    assert "F1.unseen_report" not in {s.id for s in lab.signals}
