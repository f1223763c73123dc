"""Where a failed tool-calling conversation (tau-bench style: an agent, a simulated user, a domain policy) is
located when no located signal fired: synthetic runs, written the way the airline policy makes an agent work."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Airline agent policy\nBefore taking any actions that update the booking database, you must list the "
          "action details and obtain explicit user confirmation (yes) to proceed.")


def _cancel_run(answer: str) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Cancel my trip ABC123, user id amy_1.")
    b.call("get_user_details", {"user_id": "amy_1"}, result='{"user_id": "amy_1", "reservations": ["ABC123"]}')
    b.call("get_reservation_details", {"reservation_id": "ABC123"},
           result='{"reservation_id": "ABC123", "created_at": "2024-05-02T06:02:56", "cabin": "economy"}')
    b.say("Your booking ABC123 was made within the last 24 hours, so it can be cancelled with a full refund. "
          "Shall I cancel it?")  # step 6: the wrong decision, put to the user
    b.user(answer)  # step 7
    b.call("think", {"thought": "cancel it"}, result="")  # steps 8-9: the agent's own read-only call
    b.call("cancel_reservation", {"reservation_id": "ABC123"}, result='{"status": "cancelled"}')  # step 10
    return b


def test_a_write_the_user_confirmed_is_located_at_the_proposal_it_confirmed():
    t = _cancel_run("Yes, please go ahead.").deliver("ABC123 is cancelled; the refund takes 5-7 days.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 6)
    assert "confirmed by the user at step 7" in lab.first_signal.evidence and "cancel_reservation" in \
        lab.first_signal.evidence


def test_a_write_without_a_yes_stays_where_the_policy_was_broken():
    t = _cancel_run("Hmm, what are the fees?").deliver("ABC123 is cancelled.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 10)


def test_sure_in_make_sure_or_not_sure_is_no_yes():
    """A reply that holds "sure" without saying yes confirms nothing: the write stays where the policy broke."""
    for answer in ("I'll take that one. Could you make sure my original card is charged?",
                   "I'm not sure, what are the fees?", "Don't proceed yet, that is not correct."):
        lab = Labeller().label(_cancel_run(answer).deliver("ABC123 is cancelled.").build(0.0))
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 10), answer
        assert [(v.rule, v.step) for v in lab.violations] == [("policy.confirmation", 10)], answer
    for answer in ("Sure, go ahead.", "I'm not sure about the fee, but yes, cancel it.", "Yes, that is correct."):
        lab = Labeller().label(_cancel_run(answer).deliver("ABC123 is cancelled.").build(0.0))
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 6), answer


def test_a_multi_agent_log_keeps_the_write_where_it_is():
    t = _cancel_run("Yes, please go ahead.").deliver("ABC123 is cancelled.").build(0.0)
    for m in t.messages:
        if m["role"] == "assistant":
            m["name"] = "Planner"  # named speakers: a "user" turn there is no reply to a proposal
    assert Labeller().label(t).first_signal.step == 10


def test_a_healthy_confirmed_run_stays_healthy():
    t = _cancel_run("Yes, please go ahead.").deliver("ABC123 is cancelled.").build(1.0)
    assert Labeller().label(t).failure_class == "healthy"


def _balance_run() -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("What is the total of my gift card balances?")
    b.say("I'm unable to provide information about your gift card balances. Please check your profile.")  # step 2
    b.user("OK. Then change my reservation to business class, please.")
    b.say("I need your user id and reservation id to do that.").user("I don't have them.")
    return b


def test_a_failed_run_that_wrote_nothing_is_located_at_the_agents_first_refusal():
    t = _balance_run().deliver("Feel free to reach out once you have them; I can help then.").build(0.0)
    lab = Labeller().label(t)  # F4.stalled, located (tests/diagnosis/test_stalled.py); poor_delivery says the same
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 2)
    assert "first declined here: I'm unable to provide" in lab.first_signal.evidence
    assert any(s.id == "F4.poor_delivery" and s.step == 2 for s in lab.signals)


def test_without_a_refusal_or_with_a_write_the_delivery_keeps_its_place():
    b = TraceBuilder("t").system(POLICY).user("How many bags can I take?")
    t = b.say("As a gold member you may take 3 bags per passenger.").deliver("So 6 bags in all.").build(0.0)
    assert Labeller().label(t).first_signal.step == 3  # no refusal: the delivery
    b = _balance_run().call("update_reservation_flights", {"reservation_id": "ABC123"}, result="ok")
    lab = Labeller().label(b.deliver("Updated.").build(0.0))
    assert not any(s.id == "F4.poor_delivery" and s.step == 2 for s in lab.signals)  # a write locates it instead


def _option_run(*, look_up_between: bool) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Move my trip ABC123 to a later flight on May 20, user id amy_1.")
    b.call("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"},
           result='[{"flight_number": "HAT100", "price": 310}, {"flight_number": "HAT200", "price": 180}]')
    b.say("Option 1: HAT100 at $310. Option 2: HAT200 at $180. Would you like to proceed with Option 1?")  # step 4
    b.user("Yes, let's go with Option 1.")  # step 5: the plan accepted
    if look_up_between:  # the agent looks something up before restating: the restatement holds new facts
        b.call("get_user_details", {"user_id": "amy_1"}, result='{"payment_methods": {"credit_card_1": {}}}')
    b.say("To confirm: change ABC123 to HAT100 on May 20 for $310. Shall I proceed?")
    b.user("Yes, please go ahead.")
    b.call("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]}, result="ok")
    return b


def test_a_plan_accepted_before_its_restatement_is_located_where_it_was_first_put():
    """The user accepted the plan at step 5 (the cheaper option was there too); the agent only restated it for the
    explicit yes the policy asks for. The plan -- the failure, if any -- was put to the user at step 4."""
    t = _option_run(look_up_between=False).deliver("Your trip is now on HAT100.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    assert "confirmed by the user at step 7" in lab.first_signal.evidence


def _offer_answered(said: str) -> int:
    """The first write's step when the user answers two offered flights with ``said``, then says yes to the
    restatement (step 4: the offer; step 6: the restatement)."""
    b = TraceBuilder("t").system(POLICY).user("Move my trip ABC123 to a later flight on May 20, user id amy_1.")
    b.call("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"},
           result='[{"flight_number": "HAT100", "price": 310}, {"flight_number": "HAT200", "price": 180}]')
    b.say("Option 1: HAT100 at $310. Option 2: HAT200 at $180. Which would you like?")  # step 4
    b.user(said)
    b.say("To confirm: change ABC123 to HAT100 on May 20 for $310. Shall I proceed?").user("Yes, please go ahead.")
    b.call("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]}, result="ok")
    return Labeller().label(b.deliver("Your trip is now on HAT100.").build(0.0)).first_signal.step


@pytest.mark.parametrize("choice", ["I'd like to go with Option 1 for the trip, please.", "Let's go with Option 1.",
                                    "I'll take Option 1.", "We would prefer Option 1 then.", "I'll take it."])
def test_an_option_chosen_without_a_yes_word_accepts_the_reply_that_offered_it(choice):
    """Choosing an offered option ("I'd like to go with Option 1") accepts the reply that offered it, as "Yes, let's go
    with Option 1" does: the restatement after it only asks the yes the policy wants (before, a choice with no word of
    assent left the restatement as the proposal; tau-bench airline 7:0's dev label is the offer)."""
    assert _offer_answered(choice) == 4


@pytest.mark.parametrize("said", ["I'd like to take a look at Option 1 first.", "Should I go with Option 1?",
                                  "I don't want to go with Option 1.",
                                  # the verb of choosing, then no choice of what was offered: a refusal, something
                                  # else, a choice put off (f408752 read each as accepting the offer)
                                  "I would prefer not to change anything.", "I'd like to go with a different flight.",
                                  "We will pick something else.", "I'll choose later, thanks.",
                                  # "take" in its idioms of handling, not of choosing
                                  "I'll take it from here, thanks.", "I'll take over from here.",
                                  "I'll take it up with the airline myself.", "We'll take our business elsewhere.",
                                  "Let's take a break, I'll be back."])
def test_a_look_a_question_or_a_refusal_chooses_nothing(said):
    assert _offer_answered(said) == 6


def test_a_restatement_after_a_look_up_stays_the_proposal():
    t = _option_run(look_up_between=True).deliver("Your trip is now on HAT100.").build(0.0)
    assert Labeller().label(t).first_signal.step == 8  # the reply after get_user_details (steps 6-7)
    # and a plain restatement whose earlier reply the user did not accept (a question back) stays too
    b = TraceBuilder("t").system(POLICY).user("Move ABC123 to May 20, user id amy_1.")
    b.call("search_direct_flight", {"date": "2024-05-20"}, result='["HAT100 $310 09:00", "HAT200 $180 11:00"]')
    b.say("HAT100 at $310 or HAT200 at $180: which one?").user("Which one lands first?")  # steps 4, 5
    b.say("HAT100 lands first. Change ABC123 to HAT100 for $310: shall I proceed?").user("Yes, please.")  # 6, 7
    b.call("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]}, result="ok")
    assert Labeller().label(b.deliver("Done.").build(0.0)).first_signal.step == 6


def test_a_restatement_that_names_what_the_accepted_reply_did_not_stays_the_proposal():
    """The user accepted "the cheapest direct flight" (step 4); the restatement (step 6) names HAT100 at $310, which
    neither that reply nor the user had said (the search found it): the flight was decided there, not at step 4."""
    b = TraceBuilder("t").system(POLICY).user("Move my trip ABC123 to the cheapest flight on May 20, user id amy_1.")
    b.call("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"},
           result='[{"flight_number": "HAT100", "price": 310}, {"flight_number": "HAT200", "price": 180}]')
    b.say("I can move ABC123 to the cheapest direct flight on May 20. Would you like me to go ahead?")  # step 4
    b.user("Yes, please.")  # step 5
    b.say("To confirm: change ABC123 to HAT100 on May 20 for $310. Shall I proceed?")  # step 6
    b.user("Yes.")  # step 7
    b.call("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]}, result="ok")
    lab = Labeller().label(b.deliver("Done.").build(0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 6)


def _bags_after_a_change(*, change_result: str) -> TraceBuilder:
    """A confirmed flight change (proposal at step 4, yes at 5, the write at 6), then bags the user asks for and the
    agent adds without listing them for a yes (step 10): the policy's confirmation is missing at the second write."""
    b = TraceBuilder("t").system(POLICY).user("Move my trip ABC123 to HAT100 on May 20, user id amy_1.")
    b.call("get_reservation_details", {"reservation_id": "ABC123"}, result='{"reservation_id": "ABC123"}')
    b.say("To confirm: change ABC123 to HAT100 on May 20 for $310. Shall I proceed?")  # step 4
    b.user("Yes, please go ahead.")  # step 5
    b.call("update_reservation_flights", {"reservation_id": "ABC123", "flights": ["HAT100"]},
           result=change_result)  # step 6
    b.say("Done: ABC123 is on HAT100.").user("Great! Could you also add 2 checked bags?")  # steps 8, 9
    b.call("update_reservation_baggages", {"reservation_id": "ABC123", "total_baggages": 2},
           result='{"reservation_id": "ABC123", "total_baggages": 2}')  # step 10
    return b


def test_a_missing_yes_at_a_later_write_yields_to_the_first_write_that_went_through():
    """The state the run is judged on first changed at the confirmed flight change; the bags added later on the user's
    word without the listed yes break the procedure, not the outcome's first divergence (tau-bench airline 14:1's dev
    label is the proposal of the first write; the violation at the bag write was the first signal before)."""
    t = _bags_after_a_change(change_result='{"reservation_id": "ABC123", "flights": ["HAT100"]}')
    lab = Labeller().label(t.deliver("Two bags are added.").build(0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    assert ("F4.policy_violation", 10) in [(s.id, s.step) for s in lab.signals]  # still a signal, and in the log
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.confirmation", 10)]
    assert Labeller().first_signal(t.deliver("Two bags are added.").build(0.0))[1] == lab.first_signal


def test_a_missing_yes_after_a_refused_first_write_keeps_its_place():
    """A first write the tool refused changed nothing: the later write without a yes is where the state first changed,
    and the violation stays first there."""
    t = _bags_after_a_change(change_result="Error: not enough seats on flight HAT100").deliver("Bags added.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 10)
    assert Labeller().first_signal(t)[1] == lab.first_signal
