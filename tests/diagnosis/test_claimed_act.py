"""F1.claimed_act: an agent that announced an act of looking ("Please hold on while I verify") and then reports it
done ("I have verified the class schedules") with no tool output between reports an act the log shows never happened;
that report is the failing step and its speaker the agent (issue 13, Who&When Algorithm-Generated 125, 62, 93)."""

from __future__ import annotations

import time

import pytest

from evoharness.diagnosis.claimed_act import CLAIMED, ClaimedActDetector, _announced_then_claimed, _may_claim
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.models import Trajectory

TASK = "Where can I take martial arts classes within a five-minute walk from the New York Stock Exchange after work?"
HANDOFF = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n\n"
           "# General Task\n" + TASK)
ANNOUNCE = "Anderson's Academy looks close. Let me confirm their class schedules. Please hold on while I verify."
CLAIM = "I have verified the class schedules for Anderson's Academy: Muay Thai Monday 7:00 pm - 8:30 pm."
RUN = "exitcode: 0 (execution succeeded)\nCode output: Anderson's Academy: Muay Thai Mon 19:00"


def _log(turns: list[tuple[str, str]], score: float | None = None) -> Trajectory:
    msgs = [{"role": "user", "content": TASK}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="ma", task_id="ma", task=TASK, messages=msgs, final_answer=turns[-1][1], score=score,
                      meta={} if score is not None else {"failure_only": True})


def _turns(announce: str = ANNOUNCE, claim: str = CLAIM, between: list[tuple[str, str]] | None = None,
           claimer: str = "MartialArts_Expert") -> list[tuple[str, str]]:
    return [("NYC_Local_Expert", HANDOFF),
            ("NYC_Local_Expert", "The NYSE is at 11 Wall Street. Anderson's Academy is at 25 Park Pl."),
            ("MartialArts_Expert", announce),
            *(between or []),
            (claimer, claim),
            ("Verification_Expert", "The schedule stands. TERMINATE")]


def _ids(turns: list[tuple[str, str]], score: float | None = None) -> set[str]:
    return {s.id for s in Labeller().label(_log(turns, score)).signals}


def test_a_reported_act_announced_and_never_run_is_the_reporters_failing_step():
    lab = Labeller().label(_log(_turns()))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.claimed_act", 4, "MartialArts_Expert")
    assert lab.failure_class == "F1"
    assert "'I have verified'" in lab.first_signal.evidence and "step 3" in lab.first_signal.evidence


@pytest.mark.parametrize(("announce", "claim"), [
    ("Give me a moment to verify the details.", "Having carefully reviewed the ending scene, the parachute was white."),
    ("I will now proceed to access the article.", "I’ve successfully retrieved the article; the quote matches."),
    ("I’ll look up the timetable.", "After checking the timetable, the last class starts at 7 pm."),
    ("Let me check the timetable.", "The timetable lists one class; after Checking it, 7 pm is the last."),
])
def test_other_wordings_of_the_announcement_and_the_report(announce, claim):
    assert "F1.claimed_act" in _ids(_turns(announce=announce, claim=claim))


def test_a_tool_output_between_the_two_is_the_act_done():
    assert "F1.claimed_act" not in _ids(_turns(between=[("Computer_terminal", RUN)]))


def test_a_claim_with_nothing_announced_is_no_signal():
    """Without the announcement a claimed check is as often a member re-reading the team's own work."""
    assert "F1.claimed_act" not in _ids(_turns(announce="Anderson's Academy is at 25 Park Pl, close to the NYSE."))


def test_another_agent_reporting_is_not_the_announcers_report():
    assert "F1.claimed_act" not in _ids(_turns(claimer="Verification_Expert"))


def test_turns_with_no_speaker_named_are_no_one_speakers_announcement_and_report():
    """Two unnamed turns may be two agents: an unnamed report does not answer an unnamed announcement."""
    turns = _turns()
    msgs = _log(turns).messages
    for m in msgs[3:5]:  # the announcement and the report
        m.pop("name")
    traj = Trajectory(id="ma", task_id="ma", task=TASK, messages=msgs, final_answer=CLAIM, meta={"failure_only": True})
    assert "F1.claimed_act" not in {s.id for s in Labeller().label(traj).signals}


def test_a_report_that_holds_code_is_doing_the_act():
    claim = "I have checked the schedule with this script:\n```python\nprint(schedule('Anderson'))\n```"
    assert "F1.claimed_act" not in _ids(_turns(claim=claim))


@pytest.mark.parametrize("claim", [
    "I have verified the steps carefully, and all findings are accurate.",
    "I have reviewed the code above; it computes the walking distance correctly.",
])
def test_a_review_of_the_teams_own_work_needs_no_tool(claim):
    assert "F1.claimed_act" not in _ids(_turns(announce="Let me verify the solution.", claim=claim))


def test_a_healthy_run_is_not_read():
    """Its label cannot change (``skips_healthy``); below the threshold the same log fires."""
    detector, cfg = ClaimedActDetector(), DiagnosisConfig()
    assert detector.detect(TraceView.of(_log(_turns(), score=1.0)), cfg) == []
    assert [s.step for s in detector.detect(TraceView.of(_log(_turns(), score=0.0)), cfg)] == [4]


def test_magentic_one_names_are_read_the_same_way():
    """The rule reads what turns say, not AG2's names: a Magentic-One coder's announced and claimed check fires; a
    WebSurfer's page between (a tool agent's turn) is the act done."""
    turns = [("Orchestrator", "Initial plan: find the schedule."),
             ("Coder", "I will check the academy's timetable. Please hold on."),
             ("Coder", "I have checked the timetable: classes run 7-9 pm."),
             ("Orchestrator", "FINAL ANSWER: Anderson's Academy")]
    lab = Labeller().label(_log(turns))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.claimed_act", 3, "Coder")
    surfed = [*turns[:2], ("WebSurfer", "Address: https://anderson.example/schedule\nTitle: Schedule\n"
                                        "Viewport position: Showing page 1 of 1.\n=======================\n"
                                        "Mon 7 pm Muay Thai"), *turns[2:]]
    assert "F1.claimed_act" not in _ids(surfed)


@pytest.mark.parametrize("text", ["i have verified the schedule", "I HAVE VERIFIED IT", "HAVING REVIEWED the page",
                                  "AFTER CHECKING the page", "I've Verified the page", "having Checked the site"])
def test_the_claim_is_searched_only_where_its_scan_finds_a_head(text):
    """``_may_claim`` (the literal scan) is true wherever ``CLAIMED`` can match: the scan never hides a claim."""
    assert not CLAIMED.search(text) or _may_claim(text)


# one turn that announces the look-up and then reports it (Who&When Algorithm-Generated 89's shape: "I'll check the
# online database ... After looking up this information: Reggie Jackson, 86 walks, 512 at bats")
ONE_TURN = ("I'll check Anderson's Academy's timetable on their website.\n\n---\n\n"
            "After checking the timetable: Muay Thai runs Monday 7:00 pm - 8:30 pm.")


def _one_turn(text: str = ONE_TURN) -> list[tuple[str, str]]:
    return [("NYC_Local_Expert", HANDOFF),
            ("NYC_Local_Expert", "The NYSE is at 11 Wall Street. Anderson's Academy is at 25 Park Pl."),
            ("MartialArts_Expert", text),
            ("Verification_Expert", "The schedule stands. TERMINATE")]


def test_an_act_announced_and_reported_in_one_turn_is_that_turns_failing_step():
    """The speaker's first turn: no earlier turn of its own to announce the act, and nothing can run inside a turn."""
    lab = Labeller().label(_log(_one_turn()))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.claimed_act", 3, "MartialArts_Expert")
    assert "'After checking'" in lab.first_signal.evidence and "same turn" in lab.first_signal.evidence


def test_a_report_before_the_announcement_in_one_turn_is_no_signal():
    """"After checking ..., I'll look up ...": the report came first, so it answers no announcement of this turn."""
    text = ("After checking the timetable, Muay Thai runs Monday at 7 pm.\n"
            "I'll look up the walking route from the NYSE next.")
    assert "F1.claimed_act" not in _ids(_one_turn(text))


@pytest.mark.parametrize("report", [
    "Once I have checked the timetable, I will share the class times here.",
    "After checking the timetable, I'll post the class times.",
    "If I have verified the schedule by then, we can close the task.",
])
def test_a_plan_is_no_report(report):
    """A sentence that speaks of the act as still to come or conditional is a plan, in one turn or the next."""
    assert "F1.claimed_act" not in _ids(_one_turn("I'll check Anderson's Academy's timetable.\n" + report))
    assert "F1.claimed_act" not in _ids(_turns(claim=report))


def test_a_report_after_a_plan_in_the_same_turn_is_read():
    """Algorithm-Generated 75's shape: "Once I have gathered the data, I will share it" (a plan), then "After browsing
    ScienceDirect ..., I have compiled the following hypothetical data" (the report)."""
    text = ("I'll check the academy's website. Once I have checked it, I will share the times.\n\n"
            "After browsing the website, the timetable lists Muay Thai on Monday at 7 pm.")
    lab = Labeller().label(_log(_one_turn(text)))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F1.claimed_act", 3)
    assert "'After browsing'" in lab.first_signal.evidence


def test_one_turn_reviewing_the_teams_own_work_or_running_code_is_no_signal():
    own = "I'll verify the result.\nAfter checking the calculations above, the answer is 7 pm."
    code = ONE_TURN + "\n```python\nprint(timetable('Anderson'))\n```"
    assert "F1.claimed_act" not in _ids(_one_turn(own))
    assert "F1.claimed_act" not in _ids(_one_turn(code))


@pytest.mark.parametrize("report", [
    "After visiting anderson.example/schedule, I will post the class times.",
    "After checking the timetable (e.g. the Monday list), I will post the class times.",
])
def test_a_dot_inside_the_sentence_does_not_end_it(report):
    """An address's dot or an abbreviation's is no sentence end: the plan's "I will" later in the sentence is read."""
    assert "F1.claimed_act" not in _ids(_one_turn("I'll check Anderson's Academy's timetable.\n" + report))
    assert "F1.claimed_act" not in _ids(_turns(claim=report))
    done = report.split(",")[0] + ", the Monday class is at 7 pm. I will post it."  # the plan in the next sentence
    assert "F1.claimed_act" in _ids(_turns(claim=done))


def test_a_long_turn_of_planned_claims_is_read_in_linear_time():
    """Each sentence is read once: 2,000 planned claims in a 120 KB turn took 11 s when every claim re-read the turn
    from its start for its sentence's beginning (0.02 s now; the bound leaves a hundredfold margin for load)."""
    text = "I'll check the site.\n" + "After checking the page I will post it and more words here. " * 2000
    started = time.process_time()
    assert _announced_then_claimed(text) is None
    assert _announced_then_claimed(text + "After checking the page, it lists 7 pm.") is not None
    assert time.process_time() - started < 2.0


NO_CODE = ("There is no code from the last 1 message for me to execute. Group chat manager should let other "
           "participants to continue the conversation.")


def test_an_executors_no_code_reply_between_the_two_is_no_act_done():
    """AG2's terminal answering the announcement "there is no code ... to execute" says nothing ran: the report after
    it still claims an act never done (Who&When Algorithm-Generated 54: "I will visit the NIH Clinical Trials website",
    the terminal's no-code reply, then "I have successfully located the relevant clinical trial"); a run between the two
    still clears it."""
    lab = Labeller().label(_log(_turns(between=[("Computer_terminal", NO_CODE)])))
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.claimed_act", 5, "MartialArts_Expert")
    assert "F1.claimed_act" not in _ids(_turns(between=[("Computer_terminal", NO_CODE), ("Computer_terminal", RUN)]))


@pytest.mark.parametrize("name", [{"agent": "MartialArts_Expert"}, ["MartialArts_Expert"]])
def test_a_speaker_named_by_a_json_object_is_read_not_a_crash(name):
    """A hand-written log's ``name`` may be any JSON value: an object or a list as a speaker's key raised TypeError
    (unhashable) out of ``label`` and ``diagnose``; the speaker is its text, as ``AgentLog.agents`` names it."""
    msgs = _log(_turns()).messages
    for m in msgs[3:5]:  # the announcement and the report
        m["name"] = name
    traj = Trajectory(id="ma", task_id="ma", task=TASK, messages=msgs, final_answer=CLAIM, meta={"failure_only": True})
    lab = Labeller().label(traj)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.claimed_act", 4, str(name))
