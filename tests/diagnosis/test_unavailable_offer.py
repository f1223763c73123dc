"""F1.unavailable_offer: an offer or booking of a cabin the latest search result shows no seats in."""

from __future__ import annotations

import json

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.unavailable import first_unavailable_offer
from evoharness.traces.builder import TraceBuilder

POLICY = "# Airline agent policy\nYou must obtain explicit user confirmation (yes) before any booking update."


def _flight(number: str, seats: dict[str, int]) -> dict:
    return {"flight_number": number, "origin": "DEN", "destination": "LAS", "status": "available",
            "available_seats": seats, "prices": {"basic_economy": 80, "economy": 109, "business": 338},
            "date": "2024-05-27"}


FULL = {"basic_economy": 19, "economy": 0, "business": 5}


def _run(offer: str, seats: dict[str, int] = FULL, recheck: dict[str, int] | None = None,
         cabin: str = "economy", held: bool = False) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Change my flight on reservation OBUT9V to the fastest one.")
    b.call("get_reservation_details", {"reservation_id": "OBUT9V"}, result=json.dumps(  # step 2
        {"reservation_id": "OBUT9V", "cabin": "economy",
         "flights": [{"flight_number": "HAT229" if held else "HAT078", "date": "2024-05-27", "price": 109}]}))
    b.call("search_direct_flight", {"origin": "DEN", "destination": "LAS", "date": "2024-05-27"},  # step 4
           result=json.dumps([_flight("HAT229", seats), _flight("HAT266", {"economy": 5, "business": 8})]))
    if recheck is not None:
        b.call("search_direct_flight", {"origin": "DEN", "destination": "LAS", "date": "2024-05-27"},  # step 6
               result=json.dumps([_flight("HAT229", recheck)]))
    b.say(offer)
    b.user("Yes.")
    b.call("update_reservation_flights", {"reservation_id": "OBUT9V", "cabin": cabin, "payment_id": "gc_1",
                                          "flights": [{"flight_number": "HAT229", "date": "2024-05-27"}]},
           result="Error: not enough seats on flight HAT229")
    return b


OFFER = "Here is the option:\n- Flight Number: HAT229\n- Cabin: Economy ($109)\nShall I book it?"


def test_an_offer_of_a_cabin_with_no_seats_is_f1_at_the_offer():
    lab = Labeller().label(_run(OFFER).deliver("Done.").build(0.0))
    assert (lab.failure_class, lab.first_signal.id, lab.first_signal.step) == ("F1", "F1.unavailable_offer", 6)
    assert "economy on HAT229" in lab.first_signal.evidence


def test_a_booking_with_no_offer_before_it_is_f1_at_the_write():
    t = _run("I found a direct flight, HAT229. Shall I change your reservation to it?").deliver("Done.").build(0.0)
    found = first_unavailable_offer(TraceView.of(t))
    assert found is not None and found.step == 8 and "update_reservation_flights books economy" in found.evidence


def test_available_cabins_another_flights_cabin_negations_and_a_longer_cabin_name_are_no_offer():
    for offer in (
        "- Flight Number: HAT229\n- Cabin: Basic Economy ($80), Business ($338)",  # both have seats
        "HAT229 has no seats left in Economy ($109); Business ($338) is open.",
        "HAT229: Economy ($109) is sold out.",
        "- Flight Number: HAT229\n- Cabin: Business ($338)\n- Flight Number: HAT266\n- Cabin: Economy ($130)",
        "HAT229 has economy seats? Let me check.",  # a cabin with no price: no offer
    ):
        t = _run(offer, cabin="business").deliver("Done.").build(0.0)
        assert first_unavailable_offer(TraceView.of(t)) is None, offer


def test_a_later_result_with_seats_clears_it_and_a_kept_flight_is_no_booking():
    t = _run(OFFER, recheck={"economy": 3, "business": 5}).deliver("Done.").build(0.0)
    assert first_unavailable_offer(TraceView.of(t)) is None
    # the reservation already holds HAT229 in economy on that date: keeping it takes no new seat
    t = _run("Shall I update the reservation?", held=True).deliver("Done.").build(0.0)
    assert first_unavailable_offer(TraceView.of(t)) is None
    t = _run("Shall I update the reservation?", held=True, cabin="business",
             seats={"economy": 0, "business": 0}).deliver("Done.").build(0.0)  # held in economy, booked in business
    assert first_unavailable_offer(TraceView.of(t)).step == 8


def test_without_a_refusal_for_seats_a_healthy_run_or_seat_counts_the_rule_is_silent():
    healthy = Labeller().label(_run(OFFER).deliver("Done.").build(1.0))
    assert all(s.id != "F1.unavailable_offer" for s in healthy.signals)
    # the booking went through, or failed for another cause: the gate (no refusal for want of seats) is shut
    for result in ('{"reservation_id": "OBUT9V", "cabin": "economy"}', "Error: gift card balance is not enough"):
        b = _run(OFFER)
        b.messages[-1]["content"] = result
        assert first_unavailable_offer(TraceView.of(b.deliver("Done.").build(0.0))) is None, result
    # a refusal of another flight: its id is the one read, HAT229's seat counts are not
    b = _run(OFFER)
    b.messages[-1]["content"] = "Error: not enough seats on flight HAT266"
    assert first_unavailable_offer(TraceView.of(b.deliver("Done.").build(0.0))) is None
    b = TraceBuilder("t").system(POLICY).user("Book HAT229.")
    b.call("search_direct_flight", {"origin": "DEN"}, result=json.dumps([{"flight_number": "HAT229", "seats": 0}]))
    b.say(OFFER).user("Yes.")
    b.call("book_reservation", {"cabin": "economy", "flights": [{"flight_number": "HAT229"}]},
           result="Error: not enough seats on flight HAT229")
    assert first_unavailable_offer(TraceView.of(b.deliver("Done.").build(0.0))) is None  # no seat counts to read


def test_a_flight_number_or_date_given_as_a_list_or_object_is_read_not_raised():
    """A reservation result whose flight number is a list, or a booking whose date is an object: no set can hold
    them, and ``evoharness label`` stopped with a TypeError traceback (rc 1) on such a run. Such a flight is not one
    the reservation keeps, so the booking of the full cabin is found."""
    for held_flight, booked_date in (({"flight_number": ["HAT229"], "date": "2024-05-27"}, "2024-05-27"),
                                     ({"flight_number": "HAT229", "date": {"day": 27}}, "2024-05-27"),
                                     ({"flight_number": "HAT229", "date": "2024-05-27"}, {"day": 27})):
        b = _run("Shall I update the reservation?", held=True)
        b.messages[3]["content"] = json.dumps({"reservation_id": "OBUT9V", "cabin": "economy",
                                               "flights": [held_flight]})
        args = json.loads(b.messages[-2]["tool_calls"][0]["function"]["arguments"])
        args["flights"][0]["date"] = booked_date
        b.messages[-2]["tool_calls"][0]["function"]["arguments"] = json.dumps(args)
        t = b.deliver("Done.").build(0.0)
        found = first_unavailable_offer(TraceView.of(t))
        assert found is not None and found.step == 8, (held_flight, booked_date)
        assert Labeller().label(t).first_signal.id == "F1.unavailable_offer"
