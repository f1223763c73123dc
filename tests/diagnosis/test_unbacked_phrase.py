"""F1.unbacked_claim's final-answer check reads a number-and-word phrase ("the 24-hour window", "a 7-day-old order") as
the number it holds, as the reply check already does (``detectors._id_like``: "not ... a phrase (24-hour)"): tau-bench
airline 49:3, a reward-1 run, ends "I am unable to cancel the basic economy ticket outside the 24-hour window" under a
policy that says "within 24 hours of booking", and the check called "24-hour" unbacked."""

from __future__ import annotations

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import UnbackedClaimDetector
from evoharness.traces.builder import TraceBuilder

POLICY = "# Airline Agent Policy\n- All reservations can be cancelled within 24 hours of booking."


def _claims(answer: str) -> list:
    b = TraceBuilder("t").system(POLICY).user("Please cancel reservation MDCLVA.")
    b.call("get_reservation_details", {"reservation_id": "MDCLVA"},
           result='{"reservation_id": "MDCLVA", "created_at": "2024-05-07T18:40:38", "flights": [{"flight_number": '
                  '"HAT043"}]}')
    t = b.deliver(answer).build(0.0)
    return UnbackedClaimDetector().detect(TraceView.of(t), DiagnosisConfig())


def test_a_number_word_phrase_claims_its_number():
    assert _claims("I am unable to cancel the basic economy ticket outside the 24-hour window.") == []
    assert _claims("HAT043 is a 24-hour-long trip; reservation MDCLVA stays.") == []


def test_a_phrase_with_an_unbacked_long_number_and_ids_are_still_claims():
    [s] = _claims("Your refund arrives in a 4096-day window.")  # the number is long enough to check, and unbacked
    assert "4096" in s.evidence  # the number it claims
    for answer in ("I cancelled HAT999 for you.", "Your new reservation is RES-ZFA04Y.", "Flight HAT-999 is booked."):
        assert len(_claims(answer)) == 1, answer  # an id, or letters before the number: no phrase
