"""Class E from the conversation (diagnosis/environment.py) and F1 entity-claim contradictions
(diagnosis/claims.py): each rule fires where it should, stays quiet on its near misses, and -- run
unguarded -- never fires on a reward-1 tau-bench run or a resolved mini-swe-agent run."""

from __future__ import annotations

import json
import time

import pytest

from evoharness.diagnosis import environment as env
from evoharness.diagnosis.claims import first_contradiction
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

RESERVATION = {"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "created_at": "2024-05-01T09:08:54",
               "flights": [{"flight_number": "HAT136", "date": "2024-05-20", "price": 180}],
               "passengers": [{"first_name": "Mia"}, {"first_name": "Li"}],
               "payment_history": [{"payment_id": "gift_card_7091239", "amount": 360}],
               "tracking_id": "TRK847362915"}
CARD = {"payment_methods": {"gift_card_7091239": {"source": "gift_card", "amount": 157, "id": "gift_card_7091239"}}}


def _run(*replies: str, results=(CARD, RESERVATION), score: float = 0.0) -> Trajectory:
    msgs: list[dict] = [{"role": "system", "content": "policy"}, {"role": "user", "content": "my trip"}]
    for n, r in enumerate(results):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "get_details", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(r)})
    for r in replies:
        msgs += [{"role": "assistant", "content": r}, {"role": "user", "content": "ok"}]
    return Trajectory(id="c", task_id="c", task="my trip", messages=msgs, final_answer=replies[-1], score=score)


def _claim(*replies: str, **kw):
    s = first_contradiction(TraceView.of(_run(*replies, **kw)))
    return (s.step, s.evidence) if s else None


def test_a_claim_contradicting_the_latest_tool_result_is_located_where_first_made():
    ok = "Reservation ZFA04Y: flight HAT136 on May 20, 2024 has a price of $180."
    wrong = [("Flight HAT136 has a price of $210.", "price $210"),
             ("Reservation ZFA04Y departs on May 21.", "date"),
             ("Reservation ZFA04Y on May 20 has 3 passengers.", "3 passengers"),
             ("For reservation ZFA04Y the tracking id is TRK999999999.", "tracking id"),
             ("Gift card gift_card_7091239 has an amount of $360 left.", "amount $360")]
    for reply, what in wrong:
        step, evidence = _claim(ok, reply, "Anything else?")
        assert step == 8 and what in evidence, (reply, evidence)  # the second reply, not the first or the last
    assert _claim(ok, "Your user id is mia_li_3668 and reservation ZFA04Y has 2 passengers.") is None



def test_an_integer_past_a_floats_range_among_the_facts_is_passed_over_not_a_traceback():
    huge = int("1" + "0" * 400)  # JSON's integers have no limit; float() of this one overflows
    flights = [*RESERVATION["flights"], {"flight_number": "HAT137", "date": "2024-05-21", "price": huge}]
    results = (CARD, {**RESERVATION, "flights": flights})
    assert _claim("Reservation ZFA04Y has a price of $210.", results=results)[0] == 6
    assert _claim("Reservation ZFA04Y has a price of $180.", results=results) is None

def test_computed_amounts_references_and_updates_are_not_contradictions():
    assert _claim("The total cost of $360 for reservation ZFA04Y was paid.") is None  # a computed total
    assert _claim("Reservation ZFA04Y: the additional cost will be $50.") is None
    # the gift card's own record (amount 157) is not replaced by a reservation that only pays with it
    assert _claim("Gift card gift_card_7091239 has an amount of $157.") is None
    updated = {**RESERVATION, "flights": [{"flight_number": "HAT136", "date": "2024-05-22", "price": 190}]}
    assert _claim("Reservation ZFA04Y now flies on May 22.", results=(CARD, RESERVATION, updated)) is None
    assert _claim("Reservation ZFA04Y flies on May 20.", results=(CARD, RESERVATION, updated))[0] == 8
    assert _claim("The price of HAT136 is $210.", results=()) is None  # no tool facts: nothing to contradict


def test_the_detector_is_in_the_catalogue_behind_its_switch_and_leaves_healthy_runs_alone():
    t = _run("The price of flight HAT136 is $210.")
    on = DiagnosisConfig(entity_claims=True)
    lab = Labeller(on).label(t)
    assert lab.first_signal.id == "F1.contradicted_claim" and lab.failure_class == "F1" and lab.first_signal.step == 6
    assert not any(s.id == "F1.contradicted_claim" for s in Labeller().label(t).signals)  # off by default
    assert Labeller(on).label(_run("The price of flight HAT136 is $210.", score=1.0)).failure_class == "healthy"


def _chat(*turns: tuple[str, str], meta=None, score: float = 0.0) -> Trajectory:
    msgs = [{"role": "system", "content": "policy"}]
    for role, text in turns:
        if role == "call":
            name, result = text.split("|", 1)
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{len(msgs)}", "type": "function", "function": {"name": name, "arguments": "{}"}}]})
            msgs.append({"role": "tool", "tool_call_id": f"c{len(msgs) - 1}", "content": result})
        else:
            msgs.append({"role": role, "content": text})
    return Trajectory(id="e", task_id="e", task=msgs[1]["content"], messages=msgs, final_answer="done",
                      score=score, meta=meta or {})


def _fires(detector, t) -> list[int]:
    return [s.step for s in detector.detect(TraceView.of(t), DiagnosisConfig())]


def _rule(detector, view):
    """The rule unguarded: ``find`` where the detector has one (``detect`` skips Healthy runs there)."""
    return detector.find(view) if hasattr(detector, "find") else detector.detect(view, DiagnosisConfig())


def test_user_quit_before_the_agent_could_act():
    quit_ = _chat(("user", "I want to change my flight."), ("assistant", "Sure. What is your reservation ID?"),
                  ("user", "Actually, never mind. ###STOP###"))
    assert _fires(env.UserQuitDetector(), quit_) == [3]
    lab = Labeller().label(quit_)
    assert lab.failure_class == "E" and lab.lever == "none" and lab.first_signal.id == "E.user_quit"
    answered = _chat(("user", "Cancel it."), ("assistant", "Shall I transfer you to a human agent?"),
                     ("user", "Yes, please. ###STOP###"))
    closing = _chat(("user", "Hi"), ("assistant", "Done. Is there anything else I can help with?"),
                    ("user", "No thanks ###STOP###"))
    acted = _chat(("user", "Cancel ABC123."), ("call", "cancel_reservation|{}"),
                  ("assistant", "Cancelled. Would you like a receipt?"), ("user", "###STOP###"))
    for t in (answered, closing, acted):
        assert _fires(env.UserQuitDetector(), t) == []


def test_user_confirms_and_leaves_in_one_message():
    """Yes to a proposed change and ###STOP### in the same message: the agent never gets a turn to make it."""
    proposal = ("assistant", "I can issue a $50 certificate for the delay. Would you like me to proceed?")
    gone = _chat(("user", "My flight was delayed."), ("call", "get_user_details|{}"), proposal,
                 ("user", "Sure, please go ahead and issue the certificate. Thanks! ###STOP###"))
    assert _fires(env.UserQuitDetector(), gone) == [5]
    declined = _chat(("user", "My flight was delayed."), ("call", "get_user_details|{}"), proposal,
                     ("user", "No, that's okay. ###STOP###"))
    transfer = _chat(("user", "Cancel it."), ("call", "cancel_reservation|{}"),
                     ("assistant", "Shall I transfer you to a human agent to proceed?"), ("user", "Yes ###STOP###"))
    done = _chat(("user", "Book it."), ("call", "book_reservation|{}"),
                 ("assistant", "Booked. Anything else?"), ("user", "Yes, thanks, bye ###STOP###"))
    for t in (declined, transfer, done):
        assert _fires(env.UserQuitDetector(), t) == []


@pytest.mark.parametrize("said, fires", [
    ("Absolutely, please. ###STOP###", True),  # a word of assent the confirmation rule reads
    ("Please send it. ###STOP###", True),  # a request to do what was asked
    ("Could you send it for me? ###STOP###", True),
    ("Please change it. ###STOP###", False)])  # a request for another action: no yes to the one asked
def test_user_quit_reads_the_yes_as_the_confirmation_rule_does(said, fires):
    """The user who says yes and leaves says it in any words the confirmation rule takes for a yes
    (``consent.affirmed``): before, only "yes", "sure", "ok", "go ahead" and their like were read, so "Absolutely,
    please." or "Please send it." then ###STOP### was a run that ended for no reason."""
    gone = _chat(("user", "My flight was delayed."), ("call", "get_user_details|{}"),
                 ("assistant", "I can offer a $50 certificate for the delay. Shall I send it to you?"), ("user", said))
    assert _fires(env.UserQuitDetector(), gone) == ([5] if fires else [])


def test_user_withholds_an_id_its_instruction_gives():
    meta = {"user_instruction": "You are ethan_martin_2396 and you want compensation for a delayed flight."}
    ask = ("assistant", "Could you please provide your user ID or reservation ID?")
    denied = _chat(("user", "My flight was delayed."), ask,
                   ("user", "I'm sorry, but I don't have that information with me right now."),
                   ("assistant", "I need your user ID to help."), ("user", "OK, bye. ###STOP###"), meta=meta)
    assert _fires(env.UserWithheldIdDetector(), denied) == [3]  # "that information": the kinds the agent asked for
    named = _chat(("user", "Delayed flight."), ("assistant", "How can I help?"),
                  ("user", "I don't remember my user ID at the moment."), meta=meta)
    assert _fires(env.UserWithheldIdDetector(), named) == [3]
    forgot = {"user_instruction": meta["user_instruction"] + " You do not remember your user id."}
    gave_it = _chat(("user", "Delayed."), ask, ("user", "I don't have the reservation ID, but I'm ethan_martin_2396."),
                    meta=meta)
    looked_up = _chat(("user", "Delayed."), ask, ("user", "I don't have my user ID."),
                      ("call", "get_reservation_details|{}"), ("assistant", "Found it."), meta=meta)
    reservation_only = _chat(("user", "Delayed."), ask, ("user", "I don't have my reservation ID."), meta=meta)
    told_forgot = _chat(("user", "Delayed."), ask, ("user", "I don't have my user ID."), meta=forgot)
    no_instruction = _chat(("user", "Delayed."), ask, ("user", "I don't have my user ID."))
    for t in (told_forgot, gave_it, looked_up, reservation_only, no_instruction):
        assert _fires(env.UserWithheldIdDetector(), t) == [], t.messages[-1]
    lab = Labeller().label(named)
    assert (lab.failure_class, lab.first_signal.id, lab.lever) == ("E", "E.user_withheld_id", "none")


def test_user_off_script_needs_the_instruction_and_an_invented_identifier():
    turns = (("user", "Hi, I am mia_li_3668."), ("assistant", "Your email?"),
             ("user", "It is mia.li9000@example.com"))
    meta = {"user_instruction": "You are mia_li_3668. You want to fly to Seattle."}
    assert _fires(env.UserOffScriptDetector(), _chat(*turns, meta=meta)) == [3]
    assert _fires(env.UserOffScriptDetector(), _chat(*turns)) == []  # no instruction: users know their own ids
    told = {"user_instruction": meta["user_instruction"] + " Your email is mia.li9000@example.com."}
    assert _fires(env.UserOffScriptDetector(), _chat(*turns, meta=told)) == []


@pytest.mark.parametrize("said, fires", [
    ("Done. My phone says: Airplane Mode is now OFF.\nStatus Bar: Excellent | 5G | Data Enabled", False),
    ("It shows 2G and one bar.", False),
    ("Done. My phone says: Network: QX7Z9 5G", True)])  # a longer token the user made up is still off script
def test_a_two_character_token_is_no_identifier_the_user_made_up(said, fires):
    """tau2 telecom's gold paths laid out as tau-bench records them (no place for the customer's own phone calls):
    the customer tells what its phone shows, "5G" on the status bar, and 58 of the 114 gold runs were
    ``E.user_off_script`` there. A token of two characters names a kind or a size, no record the user could invent."""
    meta = {"user_instruction": "You are John Smith, phone 555-123-2002. Your mobile data is not working."}
    t = _chat(("user", "My mobile data is not working."),
              ("assistant", "Please toggle airplane mode on your phone, and tell me what it shows."),
              ("user", said), meta=meta)
    assert _fires(env.UserOffScriptDetector(), t) == ([3] if fires else [])


@pytest.mark.parametrize("said, fires", [
    ("I'd like seat 3A, please.", True), ("Could I have seats 3A and 3B?", True), ("Seat number 2C, please.", True),
    ("I'd like seat 4F, as my instructions say.", False),  # the instruction's own seat
    ("I'd like a window seat, please.", False), ("My phone shows 5G near seat row three.", False)])
def test_a_two_character_label_of_a_place_is_one_the_user_can_make_up(said, fires):
    """An airline seat the user states that its instruction never gave ("seat 3A") is made up: since the twenty-second
    session no two-character token was (the telecom status bar's "5G" / "2G"); now one a place's noun puts is."""
    meta = {"user_instruction": "You are Mia Li, reservation ZFA04Y. You want to move to seat 4F on your flight."}
    t = _chat(("user", "I want to change my seat on reservation ZFA04Y."),
              ("assistant", "Sure. Which seat would you like?"), ("user", said), meta=meta)
    assert _fires(env.UserOffScriptDetector(), t) == ([3] if fires else [])


def test_unsatisfiable_task_and_the_benchmarks_own_simulator_verdict():
    t = _chat(("user", "Cancel reservation XKQ7731."),
              ("call", "get_reservation_details|Error: reservation XKQ7731 not found"),
              ("assistant", "I could not find it."), ("user", "It must be there: XKQ7731!"))
    assert _fires(env.UnsatisfiableTaskDetector(), t) == [3]
    moved_on = _chat(("user", "Cancel reservation XKQ7731."),
                     ("call", "get_reservation_details|Error: reservation XKQ7731 not found"),
                     ("assistant", "I could not find it."), ("user", "Sorry, it is XKQ7732."))
    assert _fires(env.UnsatisfiableTaskDetector(), moved_on) == []
    sim = _chat(("user", "hi"), ("assistant", "Hello"), ("user", "###STOP###"),
                meta={"environment_failure": True, "termination_reason": "user_error"})
    assert _fires(env.UserSimulatorErrorDetector(), sim) == [3]
    assert _fires(env.UserSimulatorErrorDetector(), _chat(("user", "hi"))) == []


def test_the_withheld_id_rule_unguarded_fires_on_one_reward_1_run_at_most(full_shared_data):
    """Unguarded, ``E.user_withheld_id`` fires on one reward-1 airline run (21:1: the user withheld its id and the
    task expected no change anyway), on no mini-swe-agent run; more would mean the rule lost its precision."""
    fired = {folder: [] for folder in ("tau_bench_airline_gpt4o", "mini_swe_agent_sample")}
    for folder in fired:
        for t in load_paths([full_shared_data / folder]):
            if t.score == 1.0 and env.UserWithheldIdDetector().find(TraceView.of(t)):
                fired[folder].append(t.id)
    assert len(fired["tau_bench_airline_gpt4o"]) <= 1 and not fired["mini_swe_agent_sample"], fired


def test_new_rules_unguarded_never_fire_on_reward_1_or_resolved_runs(full_shared_data):
    detectors = [env.UserSimulatorErrorDetector(), env.UserQuitDetector(), env.UserOffScriptDetector(),
                 env.UnsatisfiableTaskDetector()]
    healthy = fired = 0
    for folder in ("tau_bench_airline_gpt4o", "mini_swe_agent_sample"):
        for t in load_paths([full_shared_data / folder]):
            if folder.startswith("tau"):  # the importer keeps the simulated user's instruction
                assert len(t.meta["user_instruction"]) > 50, t.id
            view = TraceView.of(t)
            found = [s for d in detectors for s in _rule(d, view)]
            if first_contradiction(view):
                found.append(first_contradiction(view))
            if t.score == 1.0:
                healthy += 1
                assert not found, (t.id, found)
            else:
                fired += bool(found)
    assert healthy == 94 and fired >= 2  # 84 tau-bench reward-1 + 10 resolved; E fires on some failures


def test_claims_on_a_hostile_reply_stay_fast():
    results = ([{"id": f"ent{i:05d}", "price": i, "date": "2024-05-01"} for i in range(3000)],)
    start = time.monotonic()
    for reply in ("price $1 ent00001 on may 2. " * 4000, "ent00001 " + "on " * 40000, "price" + " " * 120_000 + "$1"):
        first_contradiction(TraceView.of(_run(reply, results=results)))
    assert time.monotonic() - start < 10  # 0.04 s measured; quadratic scans of these replies take minutes
