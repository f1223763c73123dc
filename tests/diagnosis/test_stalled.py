"""F4.stalled: a failed conversation that wrote nothing is located where the agent first would not go on -- a
refusal, or asking again for an identifier the user just said it lacks. Synthetic runs shaped like a customer
service chat (an agent, a simulated user)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = "# Agent policy\nAuthenticate the user before acting; list the action and get an explicit yes first."
META = {"user_instruction": "You are omar_rossi_1241. You want to add 3 checked bags to your trip to Chicago."}


def _run(*turns: tuple[str, str], meta: dict | None = None, score: float = 0.0):
    b = TraceBuilder("t").system(POLICY)
    for role, text in turns:
        if role == "user":
            b.user(text)
        elif role == "call":
            name, _, result = text.partition("|")
            b.call(name, {"user_id": "omar_rossi_1241"}, result=result or "{}")
        else:
            b.say(text)
    # delivered as tau-bench's runs are: the agent's last reply is the answer, the user's stop message ends it
    b.final_answer = next(m["content"] for m in reversed(b.messages) if m["role"] == "assistant" and m["content"])
    t = b.end("delivered").build(score)
    t.meta.update(meta or {})
    return t


ASK = ("assistant", "Could you please provide your user ID and the reservation ID?")  # step 2
DENY = ("user", "My user ID is omar_rossi_1241. Unfortunately, I don't have my reservation ID with me.")  # step 3
INSIST = ("assistant", "To proceed, I'll need the reservation ID. Please check your email for it.")  # step 4
LEAVE = [("user", "I'll check later. Can you tell me the bag fee meanwhile?"),
         ("assistant", "It is $50 a bag. Let me know the reservation ID and I'll add them?"),
         ("user", "Alright, thanks, I'll reach out once I find it. ###STOP###")]  # steps 5-7


def test_asking_again_for_an_id_the_user_lacks_is_where_a_run_that_wrote_nothing_failed():
    """Before, the user's leaving with the agent's question unanswered made it E.user_quit (step 7); the agent had
    stalled at step 4, given the user id and still asking for the reservation id."""
    lab = Labeller().label(_run(("user", "I want to add bags to my Chicago trip."), ASK, DENY, INSIST, *LEAVE,
                                meta=META))
    assert (lab.first_signal.id, lab.first_signal.step, lab.failure_class) == ("F4.stalled", 4, "F4")
    assert "reservation id the user said it lacks (step 3)" in lab.first_signal.evidence


def test_an_earlier_refusal_is_the_stall():
    refuse = ("assistant", "I'm unable to provide information about your gift card balances.")  # step 2
    lab = Labeller().label(_run(("user", "What are my gift card balances?"), refuse,
                                ("user", "OK. I also want bags added, but I don't have my reservation ID."),
                                INSIST, *LEAVE, meta=META))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 2)
    assert "first declined here" in lab.first_signal.evidence


def test_no_stall_where_the_agent_offers_a_way_on_looks_up_or_writes():
    start = (("user", "I want to add bags to my Chicago trip."), ASK, DENY)
    other_way = ("assistant", "No problem: I can look your reservations up from your user ID.")
    looked_up = [("call", "get_user_details"), ("assistant", "I found your trip; I need you to confirm it.")]
    wrote = [INSIST, ("user", "It's ABC123."), ("call", "update_reservation_baggages"),
             ("assistant", "Done, 3 bags added.")]
    for turns in ([other_way, *LEAVE], [*looked_up, *LEAVE], wrote):
        lab = Labeller().label(_run(*start, *turns, meta=META))
        assert not any(s.id == "F4.stalled" for s in lab.signals), turns[0]


def test_an_id_the_users_instruction_gives_is_the_users_to_give():
    """The user withheld its own user id: insisting on it is the agent's part (E.user_withheld_id reads that side)."""
    deny = ("user", "I'm sorry, I don't have my user ID with me right now.")
    insist = ("assistant", "I need your user ID to proceed with any changes.")
    lab = Labeller().label(_run(("user", "Add bags to my trip."), ASK, deny, insist, meta=META))
    assert not any(s.id == "F4.stalled" for s in lab.signals)
    assert (lab.first_signal.id, lab.first_signal.step) == ("E.user_withheld_id", 3)
    # without an instruction in the trace nothing says the user has it: the agent stalled
    lab = Labeller().label(_run(("user", "Add bags to my trip."), ASK, deny, insist))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 4)


def test_a_reward_1_run_stays_healthy():
    t = _run(("user", "I want to add bags to my Chicago trip."), ASK, DENY, INSIST, *LEAVE, meta=META, score=1.0)
    assert Labeller().label(t).failure_class == "healthy"


@pytest.mark.parametrize("reply", [
    "I need the reservation ID to add the bags. Alternatively, I can look up your reservations from your user ID.",
    "You don't need the reservation ID: I can find it from your user ID. Shall I?",
    "I'd need the reservation ID, or let me search your bookings under your user ID instead.",
])
def test_asking_for_the_id_while_offering_a_way_without_it_is_no_stall(reply):
    """The docstring's 'offering no way on': a reply that names the id and 'need' but offers to find the booking
    itself (or says the id is not needed) was F4.stalled at that reply."""
    lab = Labeller().label(_run(("user", "I want to add bags to my Chicago trip."), ASK, DENY, ("assistant", reply),
                                *LEAVE, meta=META))
    assert not any(s.id == "F4.stalled" for s in lab.signals), lab.first_signal


@pytest.mark.parametrize("reply", [
    "To proceed, I'll need the reservation ID. You can usually find it in your booking confirmation email.",
    "Unfortunately, I need the reservation ID. If you can find it, please let me know, and I'll be happy to help.",
])
def test_pointing_the_user_to_where_the_id_is_is_still_insisting(reply):
    lab = Labeller().label(_run(("user", "I want to add bags to my Chicago trip."), ASK, DENY, ("assistant", reply),
                                *LEAVE, meta=META))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 4)


def test_the_evidence_names_the_identifier_as_the_conversation_does():
    """tau retail asks for an order number: the evidence called it a 'reservation id' (the kind's label); it names
    the identifier as the user denied it (the label's class and step are unchanged)."""
    ask = ("assistant", "Could you please provide your user ID and the order number?")
    deny = ("user", "My user ID is omar_rossi_1241. Unfortunately, I don't have my order number with me.")
    insist = ("assistant", "To proceed, I'll need the order number. Please check your email for it.")
    lab = Labeller().label(_run(("user", "I want to return a lamp."), ask, deny, insist, *LEAVE, meta=META))
    assert (lab.first_signal.id, lab.first_signal.step, lab.failure_class) == ("F4.stalled", 4, "F4")
    assert "asked again for the order number the user said it lacks (step 3)" in lab.first_signal.evidence
    # the user's side: an order id its instruction gives, withheld
    meta = {"user_instruction": "You are omar_rossi_1241. You want to return the lamp of order #W2378156."}
    deny = ("user", "I'm sorry, I don't remember the order id.")
    lab = Labeller().label(_run(("user", "I want to return a lamp."), ask, deny, insist, meta=meta))
    assert (lab.first_signal.id, lab.first_signal.step) == ("E.user_withheld_id", 3)
    assert lab.first_signal.evidence.startswith("the simulated user says it lacks its order id, which its "
                                                "instruction gives (#W2378156)"), lab.first_signal.evidence


def test_a_failed_look_up_reported_is_no_refusal():
    """'I'm unable to find a reservation ...' reports a look-up that found nothing, and asks on: it declined nothing.
    It was taken for the stall (step 4); the agent stalled where it asked again for the id the user lacks."""
    lab = Labeller().label(_run(
        ("user", "I want to add bags to my Chicago trip. My user ID is omar_rossi_1241."),
        ("call", "get_user_details|{\"reservations\": [\"4WQ150\"]}"),  # steps 2, 3
        ("assistant", "I'm unable to find a reservation to Chicago in your profile. Could you provide the "
                      "reservation ID?"),  # step 4
        ("user", "Unfortunately, I don't have my reservation ID with me."),  # step 5
        INSIST, *LEAVE, meta=META))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 6), lab.first_signal
    assert "asked again for the reservation id" in lab.first_signal.evidence


def test_asking_again_after_the_delivery_is_no_stall():
    """The run delivered its answer (the bag fee, step 2); asking for the reservation id after it is no stall of the
    delivered run: the insistence search ran to the end of the conversation."""
    t = _run(("user", "What is the fee for a checked bag?"), ("assistant", "It is $50 a bag."),
             ("user", "I also want bags added, but I don't have my reservation ID."), INSIST,
             ("user", "Alright, thanks, I'll reach out once I find it. ###STOP###"), meta=META)
    t.final_answer = "It is $50 a bag."
    lab = Labeller().label(t)
    assert "F4.stalled" not in [s.id for s in lab.signals], lab.signals


@pytest.mark.parametrize(("reply", "declines"), [
    # the object of "see / find" is an action: the agent says it cannot do what was asked
    ("I can't see any way to refund this booking.", True),
    ("I'm unable to find a way to cancel a basic economy ticket.", True),
    ("We can't see how to change the flight without a fee waiver.", True),
    ("I cannot find any option to upgrade this reservation.", True),
    ("I'm not able to see any means of waiving the fee.", True),
    # the object is what a search was for: a report that the look-up found nothing
    ("I can't find a reservation to Chicago in your profile.", False),
    ("I'm unable to locate your order #W123.", False),
    ("I can't see any bookings under that name.", False),
    ("We're unable to retrieve the payment method on file.", False),
    ("I can't find any options for flights on that date.", False),
    ("I can't see how many bags are on the reservation.", False),
    ("I'm unable to find any means of payment on file.", False),
    # "way" as the manner of something looked for, not a way to act (as "how many", "means of payment")
    ("I can't see the way the fare was calculated in the booking.", False),
    ("I'm unable to find the ways you paid in your profile.", False),
    ("I can't see any way I could waive the fee.", True),
    ("I'm sorry, I can't find a way.", True),
])
def test_cannot_see_a_way_to_do_it_declines_and_cannot_find_a_record_reports(reply, declines):
    """Since the look-up exception (b3b4803) "I can't see any way to refund this" was no refusal: "see" and "find"
    were taken for a look-up whatever their object. An action as their object ("a way to refund", "how to change")
    says the agent cannot do the task; a thing looked for ("a reservation", "your order") reports a search."""
    from evoharness.diagnosis.detectors import _refuses

    assert _refuses(reply.lower()) is declines
    lab = Labeller().label(_run(("user", "Please refund my booking."), ("assistant", reply),  # step 2
                                ("user", "OK. I also want bags added, but I don't have my reservation ID."),
                                INSIST, *LEAVE, meta=META))
    declined = (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 2)
    assert declined is declines, lab.first_signal
