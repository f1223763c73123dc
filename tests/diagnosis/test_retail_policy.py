"""The policy rules on retail-shaped runs (issue 13): the rules were written on tau-bench airline runs, and the
held-back runs are retail. Each run here has tau2's retail policy as its system message and tau2's retail tools as its
declared tools (both read from the installed tau2 package), and retail calls, arguments and results written as tau2's
retail tools answer them: the identity check (an e-mail or a name + zip code locates the user; the user's own user id
does not, "even when the user already provides the user id"), the explicit yes before each write, and the read-only
calls (look-ups, ``calculate``) and the transfer to a person, which are no writes."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

pytest.importorskip("tau2")

USER_ID = "yusuf_rossi_9620"
OPENING = ("user", "Hi, I'd like to cancel order #W2378156. I'm Yusuf Rossi, zip 19122, email yusuf.rossi@example.com")
BY_EMAIL = ("call", "find_user_id_by_email", {"email": "yusuf.rossi@example.com"}, USER_ID)
BY_NAME_ZIP = ("call", "find_user_id_by_name_zip", {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"},
               USER_ID)
NOT_FOUND = ("call", "find_user_id_by_email", {"email": "yusuf.rosi@example.com"}, "Error: user not found")
USER = ("call", "get_user_details", {"user_id": USER_ID},
        json.dumps({"user_id": USER_ID, "orders": ["#W2378156"], "payment_methods": {"credit_card_9513926": {}}}))


def _order(status: str) -> str:
    return json.dumps({"order_id": "#W2378156", "user_id": USER_ID, "status": status,
                       "items": [{"name": "Mechanical Keyboard", "item_id": "1151293680", "price": 272.33}],
                       "payment_history": [{"transaction_type": "payment", "amount": 272.33,
                                            "payment_method_id": "credit_card_9513926"}]})


ORDER = ("call", "get_order_details", {"order_id": "#W2378156"}, _order("pending"))
LISTED = ("say", "Order #W2378156 is pending. I will cancel order #W2378156 (reason: no longer needed); $272.33 goes "
                 "back to credit_card_9513926. Do you confirm (yes/no)?")
CANCEL = ("call", "cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}, _order("cancelled"))


@pytest.fixture(scope="module")
def retail() -> tuple[str, list[dict]]:
    """tau2's retail policy and its tools' OpenAI schemas."""
    policy = (resources.files("tau2") / "data" / "tau2" / "domains" / "retail" / "policy.md").read_text()
    from tau2.domains.retail.environment import get_environment  # (reads the retail database: once per module)
    return policy, [t.openai_schema for t in get_environment().get_tools()]


def _run(retail, *turns, policy: str | None = None):
    """A retail run: ("user" | "say", text) or ("call", name, arguments, result), then a final answer; scored 0."""
    b = TraceBuilder("t").system(policy if policy is not None else retail[0])
    for turn in turns:
        if turn[0] == "user":
            b.user(turn[1])
        elif turn[0] == "say":
            b.say(turn[1])
        else:
            b.call(turn[1], turn[2], result=turn[3])
    return b.deliver("Is there anything else I can help with?").build(score=0.0, meta={"tools": retail[1]})


def _rules(retail, *turns, policy: str | None = None) -> list[str]:
    return [v.rule for v in Labeller().label(_run(retail, *turns, policy=policy)).violations]


@pytest.mark.parametrize("look_up", [
    [BY_EMAIL], [BY_NAME_ZIP], [NOT_FOUND, BY_NAME_ZIP],  # an e-mail or a name + zip code; a miss got past
    [BY_EMAIL, USER]])  # the user's details read by the id the e-mail found
def test_a_user_located_by_email_or_by_name_and_zip_meets_the_identity_check(retail, look_up):
    assert _rules(retail, OPENING, *look_up, ORDER, LISTED, ("user", "Yes."), CANCEL) == []


@pytest.mark.parametrize("look_up", [[], [NOT_FOUND], [ORDER]])  # none, one that failed, no look-up of the user
def test_a_write_before_the_user_is_located_breaks_the_identity_check(retail, look_up):
    # (the order read before the listing: the policy says to check its status before cancelling, policy.check_first)
    assert _rules(retail, OPENING, *look_up, ORDER, LISTED, ("user", "Yes."), CANCEL) == ["policy.identity_check"]


def test_the_users_own_user_id_read_back_is_no_identity_check(retail):
    """"This has to be done even when the user already provides the user id": ``get_user_details`` of the id the user
    typed reads the account it claims and locates no one (before, any successful look-up of a user met the rule)."""
    said = ("user", f"Hi, my user id is {USER_ID}. Please cancel order #W2378156.")
    assert _rules(retail, said, USER, ORDER, LISTED, ("user", "Yes."), CANCEL) == ["policy.identity_check"]


def test_the_users_own_id_read_back_meets_a_policy_that_does_not_say_even_when_given(retail):
    """A policy that asks only to verify (telecom identifies a customer by id, phone or name and birth date) or to
    obtain the user id is met by the look-up of the id the user gave, as before."""
    said = ("user", f"Hi, my user id is {USER_ID}. Please cancel order #W2378156.")
    for rule in ("At the beginning of the conversation, you have to authenticate the user identity.",
                 "The agent must first obtain the user id."):
        policy = f"# Retail agent policy\n{rule}\nObtain explicit user confirmation (yes) before any change."
        assert _rules(retail, said, USER, ORDER, LISTED, ("user", "Yes."), CANCEL, policy=policy) == []


@pytest.mark.parametrize("answer", ["Yes.", "yes please", "Yes, that's all. I confirm.", "That's correct, go ahead."])
def test_a_listed_write_after_the_users_yes_meets_the_confirmation_rule(retail, answer):
    assert _rules(retail, OPENING, BY_EMAIL, ORDER, LISTED, ("user", answer), CANCEL) == []


def test_a_cancellation_reason_the_user_gives_is_no_yes(retail):
    """"The user needs to confirm the order id and the reason": naming the reason answers the question, and the
    explicit yes the policy asks for before the write is still missing."""
    asked = ("say", "Order #W2378156 is pending. What is the reason: no longer needed, or ordered by mistake?")
    write = ("call", "cancel_pending_order", {"order_id": "#W2378156", "reason": "ordered by mistake"},
             _order("cancelled"))
    assert _rules(retail, OPENING, BY_EMAIL, ORDER, asked, ("user", "Ordered by mistake."), write) == [
        "policy.confirmation"]


def test_two_writes_listed_together_and_confirmed_once_meet_the_rule(retail):
    listed = ("say", "I'll change the shipping address of #W2378156 to 12 Elm St, Philadelphia, PA 19122, and pay with "
                     "paypal_5914760 instead of credit_card_9513926. Do you confirm (yes/no)?")
    address = ("call", "modify_pending_order_address", {
        "order_id": "#W2378156", "address1": "12 Elm St", "address2": "", "city": "Philadelphia", "state": "PA",
        "country": "USA", "zip": "19122"}, _order("pending"))
    payment = ("call", "modify_pending_order_payment", {"order_id": "#W2378156", "payment_method_id": "paypal_5914760"},
               _order("pending"))
    assert _rules(retail, OPENING, BY_EMAIL, ORDER, listed, ("user", "Yes, both."), address, payment) == []


def test_read_only_calls_and_the_transfer_are_no_writes(retail):
    """Every retail look-up, ``calculate`` and ``transfer_to_human_agents`` made after the user said no: no write, so no
    policy rule is broken (a write made there would break the confirmation rule)."""
    reads = [BY_EMAIL, BY_NAME_ZIP, USER, ORDER,
             ("call", "get_product_details", {"product_id": "1656367028"}, '{"name": "Mechanical Keyboard"}'),
             ("call", "list_all_product_types", {}, '{"Mechanical Keyboard": "1656367028"}'),
             ("call", "calculate", {"expression": "272.33 * 2"}, "544.66"),
             ("call", "transfer_to_human_agents", {"summary": "wants a refund to another card"}, "Transfer successful")]
    run = _run(retail, OPENING, LISTED, ("user", "No, don't. Can a person help me instead?"), *reads)
    assert write_calls(TraceView(run)) == []
    assert Labeller().label(run).violations == []
    assert _rules(retail, OPENING, *reads[:4], LISTED, ("user", "No, don't."), CANCEL) == ["policy.confirmation"]


PRODUCT = ("call", "get_product_details", {"product_id": "1656367028"}, json.dumps({
    "name": "Mechanical Keyboard", "product_id": "1656367028", "variants": {
        "4843487907": {"item_id": "4843487907", "options": {"switch": "linear"}, "available": True, "price": 280.0},
        "9025753381": {"item_id": "9025753381", "options": {"switch": "tactile"}, "available": True,
                       "price": 231.58}}}))


def _modify(new_item: str, result: str) -> tuple:
    return ("call", "modify_pending_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                                   "new_item_ids": [new_item],
                                                   "payment_method_id": "credit_card_9513926"}, result)


def _listing(new_item: str) -> tuple:
    return ("say", f"I'll change item 1151293680 to {new_item} on #W2378156, paid with credit_card_9513926. This can "
                   "be done only once: are these all the items? Do you confirm (yes/no)?")


def test_items_modified_twice_fail_at_the_second_modifications_listing(retail):
    """"This action can only be called once": tau2's tool refuses the second call (the order is no longer pending).
    The first modification's result showed the status 'pending (item modified)', so the second is tried on an order
    the policy says can only be modified while 'pending': the policy's precondition, placed at the second
    modification's listing the user said yes to (before the nineteenth session no rule read the precondition, and the
    run was placed at the first write's listing, ``F4.first_write``)."""
    run = _run(retail, OPENING, BY_EMAIL, ORDER, PRODUCT, _listing("4843487907"), ("user", "yes"),
               _modify("4843487907", _order("pending (item modified)")), ("say", "Done."),
               ("user", "Oh, actually make it the tactile one, 9025753381."), _listing("9025753381"), ("user", "yes"),
               _modify("9025753381", "Error: non-pending order cannot be modified"))
    lab = Labeller().label(run)
    # since the nineteenth session: the second call, tried on an order whose status is 'pending (item modified)',
    # breaks the policy's precondition ("An order can only be modified if its status is 'pending'"): a located signal,
    # placed at the second modification's listing the user said yes to, which wins over the first write's listing
    # (before: ("F4.first_write", 8), no violation)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 14)
    # and since the twenty-first session the second call of the tool on the order breaks "Exchange or modify order
    # tools can only be called once per order" (policy.once), at the same step
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.once", 16), ("policy.precondition", 16)]
    assert "called once per order" in lab.violations[0].evidence and "step 10" in lab.violations[0].evidence
    assert "pending (item modified)" in lab.violations[1].evidence


def test_a_delivered_order_cancelled_fails_at_the_cancellations_listing(retail):
    """"An order can only be cancelled if its status is 'pending'": the agent read 'delivered' and proposed the
    cancellation anyway; the tool refuses it. The first signal is that proposal, now as the policy's precondition
    broken (``policy.precondition`` at the call, quoting the policy's sentence)."""
    delivered = ("call", "get_order_details", {"order_id": "#W2378156"}, _order("delivered"))
    asked = ("say", "I will cancel order #W2378156 (reason: no longer needed). Do you confirm (yes/no)?")
    refused = ("call", "cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"},
               "Error: non-pending order cannot be cancelled")
    lab = Labeller().label(_run(retail, OPENING, BY_EMAIL, delivered, asked, ("user", "Yes."), refused))
    # the precondition broken at the call (8), located at the listing the user said yes to (6): the first signal is
    # now the policy's, at the same step (before: ("F4.first_write", 6), no violation)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", 6)
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.precondition", 8)]
    assert "'delivered'" in lab.violations[0].evidence
    assert "An order can only be cancelled if its status is 'pending'" in lab.violations[0].evidence


@pytest.mark.parametrize("status, write, ok", [
    ("pending", ("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}), True),
    ("processed", ("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}), False),
    ("delivered", ("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                                    "payment_method_id": "credit_card_9513926"}), True),
    ("pending", ("return_delivered_order_items", {"order_id": "#W2378156", "item_ids": ["1151293680"],
                                                  "payment_method_id": "credit_card_9513926"}), False),
    ("delivered", ("modify_pending_order_address", {"order_id": "#W2378156", "address1": "1 Main St"}), False),
    ("pending", ("modify_pending_order_address", {"order_id": "#W2378156", "address1": "1 Main St"}), True)])
def test_a_write_on_an_order_whose_status_the_policy_rules_out_breaks_its_precondition(retail, status, write, ok):
    """tau2's retail policy: "An order can only be cancelled if its status is 'pending'" (and modified), "returned"
    and "exchanged" only if 'delivered'. A write tried on an order whose status the agent was shown is another breaks
    it, read from the policy's sentence (before, no rule read these sentences)."""
    shown = ("call", "get_order_details", {"order_id": "#W2378156"}, _order(status))
    asked = ("say", "I will do this on order #W2378156. Do you confirm (yes/no)?")
    run = _run(retail, OPENING, BY_EMAIL, shown, asked, ("user", "Yes."), ("call", *write, "ok"))
    rules = [v.rule for v in Labeller().label(run).violations if v.rule.startswith("policy.")]
    assert rules == ([] if ok else ["policy.precondition"])


def test_the_precondition_is_read_from_the_policys_words_not_from_retail(retail):
    """The same rule in another policy's words and things: "A ticket may only be refunded when its status is 'open'
    or 'held'." -- a refund_ticket on a 'closed' ticket breaks it, on a 'held' one not; a policy without the sentence
    has no such rule."""
    policy = ("# Help desk policy\nA ticket may only be refunded when its status is 'open' or 'held'.\n"
              "Before any action that updates the database you must obtain explicit user confirmation (yes).")
    for status, rules in (("closed", ["policy.precondition"]), ("held", [])):
        b = TraceBuilder("t").system(policy).user("Please refund ticket T-17.")
        b.call("get_ticket", {"ticket_id": "T-17"}, result=json.dumps({"ticket_id": "T-17", "status": status}))
        b.say("I will refund ticket T-17. Do you confirm (yes/no)?").user("Yes.")
        b.call("refund_ticket", {"ticket_id": "T-17"}, result="ok")
        assert [v.rule for v in Labeller().label(b.deliver("Done.").build(score=0.0)).violations] == rules
    b = TraceBuilder("t").system("Before any write you must obtain explicit user confirmation (yes).")
    b.user("Please refund ticket T-17.")
    b.call("get_ticket", {"ticket_id": "T-17"}, result=json.dumps({"ticket_id": "T-17", "status": "closed"}))
    b.say("I will refund ticket T-17. Do you confirm (yes/no)?").user("Yes.")
    b.call("refund_ticket", {"ticket_id": "T-17"}, result="ok")
    assert Labeller().label(b.deliver("Done.").build(score=0.0)).violations == []
