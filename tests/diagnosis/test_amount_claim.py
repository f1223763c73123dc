"""F1.amount_claim: a reply states an amount that the run's own numbers contradict (a balance said to cover more
than it holds; a calculator's negative answer told to the user as a charge)."""

from __future__ import annotations

import json

from evoharness.diagnosis.amounts import first_amount_contradiction
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = "# Retail agent policy\nBefore any action that changes an order you must obtain explicit confirmation (yes)."


def _covers_run(reply: str) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Exchange the lamp in order #W123 for the blue one; user id amy_1.")
    b.call("get_user_details", {"user_id": "amy_1"},
           result=json.dumps({"payment_methods": {"gift_card_77": {"source": "gift_card", "balance": 224}}}))
    b.say(reply)  # step 4
    b.user("Yes, go ahead.")
    b.call("exchange_delivered_order_items", {"order_id": "#W123", "payment_method_id": "gift_card_77"},
           result='{"status": "exchange requested"}')
    return b


def _sign_run(reply: str, answer: str = "-114.0", user_between: bool = False) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Switch my order to the cheaper model, please.")
    b.call("calculate", {"expression": "230 - 344"}, result=answer)  # steps 2, 3
    if user_between:
        b.user("Also, is it in stock?")
    b.say(reply)
    b.user("Yes.")
    b.call("modify_pending_order_items", {"order_id": "#W9"}, result='{"status": "pending (item modified)"}')
    return b


def test_a_balance_said_to_cover_more_than_it_holds_is_f1_at_the_reply():
    reply = "You can use your gift card with a balance of $224 to cover the remaining cost of $234. Shall I proceed?"
    lab = Labeller().label(_covers_run(reply).deliver("Done.").build(0.0))
    assert (lab.failure_class, lab.first_signal.id, lab.first_signal.step) == ("F1", "F1.amount_claim", 4)
    assert "$224" in lab.first_signal.evidence and "$234" in lab.first_signal.evidence


def test_a_balance_that_covers_or_a_negated_cover_is_no_claim():
    for reply in (
        "You can use your gift card with a balance of $300 to cover the remaining cost of $234.",  # true
        "The gift card has a balance of $224, which is not enough to cover the total of $234.",  # negated
        "A balance of $224 won't cover the $234 due; shall I split it with your card?",  # negated
        "Your gift card with a balance of $224 will cover part of the $234; the rest goes on your card.",  # a part
        "Your gift card balance is $224. Shall I charge it?",  # no cover claim
    ):
        t = _covers_run(reply).deliver("Done.").build(0.0)
        assert first_amount_contradiction(TraceView.of(t)) is None, reply
        assert Labeller().label(t).failure_class.value == "F4", reply


def test_a_balance_beside_another_payment_or_covering_a_part_is_no_claim():
    # right statements of a split payment: the balance is not what is said to cover the larger amount
    for reply in (
        "Your gift card balance of $100 will be applied first, and your credit card ending in 1234 will cover the "
        "remaining $250.",
        "I'll use your travel certificate with a balance of $100 and your Visa card to cover the rest of the "
        "$350 fare.",
        "Your gift card has a balance of $80; your credit card will cover the $150 upgrade.",
        "With a remaining balance of $40 on the gift card, we can cover part of the $90 difference.",
    ):
        t = _covers_run(reply).deliver("Done.").build(0.0)
        assert first_amount_contradiction(TraceView.of(t)) is None, reply
    # the balance itself said to cover more than it holds still is one
    t = _covers_run("Your balance of $80 will cover the $150 upgrade.").deliver("Done.").build(0.0)
    assert first_amount_contradiction(TraceView.of(t)).evidence == "says a balance of $80 covers $150"


def test_a_negative_calculator_answer_told_as_a_charge_is_f1_at_the_reply():
    reply = "The new model would cost an additional $114. Would you like me to proceed?"
    t = _sign_run(reply).deliver("Done.").build(0.0)
    lab = Labeller().label(t)
    assert (lab.failure_class, lab.first_signal.id, lab.first_signal.step) == ("F1", "F1.amount_claim", 4)
    assert "-114" in lab.first_signal.evidence


def test_money_back_another_amount_a_positive_answer_or_a_user_in_between_is_no_signal():
    for reply, kw in (
        ("The new model is cheaper: you will receive a refund of $114. Proceed?", {}),
        ("The new model costs $230 in total. Proceed?", {}),  # not the calculator's amount
        ("The new model would cost an additional $114. Proceed?", {"answer": "114.0"}),  # a charge indeed
        ("The new model would cost an additional $114. Proceed?", {"user_between": True}),  # not its reading
    ):
        t = _sign_run(reply, **kw).deliver("Done.").build(0.0)
        assert first_amount_contradiction(TraceView.of(t)) is None, (reply, kw)


def test_a_healthy_run_keeps_its_label_and_the_rule_alone_still_reads_it():
    reply = "You can use your gift card with a balance of $224 to cover the remaining cost of $234. Shall I proceed?"
    t = _covers_run(reply).deliver("Done.").build(1.0)
    lab = Labeller().label(t)
    assert lab.failure_class.value == "healthy" and not any(s.id == "F1.amount_claim" for s in lab.signals)
    assert first_amount_contradiction(TraceView.of(t)).step == 4
