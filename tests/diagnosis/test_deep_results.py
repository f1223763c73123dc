"""A tool result nested past the JSON parser's depth ('[' 50,000 deep: RecursionError, not ValueError) is read as no
record by every rule that parses results, and the run is labelled: before, `evoharness diagnose` ended in a traceback
(exit 1) on such a run under a retail-style policy (policy.precondition's status look-up), and so did the confirmation
listing (policy.confirmation), the entity claim check and F1.unavailable_offer's held-seat look-up."""

from __future__ import annotations

import json

from evoharness.diagnosis.claims import first_contradiction
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.unavailable import first_unavailable_offer
from evoharness.traces.builder import TraceBuilder

DEEP = "[" * 50_000 + "]" * 50_000
RETAIL = ("# Retail agent policy\n- An order can only be cancelled if its status is 'pending', and you should check "
          "its status before taking the action.\n- You must obtain explicit user confirmation (yes) before any action.")
AIRLINE = ("# Airline Agent Policy\n- Before taking any actions that update the booking database, you must list the "
           "action details and obtain explicit user confirmation (yes) to proceed.")


def _cancel(policy: str, read: str, args: dict, result: str, write: str) -> TraceBuilder:
    b = TraceBuilder("t").system(policy).user("Please cancel it.")
    b.call(read, args, result=result)
    b.say("It was delivered for $10 on May 20. Shall I cancel it?").user("Yes, please proceed.")
    b.call(write, {**args, "reason": "no longer needed"}, result="{}")
    return b


def test_a_deep_result_is_no_status_and_the_run_is_labelled():
    deep = '{"order_id": "#W1", "status": "delivered", "x": ' + DEEP + "}"
    t = _cancel(RETAIL, "get_order_details", {"order_id": "#W1"}, deep, "cancel_pending_order").deliver(
        "Done: order #W1, total $10.").build(0.0)
    for cfg in (DiagnosisConfig(), DiagnosisConfig(entity_claims=True)):  # with the entity claim check on too
        lab = Labeller(cfg).label(t)
        assert lab.failure_class == "F4"
        assert all(v.rule != "policy.precondition" for v in lab.violations)  # no status read from it
    # the same record, readable: its status is read (the rule still fires)
    shallow = '{"order_id": "#W1", "status": "delivered"}'
    t = _cancel(RETAIL, "get_order_details", {"order_id": "#W1"}, shallow, "cancel_pending_order").deliver(
        "Done.").build(0.0)
    assert any(v.rule == "policy.precondition" for v in Labeller().label(t).violations)


def test_a_deep_record_lists_nothing_for_the_confirmation():
    t = _cancel(AIRLINE, "get_reservation_details", {"reservation_id": "9HBUV8"}, '{"flights": ' + DEEP + "}",
                "cancel_reservation").deliver("Done.").build(0.0)
    lab = Labeller().label(t)
    assert [v.rule for v in lab.violations] == ["policy.confirmation"]  # the yes answers no listing of 9HBUV8


def test_a_deep_reservation_record_holds_no_seat_for_the_offer_rule():
    b = TraceBuilder("t").system(AIRLINE).user("Change reservation OBUT9V to HAT229.")
    b.call("get_reservation_details", {"reservation_id": "OBUT9V"},
           result='{"reservation_id": "OBUT9V", "x": ' + DEEP + "}")
    b.call("search_direct_flight", {"origin": "DEN", "destination": "LAS", "date": "2024-05-27"}, result=json.dumps(
        [{"flight_number": "HAT229", "status": "available", "available_seats": {"economy": 0, "business": 5},
          "prices": {"economy": 109, "business": 338}, "date": "2024-05-27"}]))
    b.say("Shall I change your reservation to HAT229?").user("Yes.")
    b.call("update_reservation_flights", {"reservation_id": "OBUT9V", "cabin": "economy", "payment_id": "gc_1",
                                          "flights": [{"flight_number": "HAT229", "date": "2024-05-27"}]},
           result="Error: not enough seats on flight HAT229")
    found = first_unavailable_offer(TraceView.of(b.deliver("Done.").build(0.0)))
    assert found is not None and found.step == 8  # the booking of a full cabin, the deep record read as holding none


def test_a_deep_result_gives_the_entity_claim_check_no_facts():
    b = TraceBuilder("t").user("What did order W2378156 cost?")
    b.call("get_order_details", {"order_id": "W2378156"},
           result='{"order_id": "W2378156", "x": ' + DEEP + "}")
    t = b.deliver("The total for W2378156 is $99.").build(0.0)
    assert first_contradiction(TraceView.of(t)) is None  # no fact read, so none contradicted
    b = TraceBuilder("t").user("What did order W2378156 cost?")
    b.call("get_order_details", {"order_id": "W2378156"}, result='{"order_id": "W2378156", "total": 120}')
    t = b.deliver("The total for W2378156 is $99.").build(0.0)
    assert first_contradiction(TraceView.of(t)) is not None  # readable: the claim contradicts it
