"""policy.confirmation: a reply that lists the record a write acts on by what it holds (its flights), not by its id,
before the user's yes, is the listing the policy asks for (tau-bench airline 31:0, a reward-1 run: "DEN to MIA (Flight
Number: HAT130) ... Please confirm if you would like to proceed with the cancellation." -- "Yes, please proceed with the
cancellation." -- ``cancel_reservation(reservation_id=9HBUV8)``, an id no message named)."""

from __future__ import annotations

import json

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import policy_violations
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Airline Agent Policy\n- Before taking any actions that update the booking database, you must list the "
          "action details and obtain explicit user confirmation (yes) to proceed.")
RESERVATION = {"reservation_id": "9HBUV8", "user_id": "mohamed_hernandez_5188", "origin": "DEN", "destination": "BOS",
               "cabin": "basic_economy",
               "flights": [{"origin": "DEN", "destination": "MIA", "flight_number": "HAT130", "date": "2024-05-17"},
                           {"origin": "MIA", "destination": "BOS", "flight_number": "HAT184", "date": "2024-05-17"}],
               "payment_history": [{"payment_id": "credit_card_5417084", "amount": 159}], "insurance": "yes"}
LISTING = ("The reservation from DEN to BOS on May 17 includes:\n- DEN to MIA (Flight Number: HAT130)\n- MIA to BOS "
           "(Flight Number: HAT184)\nPlease confirm if you would like to proceed with the cancellation.")


def _confirmations(listing: str, read: dict | None = None, record: dict = RESERVATION) -> list:
    b = TraceBuilder("t").system(POLICY).user("I need to cancel my flight on May 17 from Denver.")
    b.call("get_reservation_details", read or {"reservation_id": "9HBUV8"}, result=json.dumps(record))
    b.say(listing).user("Yes, please proceed with the cancellation. Thank you!")
    b.call("cancel_reservation", {"reservation_id": "9HBUV8"}, result=json.dumps({**record, "status": "cancelled"}))
    t = b.deliver("Your reservation has been cancelled.").build(0.0)
    return [v for v in policy_violations(TraceView.of(t)) if v.rule == "policy.confirmation"]


def test_a_yes_to_a_listing_of_the_records_flights_confirms_the_write():
    assert _confirmations(LISTING) == []
    assert _confirmations(LISTING.replace("HAT130", "hat130").replace("HAT184", "")) == []  # any case, one is enough


def test_a_listing_that_names_nothing_of_the_record_is_still_none():
    found = _confirmations("Please confirm if you would like to proceed with the cancellation.")
    assert [v.step for v in found] == [6]


def test_only_the_record_read_by_the_writes_own_id_lists_it():
    # the flights are another reservation's: the read was keyed by another id
    assert [v.step for v in _confirmations(LISTING, read={"reservation_id": "XXDC1M"})] == [6]
    # a look-up keyed by more than the write's ids reads something else than the record
    assert [v.step for v in _confirmations(LISTING, read={"reservation_id": "9HBUV8", "date": "2024-05-17"})] == [6]
    # values under an id key (the user's, a payment's: other records share them) and values with no digit or no letter
    # (a date, a route) name no record
    ids_only = ("Reservation for mohamed_hernandez_5188, paid with credit_card_5417084, DEN to BOS on 2024-05-17. "
                "Confirm?")
    assert [v.step for v in _confirmations(ids_only)] == [6]


def test_the_listing_must_be_the_reply_the_yes_answers():
    # a listing, a question and a bare "Shall I go on?" between it and the yes: only the reply the yes answers is read
    # for the record's contents (the narrower reading, chosen so: read in every earlier reply, as the write's own values
    # are, it also took a proposal of a new itinerary sharing a flight with the reservation cancelled, 9:2, for a
    # listing of the cancellation)
    b = TraceBuilder("t").system(POLICY).user("I need to cancel my flight on May 17 from Denver.")
    b.call("get_reservation_details", {"reservation_id": "9HBUV8"}, result=json.dumps(RESERVATION))
    b.say(LISTING).user("Hmm, what about the refund?").say("It goes to the original payment method. Shall I go on?")
    b.user("Yes, please proceed.")
    b.call("cancel_reservation", {"reservation_id": "9HBUV8"}, result=json.dumps(RESERVATION))
    t = b.deliver("Done.").build(0.0)
    assert [v.step for v in policy_violations(TraceView.of(t)) if v.rule == "policy.confirmation"] == [8]
