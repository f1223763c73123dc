"""The policy's limits on writes (``diagnosis/policy_limits.py``, issue 13): a tool the policy allows once per thing
called again on it after a call that succeeded (``policy.once``), and a write on a thing whose status the policy says
to check first and no tool result showed (``policy.check_first``). Read from the policy's words: tau2's retail and
telecom sentences, and the same shapes in another domain's words."""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

ONCE = "Exchange or modify order tools can only be called once per order."
CHECK = ("An order can only be cancelled if its status is 'pending', and you should check its status before taking "
         "the action.")
CONFIRM = "Before any action that updates the database you must obtain explicit user confirmation (yes)."
ORDER = ("get_order_details", {"order_id": "#W1"}, json.dumps({"order_id": "#W1", "status": "pending"}))


def _label(policy: str, *turns, tools: dict[str, str] | None = None):
    """A failed run under ``policy``: turns are ("say", text), ("user", text) or (name, arguments, result); ``tools``:
    the declared tools' descriptions by name (``meta["tools"]``, OpenAI's layout)."""
    b = TraceBuilder("t").system(f"# Agent policy\n{policy}\n{CONFIRM}").user("Hi, I need help with order #W1.")
    for turn in turns:
        if turn[0] == "say":
            b.say(turn[1])
        elif turn[0] == "user":
            b.user(turn[1])
        else:
            b.call(turn[0], turn[1], result=turn[2])
    meta = {"tools": [{"type": "function", "function": {"name": n, "description": d}} for n, d in tools.items()]} \
        if tools else {}
    return Labeller().label(b.deliver("Done.").build(score=0.0, meta=meta))


def _address(street: str, result: str = '{"order_id": "#W1", "status": "pending"}') -> list:
    return [("say", f"I'll change the address of #W1 to {street}. Do you confirm (yes/no)?"), ("user", "Yes."),
            ("modify_pending_order_address", {"order_id": "#W1", "address1": street}, result)]


def test_a_tool_called_again_on_the_same_order_breaks_the_once_rule():
    """The address of #W1 changed twice: the second call breaks "... can only be called once per order", located at
    the second listing the user said yes to (before, no rule read the sentence)."""
    lab = _label(ONCE, ORDER, *_address("12 Elm St"), *_address("14 Oak Ave"))
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.once", 10)]
    assert "again after its call at step 6" in lab.violations[0].evidence
    assert ONCE.rstrip(".") in lab.violations[0].evidence
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 8)


@pytest.mark.parametrize("second", [
    # another modify tool on the same order: tau2's gold actions change an order's address, then its items
    [("say", "I'll change item 1 to 2 on #W1. Do you confirm (yes/no)?"), ("user", "Yes."),
     ("modify_pending_order_items", {"order_id": "#W1", "item_ids": ["1"], "new_item_ids": ["2"]}, "{}")],
    [("say", "I'll change the address of #W2 to 14 Oak Ave. Do you confirm (yes/no)?"), ("user", "Yes."),
     ("modify_pending_order_address", {"order_id": "#W2", "address1": "14 Oak Ave"}, "{}")]])  # another order
def test_another_tool_or_another_order_keeps_the_once_rule(second):
    assert _label(ONCE, ORDER, *_address("12 Elm St"), *second).violations == []


def test_a_retry_after_a_refused_call_keeps_the_once_rule():
    """Once per order counts calls that did something: a call the tool refused leaves the order as it was."""
    refused = _address("12 Elm St", result="Error: the address is not valid")
    assert _label(ONCE, ORDER, *refused, *_address("12 Elm Street")).violations == []


def test_the_once_rule_is_read_from_the_policys_words_not_from_retail():
    """"A ticket can only be reopened once." makes a second ``reopen_ticket`` on the same ticket a violation."""
    reopen = [("say", "I'll reopen ticket T7. Do you confirm (yes/no)?"), ("user", "Yes."),
              ("reopen_ticket", {"ticket_id": "T7"}, '{"ticket_id": "T7", "status": "open"}')]
    lab = _label("A ticket can only be reopened once.", *reopen, *reopen)
    assert [v.rule for v in lab.violations] == ["policy.once"]
    assert _label("A ticket can only be reopened once.", *reopen).violations == []


CANCEL = [("say", "I'll cancel order #W1 (reason: no longer needed). Do you confirm (yes/no)?"), ("user", "Yes."),
          ("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, "{}")]


def test_a_cancellation_with_no_status_read_breaks_the_check_first_rule():
    """"... and you should check its status before taking the action": a cancellation of an order whose status no
    tool result showed, located at the listing the user said yes to (before, the sentence's second half was read by
    no rule)."""
    lab = _label(CHECK, *CANCEL)
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.check_first", 4)]
    assert "#W1, whose status no tool result before it showed" in lab.violations[0].evidence
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 2)


def test_a_cancellation_after_the_status_was_read_keeps_the_check_first_rule():
    assert _label(CHECK, ORDER, *CANCEL).violations == []
    # a precondition with no "check its status" asks for no read
    assert _label("An order can only be cancelled if its status is 'pending'.", *CANCEL).violations == []


BILL = "You should always check that the bill is overdue before sending a payment request."
SEND = [("say", "I'll send a payment request for bill B1 to C1. Do you confirm (yes/no)?"), ("user", "Yes."),
        ("send_payment_request", {"customer_id": "C1", "bill_id": "B1"}, "Payment request sent")]


def test_a_payment_request_for_a_bill_never_read_breaks_the_check_first_rule():
    """tau2 telecom's "check that the bill is overdue before sending a payment request": the bill's status unread."""
    assert [v.rule for v in _label(BILL, *SEND).violations] == ["policy.check_first"]
    read = ("get_details_by_id", {"id": "B1"}, json.dumps({"bill_id": "B1", "status": "Overdue"}))
    assert _label(BILL, read, *SEND).violations == []


@pytest.mark.parametrize("policy", [
    "Always look up the order's status before cancelling it.",
    "Verify the status of the order before cancelling an order.",
    "You must verify that the order is pending before cancelling the order.",
    "Double-check the order status before cancelling it.",
    "An order can only be cancelled if its status is 'pending', and you should verify its status before taking the "
    "action.",
    # "confirm" with a thing's status or state (until the twenty-third session no check), and "that" left out
    "Confirm the order's status before cancelling it.",
    "Always confirm that the order is pending before cancelling it.",
    "Confirm the status of the order before cancelling the order.",
    "Check the order is still pending before cancelling it.",
    "An order can only be cancelled if its status is 'pending'; confirm its status before taking the action.",
    # capitals for emphasis (until the twenty-fourth session a case-sensitive "before" set the line aside)
    "Always check the order's status BEFORE cancelling it."])
def test_a_status_to_look_up_or_verify_first_is_read_as_one_to_check(policy):
    """"check" was the only verb of ``policy.check_first``: a policy that says to look up or verify the order's status
    before cancelling it asked for no read (and "cancelling it" named no tool: "it" is the thing)."""
    assert [v.rule for v in _label(policy, *CANCEL).violations] == ["policy.check_first"]
    assert _label(policy, ORDER, *CANCEL).violations == []


@pytest.mark.parametrize("policy", [
    "Verify that the customer is the account holder before cancelling the order.",
    # the user's yes, the confirmation rule's: a person in the sentence, or no status nor state of a thing
    "Confirm that the order is correct with the customer before cancelling it.",
    "Confirm the details with the user before cancelling the order.",
    "Always confirm the order id before cancelling it."])
def test_a_persons_status_to_verify_is_no_things_status(policy):
    """"Verify that the user is the account holder before cancelling the order" is about who the user is (the identity
    rule's): no status read is asked for; nor by a "confirm" that asks the user's yes."""
    assert "policy.check_first" not in [v.rule for v in _label(policy, *CANCEL).violations]


ITEMS = ("### Modify items\nThis action can only be called once, and will change the order status to "
         "'pending (items modified)'.")


def _items(new: str) -> list:
    return [("say", f"I'll change item 1 to {new} on #W1, paid with credit_card_1. Do you confirm (yes/no)?"),
            ("user", "Yes."),
            ("modify_pending_order_items", {"order_id": "#W1", "item_ids": ["1"], "new_item_ids": [new],
                                            "payment_method_id": "credit_card_1"}, "{}")]


def test_this_action_once_under_a_heading_limits_the_headings_action():
    """tau2 retail's "This action can only be called once" under "### Modify items" names its action by the heading
    only: until the twenty-second session it limited nothing, so items modified twice on one order broke no rule
    where the policy had no "Exchange or modify order tools ..." line. Per the order the tool's own ``order_id``
    names (not its ``payment_method_id``)."""
    lab = _label(ITEMS, ORDER, *_items("2"), *_items("3"))
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.once", 10)]
    assert "Modify items: This action can only be called once" in lab.violations[0].evidence


def test_this_action_once_limits_no_other_action_nor_a_line_under_no_section():
    # the address changed twice: the heading names the items
    assert _label(ITEMS, ORDER, *_address("12 Elm St"), *_address("14 Oak Ave")).violations == []
    # another order
    other = [("say", "I'll change item 1 to 3 on #W2. Do you confirm (yes/no)?"), ("user", "Yes."),
             ("modify_pending_order_items", {"order_id": "#W2", "item_ids": ["1"], "new_item_ids": ["3"]}, "{}")]
    assert _label(ITEMS, ORDER, *_items("2"), *other).violations == []
    # the sentence under the policy's title alone: no action of a tool
    assert _label("This action can only be called once.", ORDER, *_items("2"), *_items("3")).violations == []


MODIFY_ITEMS = ("Modify items in a pending order to new items of the same product type. For a pending order, this "
                "function can only be called once. The agent needs to explain the exchange detail and ask for explicit "
                "user confirmation (yes/no) to proceed.")  # tau2 retail's modify_pending_order_items


def _exchange(new: str) -> list:
    return [("say", f"I'll exchange item 1 for {new} on #W1. Do you confirm (yes/no)?"), ("user", "Yes."),
            ("exchange_delivered_order_items", {"order_id": "#W1", "item_ids": ["1"], "new_item_ids": [new],
                                                "payment_method_id": "credit_card_1"}, "{}")]


@pytest.mark.parametrize("policy, turns, tools", [
    ("", [*_items("2"), *_items("3")], {"modify_pending_order_items": MODIFY_ITEMS}),
    # tau2 retail's exchange_delivered_order_items: the action put by its verbs, "can be only done"
    ("", [*_exchange("2"), *_exchange("3")], {"exchange_delivered_order_items": (
        "Exchange items in a delivered order to new items of the same product type.\n        For a delivered order, "
        "return or exchange can be only done once by the agent.")}),
    # a description listed in the system prompt, beside the policy
    (f"## Tools\n- `modify_pending_order_items`: {MODIFY_ITEMS}", [*_items("2"), *_items("3")], None)])
def test_a_tools_own_description_limits_it_once(policy, turns, tools):
    """tau2's "For a pending order, this function can only be called once" in ``modify_pending_order_items``'s own
    description: until the twenty-third session descriptions were set aside before the policy's lines were read, so
    items modified twice on one order under a policy that says it nowhere else broke no rule."""
    lab = _label(policy, ORDER, *turns, tools=tools)
    assert [v.rule for v in lab.violations] == ["policy.once"]
    assert "description: For a" in lab.violations[0].evidence and "only" in lab.violations[0].evidence


def _verb_last(new: str, order: str = "#W1") -> list:
    return [("say", f"I'll change item 1 to {new} on {order}. Do you confirm (yes/no)?"), ("user", "Yes."),
            ("order_items_modify", {"order_id": order, "item_ids": ["1"], "new_item_ids": [new]}, "{}")]


def test_a_description_limits_a_tool_named_verb_last():
    """A tool named object first, verb last (``order_items_modify``, as ``flight_cancel``): "Items of a pending order
    can only be modified once" in its own description is its own limit. Until the twenty-fourth session only the
    name's first word was read as its verb ("order"), so items modified twice on one order broke no rule."""
    tools = {"order_items_modify": "For a pending order, items can only be modified once."}
    lab = _label("", ORDER, *_verb_last("2"), *_verb_last("3"), tools=tools)
    assert [v.rule for v in lab.violations] == ["policy.once"]
    assert "order_items_modify's description: For a pending order, items can only be modified once" \
        in lab.violations[0].evidence
    # once per order: another order keeps the rule; another action's limit is none
    assert _label("", ORDER, *_verb_last("2"), *_verb_last("3", "#W2"), tools=tools).violations == []
    assert _label("", ORDER, *_verb_last("2"), *_verb_last("3"),
                  tools={"order_items_modify": "Items can only be returned once."}).violations == []


@pytest.mark.parametrize("turns, description", [
    ([*_address("12 Elm St"), *_address("14 Oak Ave")], MODIFY_ITEMS),  # another tool than the one described
    ([*_items("2"), ("say", "I'll change item 1 to 3 on #W2. Do you confirm (yes/no)?"), ("user", "Yes."),
      ("modify_pending_order_items", {"order_id": "#W2", "item_ids": ["1"], "new_item_ids": ["3"]}, "{}")],
     MODIFY_ITEMS),  # another order
    ([*_items("2"), *_items("3")], "This function can only be called once the order is pending."),  # "once": when
    ([*_items("2"), *_items("3")], "Returns can only be requested once per order.")])  # another action's limit
def test_a_description_limits_its_own_tool_on_one_thing_only(turns, description):
    assert _label("", ORDER, *turns, tools={"modify_pending_order_items": description,
                                            "modify_pending_order_address": "Modify the address."}).violations == []


@pytest.mark.parametrize("policy, tools", [
    ("", {"modify_pending_order_items": "For a pending order, this function can only be called ONCE."}),
    ("## Tools\n- `modify_pending_order_items`: For a pending order, this function can only be called ONCE.", None),
    ("Exchange or modify order tools can only be called ONCE per order.", None),
    ("### Modify items\nThis action can only be called Once.", None)])
def test_once_in_capitals_is_a_once_limit(policy, tools):
    """The rules read "once" case-blind (re.I), but until the twenty-fourth session a case-sensitive ``"once" in``
    before them set aside a description or a policy line that puts it in capitals for emphasis ("can only be called
    ONCE"): items modified twice on one order broke no rule."""
    lab = _label(policy, ORDER, *_items("2"), *_items("3"), tools=tools)
    assert [v.rule for v in lab.violations] == ["policy.once"]


@pytest.mark.parametrize("policy", [
    "Exchange or modify order tools can only be called once the order is pending.",
    "### Modify items\nThis action can only be called once the order is pending.",
    "An order can only be modified once a day."])
def test_once_said_as_a_conjunction_or_a_frequency_is_no_once_limit(policy):
    """"... can only be called once the order is pending" says when, not how often: until the twenty-third session it
    limited the tools to one call per order (items modified twice on #W1 broke ``policy.once``)."""
    assert _label(policy, ORDER, *_items("2"), *_items("3")).violations == []
