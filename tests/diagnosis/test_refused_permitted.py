"""policy.refused_permitted: the agent turns down a change its own domain policy permits in so many words -- located
at the refusal (synthetic runs written the way tau-bench's agents work; the policy sentences are the kinds a domain
policy states)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass
from evoharness.diagnosis.permissions import read_policy
from evoharness.traces.builder import TraceBuilder

AIRLINE = ("# Airline agent policy\nBefore taking any actions that update the booking database, you must list the "
           "action details and obtain explicit user confirmation (yes) to proceed.\n"
           "- Change flights: Basic economy flights cannot be modified.\n"
           "- Change cabin: all reservations, including basic economy, can change cabin without changing the flights.\n"
           "- Change passengers: The user can modify passengers but cannot modify the number of passengers.")
# the same domain with the permission stated under a condition: no plain permission, so no refusal breaks one
CONDITIONAL = AIRLINE.replace("The user can modify passengers but", "If the reservation is not basic economy, the "
                                                                   "user can modify passengers but")


def _run(refusal: str, write: str, args: dict, policy: str = AIRLINE,
         ask: str = "I need to change the passenger on my trip to myself. User id omar_1.") -> TraceBuilder:
    b = TraceBuilder("t").system(policy).user(ask)
    b.call("get_user_details", {"user_id": "omar_1"}, result='{"user_id": "omar_1", "reservations": ["FQ8APE"]}')
    b.call("get_reservation_details", {"reservation_id": "FQ8APE"},
           result='{"reservation_id": "FQ8APE", "cabin": "basic_economy", "passengers": [{"first_name": "Ivan"}]}')
    b.say(refusal)  # step 6
    b.user("Yes, please go ahead.")  # step 7
    b.call(write, args, result='{"reservation_id": "FQ8APE"}')  # step 8
    return b


BLANKET = ("The reservation is in basic economy, which cannot be modified. For another passenger I can book a new "
           "reservation instead. Shall I book it?")
BOOK = {"user_id": "omar_1", "flights": [{"flight_number": "HAT056"}], "passengers": [{"first_name": "Omar"}]}


def _first(t):
    lab = Labeller().label(t)
    return lab, (lab.first_signal.id, lab.first_signal.step) if lab.first_signal else None


def test_a_blanket_refusal_of_a_change_the_policy_permits_is_located_at_the_refusal():
    lab, first = _first(_run(BLANKET, "book_reservation", BOOK).deliver("Your new reservation is booked.").build(0.0))
    assert first == ("F4.policy_violation", 6)
    assert "policy.refused_permitted" in lab.first_signal.evidence
    assert "can modify passengers" in lab.first_signal.evidence  # the policy's sentence is quoted
    assert [v.step for v in lab.violations if v.rule == "policy.refused_permitted"] == [6]


def test_a_refusal_naming_the_permitted_thing_is_located_at_the_refusal():
    t = _run("This reservation is in basic economy class, which cannot be modified to change passengers.",
             "update_reservation_flights", {"reservation_id": "FQ8APE", "cabin": "economy"}) \
        .deliver("Your cabin is upgraded.").build(0.0)
    assert _first(t)[1] == ("F4.policy_violation", 6)


@pytest.mark.parametrize("refusal", [
    # another action than the one permitted: a removal changes the number of passengers
    "I'm unable to remove a passenger from an existing reservation. Shall I book a new one instead?",
    # the agent applies a rule the policy states (basic economy flights cannot be modified)
    "Basic economy flights cannot be modified, so I cannot change the passenger's flights. Shall I book a new one?",
    # a blanket refusal whose reply never names the thing the user asked about
    "The reservation is in basic economy, which cannot be modified. Shall I book a new one instead?",
    # a prohibition's thing: the number of passengers
    "I cannot change the number of passengers on a reservation. Shall I book a new one instead?",
])
def test_a_refusal_the_policy_backs_is_no_violation(refusal):
    lab, _ = _first(_run(refusal, "book_reservation", BOOK).deliver("Booked.").build(0.0))
    assert "policy.refused_permitted" not in [v.rule for v in lab.violations]


def test_a_later_write_that_makes_the_change_on_the_same_reservation_resolves_the_refusal():
    t = _run(BLANKET, "update_reservation_passengers",
             {"reservation_id": "FQ8APE", "passengers": [{"first_name": "Omar"}]}).deliver("Done.").build(0.0)
    lab, _ = _first(t)
    assert "policy.refused_permitted" not in [v.rule for v in lab.violations]


def test_a_permission_under_a_condition_or_a_thing_the_user_never_named_is_no_violation():
    conditional = _run(BLANKET, "book_reservation", BOOK, policy=CONDITIONAL).deliver("Booked.").build(0.0)
    unasked = _run(BLANKET, "book_reservation", BOOK, ask="I want to fly to Chicago instead. User id omar_1.") \
        .deliver("Booked.").build(0.0)
    for t in (conditional, unasked):
        assert "policy.refused_permitted" not in [v.rule for v in _first(t)[0].violations]


def test_a_run_that_reached_its_goal_stays_healthy():
    lab, first = _first(_run(BLANKET, "book_reservation", BOOK).deliver("Booked.").build(1.0))
    assert lab.failure_class is FailureClass.healthy and first is None and lab.violations == []


@pytest.mark.parametrize(("sentence", "permitted"), [
    ("Change passengers: The user can modify passengers but cannot modify the number of passengers.",
     [("modify", "passenger")]),
    ("Change cabin: all reservations, including basic economy, can change cabin without changing the flights.",
     [("change", "cabin")]),
    ("The user can add but not remove checked bags.", [("add", "bag")]),
    ("Customers can update their shipping address.", [("update", "shipping")]),
    # not plain permissions: a qualified subject, a condition, "only", an opening condition, no verb of change
    ("Business flights can always be cancelled.", []),
    ("Other reservations can be modified without changing the origin.", []),
    ("The user can modify passengers if the reservation is not basic economy.", []),
    ("The user can only choose a single payment method.", []),
    ("For a pending order, you can take actions to modify its shipping address.", []),
    ("As a retail agent, you can help users cancel or modify pending orders.", []),
])
def test_the_policy_sentences_read_as_permissions(sentence, permitted):
    assert [(p.verb, p.thing) for p in read_policy(sentence)[0]] == permitted


def test_the_prohibitions_a_policy_states_are_read_with_their_verb_and_thing():
    banned = read_policy("The user can add but not remove checked bags. Basic economy flights cannot be modified. "
                         "The user cannot add insurance after initial booking. Do not compensate if unsure.")[1]
    assert set(banned) == {("remov", "bag"), ("modif", "flight"), ("add", "insurance")}
