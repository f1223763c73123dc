"""F1.elapsed_claim: a reply that puts a record inside a time window its tool result's creation time is outside."""

from __future__ import annotations

import json

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.elapsed import first_elapsed_contradiction
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Airline agent policy\nThe current time is 2024-05-15 15:00:00 EST.\nAll reservations can be "
          "cancelled within 24 hours of booking. Before any action that updates the booking database you must "
          "obtain explicit user confirmation (yes).")


def _run(created: str, reply: str, system: str = POLICY) -> TraceBuilder:
    b = TraceBuilder("t").system(system).user("Cancel my trip ABC123, user id amy_1.")
    b.call("get_reservation_details", {"reservation_id": "ABC123"},
           result=json.dumps({"reservation_id": "ABC123", "cabin": "economy", "created_at": created}))
    b.say(reply)  # step 4
    b.user("Yes, please.")
    b.call("cancel_reservation", {"reservation_id": "ABC123"}, result='{"status": "cancelled"}')
    return b


CLAIM = "Since this reservation was made within the last 24 hours, it can be cancelled. Shall I cancel it?"


def test_a_recent_claim_about_an_older_record_is_f1_at_the_reply():
    lab = Labeller().label(_run("2024-05-14T11:06:55", CLAIM).deliver("Cancelled.").build(0.0))
    assert (lab.failure_class, lab.first_signal.id, lab.first_signal.step) == ("F1", "F1.elapsed_claim", 4)
    assert "2024-05-14 11:06:55" in lab.first_signal.evidence and "1d 3h" in lab.first_signal.evidence
    # days count too: "within 7 days" of a record 13 days old
    t = _run("2024-05-02T06:02:56", "It was booked within the last 7 days, so it qualifies.").build(0.0)
    assert first_elapsed_contradiction(TraceView.of(t)).step == 4


def test_a_true_claim_a_negated_or_conditional_one_and_a_policy_restatement_are_no_signal():
    for created, reply in (
        ("2024-05-15T09:00:00", CLAIM),  # 6 hours old: true
        ("2024-05-04T07:38:29", "I cannot cancel it unless it was booked within the last 24 hours."),
        ("2024-05-07T18:40:38", "I can only cancel it if it's within 24 hours of booking, which it is not."),
        ("2024-05-04T07:38:29", "It was not booked within the last 24 hours, so it cannot be cancelled."),
        ("2024-05-04T07:38:29", "Reservations can be cancelled within 24 hours of booking."),
    ):
        t = _run(created, reply).deliver("Cancelled.").build(0.0)
        assert first_elapsed_contradiction(TraceView.of(t)) is None, reply
        assert Labeller().label(t).first_signal.id != "F1.elapsed_claim", reply


def test_without_a_stated_current_time_or_a_creation_time_the_rule_is_silent():
    no_clock = POLICY.replace("The current time is 2024-05-15 15:00:00 EST.\n", "")
    t = _run("2024-05-02T06:02:56", CLAIM, system=no_clock).deliver("Cancelled.").build(0.0)
    assert first_elapsed_contradiction(TraceView.of(t)) is None
    b = TraceBuilder("t").system(POLICY).user("Cancel ABC123")
    b.call("get_reservation_details", {"reservation_id": "ABC123"}, result='{"reservation_id": "ABC123"}')
    assert first_elapsed_contradiction(TraceView.of(b.say(CLAIM).deliver("Cancelled.").build(0.0))) is None


def test_a_healthy_run_stays_healthy():
    t = _run("2024-05-02T06:02:56", CLAIM).deliver("Cancelled.").build(1.0)
    assert Labeller().label(t).failure_class == "healthy"
    assert first_elapsed_contradiction(TraceView.of(t)).step == 4  # the rule itself fires; detect skips Healthy


def test_a_window_to_another_moment_than_the_records_creation_is_no_claim():
    """"Your flight is within 24 hours of departure" is about the departure: a reservation made weeks ago does not
    contradict it (it fired F1.elapsed_claim); "within 24 hours of booking" still does."""
    for reply in ("Your flight is within 24 hours of departure, so it cannot be modified.",
                  "The trip is within 2 days before the flight, so no changes are possible.",
                  "It's within 24 hours of your scheduled departure."):
        t = _run("2024-04-01T10:00:00", reply).deliver("Sorry.").build(0.0)
        assert first_elapsed_contradiction(TraceView.of(t)) is None, reply
    t = _run("2024-04-01T10:00:00", "It was made within 24 hours of booking, so it is refundable.").build(0.0)
    assert first_elapsed_contradiction(TraceView.of(t)).step == 4
