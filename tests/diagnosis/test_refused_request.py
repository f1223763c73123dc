"""F4.refused_request: a change turned down as a whole ("cannot be modified"), then something else written in its
place -- located at the refusal, from the trace alone (synthetic runs written the way tau-bench's agents work)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass
from evoharness.diagnosis.refusals import blanket, requested_objects
from evoharness.traces.builder import TraceBuilder

AIRLINE = ("# Airline agent policy\nBefore taking any actions that update the booking database, you must list the "
           "action details and obtain explicit user confirmation (yes) to proceed.\n"
           "- Change passengers: the user can modify passengers but cannot modify the number of passengers.\n"
           "- Change cabin: all reservations, including basic economy, can change cabin.")
RETAIL = ("# Retail agent policy\nBefore taking consequential actions, list the action details and obtain explicit "
          "user confirmation (yes) to proceed.\n- The user can modify the shipping address of a pending order.\n"
          "- A delivered order can be returned or exchanged.")


def _airline(refusal: str, write: str, args: dict) -> TraceBuilder:
    b = TraceBuilder("t").system(AIRLINE).user("I need to change the passenger on my trip to myself. User id omar_1.")
    b.call("get_user_details", {"user_id": "omar_1"}, result='{"user_id": "omar_1", "reservations": ["FQ8APE"]}')
    b.call("get_reservation_details", {"reservation_id": "FQ8APE"},
           result='{"reservation_id": "FQ8APE", "cabin": "basic_economy", "passengers": [{"first_name": "Ivan"}]}')
    b.say(refusal)  # step 6
    b.user("Yes, please go ahead.")  # step 7
    b.call(write, args, result='{"reservation_id": "FQ8APE"}')  # step 8
    return b


BLANKET = ("The reservation is in basic economy, which cannot be modified. I can book a new reservation for you "
           "instead. Shall I book it?")


def test_a_change_turned_down_as_a_whole_then_another_write_is_located_at_the_refusal():
    t = _airline(BLANKET, "book_reservation", {"user_id": "omar_1", "flights": [{"flight_number": "HAT056"}]}) \
        .deliver("Your new reservation is booked.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.refused_request", 6)
    assert "passenger" in lab.first_signal.evidence and "book_reservation" in lab.first_signal.evidence


def test_a_later_write_that_does_the_change_asked_leaves_the_write_where_it_was():
    t = _airline(BLANKET, "update_reservation_passengers", {"reservation_id": "FQ8APE",
                                                            "passengers": [{"first_name": "Omar"}]}) \
        .deliver("The passenger is changed.").build(0.0)
    lab = Labeller().label(t)
    assert "F4.refused_request" not in [s.id for s in lab.signals]
    # (the yes answered "Shall I book it?": no yes to a passenger change, so the write breaks the policy)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 8)


def test_a_refusal_of_the_very_action_asked_is_no_blanket_refusal():
    """The agent judged the request itself ("unable to change the passenger"): right as often as not, so the run is
    placed where it was."""
    t = _airline("I'm unable to change the passenger on this reservation. I can book a new one instead; shall I?",
                 "book_reservation", {"user_id": "omar_1"}).deliver("Your new reservation is booked.").build(0.0)
    lab = Labeller().label(t)
    assert "F4.refused_request" not in [s.id for s in lab.signals]
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 8)  # (omar_1 was never listed)


def test_a_run_that_reached_its_goal_stays_healthy():
    t = _airline(BLANKET, "book_reservation", {"user_id": "omar_1"}).deliver("Booked.").build(1.0)
    lab = Labeller().label(t)
    assert lab.failure_class is FailureClass.healthy and lab.first_signal is None


def test_a_thing_the_policy_never_names_is_no_request_it_refused():
    """A user's product or place ("the keyboard") is not what a policy's actions are done to: no signal."""
    b = TraceBuilder("t").system(RETAIL).user("Please change the keyboard in my order #W1 to a black one.")
    b.call("get_order_details", {"order_id": "#W1"}, result='{"order_id": "#W1", "status": "delivered"}')
    b.say("Your order is delivered, so it cannot be modified. I can return it for you instead; shall I?")
    b.user("Yes, please.")
    b.call("return_delivered_order_items", {"order_id": "#W1"}, result='{"status": "return requested"}')
    lab = Labeller().label(b.deliver("The return is requested.").build(0.0))
    assert "F4.refused_request" not in [s.id for s in lab.signals]


def test_a_retail_address_change_turned_down_as_a_whole_is_located_at_the_refusal():
    b = TraceBuilder("t").system(RETAIL).user("Please change the address on my order #W1 to 12 Oak St.")
    b.call("get_order_details", {"order_id": "#W1"}, result='{"order_id": "#W1", "status": "pending"}')
    b.say("Your order cannot be modified. I can cancel it for you instead; shall I?")  # step 4
    b.user("Yes, please.")
    b.call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, result='{"status": "cancelled"}')
    lab = Labeller().label(b.deliver("The order is cancelled.").build(0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.refused_request", 4)


@pytest.mark.parametrize(("text", "objects"), [
    ("I need to change the passenger on my upcoming trip to myself.", ["passenger"]),
    ("Can you add three checked bags, please?", ["bag"]),
    ("I'd like to upgrade to economy class.", []),  # a target, not a thing acted on
    ("The flights I want to cancel are these two.", []),  # no object phrase after the verb
    ("Please update my addresses.", ["address"]),
])
def test_requested_objects(text, objects):
    assert requested_objects(text) == objects


@pytest.mark.parametrize(("text", "said"), [
    ("The reservation is in basic economy, which cannot be modified.", True),
    ("Cannot be changed after booking.", True),
    ("It can't be updated now", True),
    ("Basic economy flights can not be altered.", True),
    ("It cannot be modifiedx", False),
    ("This cannot be cancelled.", False),  # a refusal of one action, not of every change
    ("Dates can be modified.", False),
])
def test_blanket(text, said):
    assert blanket(text) is said
