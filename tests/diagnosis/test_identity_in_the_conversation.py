"""The identity rule reads who the user is from the run, not from the agent's words (issue 13): under a policy that
asks only for the user id ("obtain the user id"), the user saying an id that a look-up or call shows meets it; the
agent asking for the id, the e-mail or the zip code, or saying it verified the user, does not. Under one that asks who
the user is (authenticate, verify), only a look-up of the person meets it."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import policy_violations
from evoharness.traces.builder import TraceBuilder

OBTAIN = ("# Airline agent policy\n- The agent must first obtain the user id and the reservation id.\n"
          "- Before taking any actions that update the booking database, you must list the action details and "
          "obtain explicit user confirmation (yes) to proceed.")
VERIFY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email, or "
          "via name + zip code.\nBefore any action that updates the database you must obtain explicit user "
          "confirmation (yes).")
RESERVATION = '{"reservation_id": "XEWRD9", "user_id": "james_lee_6136", "cabin": "economy"}'


def _rules(policy: str, asked: str, said: str, reuse_id: bool = False, told: str = "") -> list[str]:
    """The identity and confirmation rules' violations of a cancellation: the agent asks (``asked``), the user answers
    (``said``), the reservation is looked up (its result shows the user id), a flight search follows -- its call
    reusing the look-up's call id where ``reuse_id`` -- then the agent says ``told`` and lists the write, the user
    says yes and the agent cancels."""
    b = TraceBuilder("t").system(policy).user("Hi, I need to cancel a reservation.").say(asked).user(said)
    b.call("get_reservation_details", {"reservation_id": "XEWRD9"}, result=RESERVATION)
    b.call("search_direct_flight", {"origin": "LAX", "destination": "ATL"}, result="[]")
    b.say(f"{told}Reservation XEWRD9 will be cancelled. Shall I proceed?").user("Yes.")
    b.call("cancel_reservation", {"reservation_id": "XEWRD9"}, result='{"status": "cancelled"}')
    t = b.deliver("Done.").build(score=0.0)
    if reuse_id:
        calls = [m for m in t.messages if m.get("tool_calls")]
        first, second = calls[0]["tool_calls"][0]["id"], calls[1]["tool_calls"][0]
        results = [m for m in t.messages if m.get("role") == "tool" and m.get("tool_call_id") == second["id"]]
        second["id"] = results[0]["tool_call_id"] = first
    return sorted(v.rule for v in policy_violations(TraceView(t)))


def test_the_user_id_the_user_gave_meets_the_policy_though_a_later_call_reuses_the_look_ups_call_id():
    """The look-up's result showing "james_lee_6136" was read through ``view.results``, one result per call id: the
    later search reusing the id hid it, and the write broke the identity rule (tau-bench airline 13:2, 51 of the 407
    tuning runs reuse a call id)."""
    asked = "Could you please provide your user ID and the reservation ID?"
    said = "Sure! My user ID is james_lee_6136, and the reservation ID is XEWRD9."
    assert _rules(OBTAIN, asked, said) == []
    assert _rules(OBTAIN, asked, said, reuse_id=True) == []


@pytest.mark.parametrize("asked, said, told", [
    ("Could you confirm your user id?", "I don't remember it, but the reservation is XEWRD9.", ""),
    ("Could you please confirm your email and zip code?", "It's james@x.com, zip 90210.", ""),
    ("Can you verify your identity by giving me your user ID?", "The reservation is XEWRD9.",
     "I have verified your identity. "),
    ("What is your user id?", "My user id is james_lee_9999.", "Thank you, your identity is confirmed. "),
])
def test_the_agent_asking_or_saying_it_verified_is_no_identity_check(asked, said, told):
    """The agent asking for the id, the e-mail or the zip code, or saying "I have verified your identity", is no id
    the user gave that the run shows: the write still breaks the rule (an id the user said that no result or call
    shows, james_lee_9999, neither meets it)."""
    assert _rules(OBTAIN, asked, said, told=told) == ["policy.identity_check"]


@pytest.mark.parametrize("said", ["My user id is james_lee_6136.", "It's james@x.com, zip 90210."])
def test_a_policy_that_asks_who_the_user_is_is_met_only_by_a_look_up_of_the_person(said):
    assert _rules(VERIFY, "Could you confirm your user id, or your email and zip code?", said,
                  told="I have verified your identity. ") == ["policy.identity_check"]
