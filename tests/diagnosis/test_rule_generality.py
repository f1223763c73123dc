"""The policy rules of a4b3282 (issue 13) on wordings of other domains than the tuning sets': a transfer of money is
a write, not a hand-off; a document or a number named for the user is no policy of asking their yes; an intensifier
that goes on to a negation is no yes. Each read the other way since a4b3282 (the first since before it)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.consent import affirmative
from evoharness.diagnosis.invariants import policy_rules
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

BANK = ("# Bank agent policy\nYou must authenticate the user identity by locating their user id via email. "
        "Before any action that moves money you must obtain explicit user confirmation (yes).")


def _violations(call: str, answer: str, policy: str = BANK) -> list[str]:
    b = TraceBuilder("t").system(policy).user("Move $500 to my savings account, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("Shall I transfer $500 from checking to savings?").user(answer)
    b.call(call, {"amount": 500, "from": "checking", "to": "savings"}, result="ok")
    return [v.rule for v in Labeller().label(b.deliver("Done.").build(score=0.0)).violations]


@pytest.mark.parametrize("call", ["transfer_funds", "mcp__bank__transfer_money", "transferOwnership",
                                  "escalate_ticket_priority"])
def test_a_transfer_of_money_or_anything_else_is_a_write_the_policy_asks_a_yes_for(call):
    """A name that opens with "transfer" was a hand-off to a person (tau-bench's ``transfer_to_human_agents``), so a
    money transfer made without the user's yes broke no policy; a4b3282 read it after any namespace, and escalate_*
    as well."""
    assert _violations(call, "What does it cost?") == ["policy.confirmation"]
    assert _violations(call, "Yes, go ahead.") == []


@pytest.mark.parametrize("call", ["transfer_to_human_agents", "mcp__bank__transfer_to_human_agents",
                                  "escalate_to_supervisor", "hand_over_to_agent", "transferCall", "escalate"])
def test_a_hand_off_to_a_person_is_still_no_write(call):
    assert _violations(call, "What does it cost?") == []


@pytest.mark.parametrize("line", [
    "Please review the user agreement with the user when asked.",
    "Give the guest's confirmation number when asked.",
    "The user authorization token is sent in the header.",
    "Check the customer's approval status before you answer.",
    "Customers agree to the terms when they sign up.",
    "Clearly give confirmation numbers at the end.",
])
def test_a_thing_named_for_the_user_is_no_policy_of_asking_their_yes(line):
    """a4b3282 read "user agreement", "confirmation number", "authorization token" and "approval status" as a policy
    asking for the user's yes: every write without one was then a violation."""
    policy = "# Bank agent policy\nYou must authenticate the user identity by locating their user id via email. " + line
    assert policy_rules(policy)[1] is False
    assert _violations("transfer_funds", "What does it cost?", policy) == []


@pytest.mark.parametrize("said", [
    "I definitely do not want to change the flight.", "I certainly don't want that.",
    "Of course I don't want to cancel!", "I don't think that's right.", "I'm not sure that's correct."])
def test_an_intensifier_going_on_to_a_negation_is_no_yes(said):
    """"absolutely", "definitely", "certainly", "of course" and "that's right" became words of assent in a4b3282:
    "I definitely do not want to change the flight" was then a yes."""
    assert not affirmative(said)
    assert _violations("transfer_funds", said) == ["policy.confirmation"]


@pytest.mark.parametrize("said", ["Absolutely, go ahead, but don't charge a fee.", "Of course, please go on.",
                                  "Definitely, let's do that.", "That's right.", "Yes, I definitely don't mind."])
def test_an_intensifier_that_says_yes_still_does(said):
    assert affirmative(said)


def test_a_long_number_listed_is_not_another_number_that_rounds_to_it():
    """2e595bb matched a listed number with a write's as floats: two 18-digit order ids a digit apart are one float, so
    a yes to the listing of one order confirmed the cancellation of the other."""
    b = TraceBuilder("t").system(BANK).user("I'm bob@x.com. Please cancel my order.")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("Shall I cancel order 123456789012345678? Please confirm (yes).").user("Yes.")
    b.call("cancel_order", {"order_id": 123456789012345679}, result="ok")
    lab = Labeller().label(b.deliver("Cancelled.").build(score=0.0))
    assert [v.rule for v in lab.violations] == ["policy.confirmation"]
    b = TraceBuilder("t").system(BANK).user("I'm bob@x.com. Please cancel my order.")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("Shall I cancel order 1,234,567,890,123,457? Please confirm (yes).").user("Yes.")  # written otherwise
    b.call("cancel_order", {"order_id": 1234567890123457}, result="ok")
    assert Labeller().label(b.deliver("Cancelled.").build(score=0.0)).violations == []
