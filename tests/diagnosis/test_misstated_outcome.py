"""F1.misstated_outcome: the final answer tells the user something about the run's own last write -- that it failed,
that it went through, an amount, a status -- that the write's result contradicts."""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.outcome import misstated_outcome
from evoharness.traces.builder import TraceBuilder

ON = DiagnosisConfig(outcome_claims=True)
POLICY = "# Shop policy\nBefore any action that changes an account you must obtain explicit confirmation (yes)."


def _run(name: str, args: dict, result: str, answer: str, earlier: str | None = None) -> TraceBuilder:
    b = TraceBuilder("t").system(POLICY).user("Please help me with my account, user id lee_ray_4411.")
    b.call("get_user_details", {"user_id": "lee_ray_4411"},
           result=earlier or json.dumps({"user_id": "lee_ray_4411", "orders": ["#W5521093"]}))
    b.say(f"I will {name.replace('_', ' ')} with {json.dumps(args)}. Shall I go ahead?")
    b.user("Yes, go ahead.")
    b.call(name, args, result=result)
    return b.deliver(answer)


def _label(b: TraceBuilder, score: float = 0.0):
    t = b.build(score)
    return t, Labeller(ON).label(t)


CANCELLED = json.dumps({"order_id": "#W5521093", "user_id": "lee_ray_4411", "status": "cancelled",
                        "items": [{"name": "Lamp", "price": 84.5}],
                        "payment_history": [{"transaction_type": "refund", "amount": 1234.5}]})
CANCEL = ("cancel_pending_order", {"order_id": "#W5521093", "reason": "no longer needed"})


@pytest.mark.parametrize("answer", [
    "I'm sorry, the cancellation of order #W5521093 could not be processed.",
    "Unfortunately I wasn't able to cancel your order; please try again later.",
    "The request failed on our side. Anything else?",
    "Your cancellation did not go through.",
    "I was unable to complete this request.",
    "The cancellation was unsuccessful, I'm afraid.",
])
def test_an_answer_saying_the_write_failed_where_it_went_through_is_f1_at_the_answer(answer):
    t, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert (lab.failure_class.value, lab.first_signal.id) == ("F1", "F1.misstated_outcome"), answer
    assert lab.first_signal.step == len(t.messages) - 1
    assert "went through" in lab.first_signal.evidence


@pytest.mark.parametrize("answer", [
    "Your order #W5521093 has been cancelled, and $1,234.50 will be refunded.",
    "Done: order #W5521093 is now cancelled. The refund amount is USD 1234.50.",
    "The cancellation went through; the amount of 1234.5 goes back to your card.",
    "I'm unable to change the shipping address as well, but your order was cancelled.",  # a decline of what is next
    "I could not find any other open orders on your account, and #W5521093 is cancelled.",  # a look-up
    "I couldn't apply the discount code you mentioned, so the full amount of $1,234.50 was refunded.",  # not the write
])
def test_an_answer_that_restates_the_result_rightly_is_no_claim(answer):
    t, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert misstated_outcome(TraceView.of(t)) is None, answer
    assert lab.first_signal.id != "F1.misstated_outcome", answer


@pytest.mark.parametrize("answer", [
    "Your order #W5521093 has been cancelled; the refund amount is $1,324.50.",
    "Cancelled. The amount refunded: USD 1357.95 to your card.",
    "All done, the amount is 1111.00 for order #W5521093.",
    "The refund amount of 1,246.00 dollars is on its way.",
])
def test_an_amount_of_the_result_stated_otherwise_is_f1(answer):
    _, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "1234.5" in lab.first_signal.evidence


def test_an_amount_the_result_writes_as_a_string_is_read_as_a_number():
    result = json.dumps({"message": "Added 2.0 GB to line L1002", "new_data_gb": "2.0", "charge": "4.0"})
    for answer, wrong in (("Done: the charge is $5.40.", True), ("Done: the charge is $4.00.", False),
                          ("Done: the charge was USD 4.", False), ("Done: the charge is $-4.40.", True),
                          ("Done: the charge is -$4.00.", False)):
        t = _run("refuel_data", {"line_id": "L1002", "gb_amount": 2.0}, result, answer).build(0.0)
        assert (misstated_outcome(TraceView.of(t)) is not None) is wrong, answer


def test_a_computed_or_qualified_amount_is_no_claim():
    for answer in (
        "Your order #W5521093 is cancelled; the total amount over both orders is $2,000.00.",
        "The remaining balance is $50.",  # no balance field in the result
        "The lamp's price was $84.50 and the amount of $1,234.50 is refunded.",
    ):
        t, _ = _label(_run(*CANCEL, CANCELLED, answer))
        assert misstated_outcome(TraceView.of(t)) is None, answer


@pytest.mark.parametrize("answer", [
    "All done: order #W5521093 is now pending.",
    "Your order's status is processed now.",
    "The order #W5521093 is currently delivered.",
])
def test_a_status_of_the_written_entity_other_than_the_results_is_f1(answer):
    _, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "'cancelled'" in lab.first_signal.evidence


def test_a_status_of_another_entity_or_the_results_own_status_is_no_claim():
    for answer in (
        "Order #W5521093 is now cancelled; your other order #W7000001 is pending.",
        "Your order #W5521093 is cancelled.",
    ):
        t, _ = _label(_run(*CANCEL, CANCELLED, answer))
        assert misstated_outcome(TraceView.of(t)) is None, answer


def test_a_status_the_tools_used_for_the_entity_before_is_read_as_a_status_too():
    earlier = json.dumps({"order_id": "#W5521093", "status": "awaiting pickup"})
    _, lab = _label(_run(*CANCEL, CANCELLED, "Order #W5521093 is now awaiting pickup.", earlier=earlier))
    assert lab.first_signal.id == "F1.misstated_outcome"


@pytest.mark.parametrize("answer", [
    "Your order #W5521093 has been cancelled successfully.",
    "All done! The cancellation went through.",
])
def test_an_answer_saying_a_refused_write_went_through_is_f1(answer):
    _, lab = _label(_run(*CANCEL, "Error: non-pending order cannot be cancelled", answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "Error: non-pending" in lab.first_signal.evidence


def test_a_refused_write_told_as_refused_or_a_repeat_of_a_done_write_is_no_claim():
    refused = "Error: non-pending order cannot be cancelled"
    t, _ = _label(_run(*CANCEL, refused, "I'm sorry, the order could not be cancelled: it is no longer pending."))
    assert misstated_outcome(TraceView.of(t)) is None
    b = TraceBuilder("t").system(POLICY).user("Cancel order #W5521093, user id lee_ray_4411.")
    b.call(*CANCEL, result=CANCELLED).say("Cancelled. Anything else?").user("Please make sure it is cancelled.")
    b.call(*CANCEL, result=refused)
    t = b.deliver("Your order #W5521093 has been cancelled.").build(0.0)
    assert misstated_outcome(TraceView.of(t)) is None


def _roaming(answer: str):
    b = TraceBuilder("t").system(POLICY).user("My phone 555-123-4567 has no data abroad.")
    b.call("get_customer_by_phone", {"phone_number": "555-123-4567"},
           result=json.dumps({"customer_id": "C1001", "line_ids": ["L1001"]}))
    b.say("I can turn on roaming for line L1001. Shall I?").user("Yes.")
    b.call("enable_roaming", {"customer_id": "C1001", "line_id": "L1001"}, result="Roaming enabled successfully")
    return b.deliver(answer).build(0.0)


def test_a_plain_text_result_negated_in_the_answer_is_f1():
    wrong = _roaming("Sorry, roaming could not be enabled on line L1001.")
    assert Labeller(ON).label(wrong).first_signal.id == "F1.misstated_outcome"
    assert misstated_outcome(TraceView.of(_roaming("Roaming is now enabled on line L1001."))) is None


def test_a_healthy_run_keeps_its_label():
    _, lab = _label(_run(*CANCEL, CANCELLED, "The request failed."), score=1.0)
    assert lab.failure_class.value == "healthy"


def test_the_rule_is_off_by_default():
    t, _ = _label(_run(*CANCEL, CANCELLED, "The request failed."))
    assert misstated_outcome(TraceView.of(t)) is not None  # the rule itself
    assert Labeller().label(t).first_signal.id != "F1.misstated_outcome"


def test_an_integer_past_a_floats_range_in_the_result_is_passed_over_not_a_traceback():
    huge = int("1" + "0" * 400)  # JSON's integers have no limit; float() of this one overflows
    result = json.dumps({"order_id": "#W5521093", "status": "cancelled", "refund_amount": 84.5, "ledger": huge})
    t, lab = _label(_run(*CANCEL, result, "Order #W5521093 is cancelled. The refund amount is $12.00."))
    assert lab.first_signal.id == "F1.misstated_outcome" and "84.5" in lab.first_signal.evidence
    only_huge = json.dumps({"order_id": "#W5521093", "status": "cancelled", "refund_amount": huge})
    _, lab = _label(_run(*CANCEL, only_huge, "Order #W5521093 is cancelled. The refund amount is $12.00."))
    assert lab.first_signal.id != "F1.misstated_outcome"  # no amount it can read: nothing to contradict


# -- wordings a reader reads as the write's outcome (issue 13's review: "couldn't get ... cancelled", "errored out",
# "has been marked as delivered", "You'll get 1,300 dollars back", "A refund of $1,300.00"), and their near misses

@pytest.mark.parametrize("answer", [
    "Sorry, I couldn't get order #W5521093 cancelled.",
    "I could not get your order cancelled, unfortunately.",
    "Unfortunately I was not able to have the order cancelled.",
    "The cancellation errored out on our side.",
    "The system errored when I tried to cancel your order.",
    "I ran into an error while cancelling your order.",
    "I hit an unexpected error cancelling order #W5521093.",
    "Your order #W5521093 has not been cancelled.",
    "Your order wasn't cancelled, I'm afraid.",
    "I failed to cancel the order.",
    "It was not possible to cancel your order.",
    "The cancellation never went through.",
    "Your order cancellation hasn't gone through.",
    "Your request was declined by the system.",
])
def test_more_wordings_of_a_failure_where_the_write_went_through_are_f1(answer):
    t, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "went through" in lab.first_signal.evidence


@pytest.mark.parametrize("answer", [
    "If the cancellation didn't go through, just let me know.",  # a condition, no report
    "It may not have gone through yet on the bank's side, but order #W5521093 is cancelled.",  # a hedge
    "I couldn't get the details of your other order, but #W5521093 is cancelled.",  # a look-up of another
    "I wasn't able to cancel your other order #W7000001, as it has shipped.",  # another entity
    "I can't cancel anything else today; order #W5521093 is cancelled.",  # a present decline
    "Your order #W5521093 is cancelled and is no longer pending.",  # "no longer" of a status, no failure
    "Your order #W5521093 has been cancelled, and you won't be charged.",  # the negation is another clause's
    "I was unable to find any other pending orders; #W5521093 has been cancelled.",  # a look-up
])
def test_near_misses_of_a_failure_wording_are_no_claim(answer):
    t, _ = _label(_run(*CANCEL, CANCELLED, answer))
    assert misstated_outcome(TraceView.of(t)) is None, answer


@pytest.mark.parametrize("answer", [
    "Your order #W5521093 is cancelled.",
    "Your order #W5521093 was cancelled.",
    "I've cancelled order #W5521093 for you.",
    "I went ahead and cancelled your order.",
    "Your cancellation was successful.",
    "Your request has been processed.",
    "Your order cancellation is complete.",
])
def test_more_wordings_of_success_where_the_write_was_refused_are_f1(answer):
    _, lab = _label(_run(*CANCEL, "Error: non-pending order cannot be cancelled", answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer


@pytest.mark.parametrize("answer", [
    "I tried to cancel your order, but it was already cancelled.",  # already so: what the refusal says
    "Your order has not been cancelled: it has already shipped.",
    "Once the order is cancelled you will get an email.",  # a condition
    "Your order could not be cancelled because it is no longer pending.",
    "The cancellation should go through once the order is pending again.",  # a hedge
])
def test_a_refused_write_told_as_refused_or_under_a_condition_is_no_claim(answer):
    t, _ = _label(_run(*CANCEL, "Error: non-pending order cannot be cancelled", answer))
    assert misstated_outcome(TraceView.of(t)) is None, answer


@pytest.mark.parametrize("answer", [
    "Order #W5521093 is cancelled. You'll get 1,300 dollars back.",
    "Order #W5521093 is cancelled. A refund of $1,300.00 is on its way.",
    "Cancelled! You will be refunded USD 1300.",
    "Cancelled! 1300 USD will be credited to your card.",
    "Cancelled; we have refunded $1.3k to your card.",
    "Cancelled. You should receive $1,200 back in 5-7 days.",
])
def test_a_refund_stated_as_another_amount_is_f1(answer):
    _, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "1234.5" in lab.first_signal.evidence


@pytest.mark.parametrize("answer", [
    "Order #W5521093 is cancelled. You'll get 1,234.50 dollars back.",
    "Order #W5521093 is cancelled. A refund of $1,234.50 is on its way.",
    "Cancelled! You will be refunded USD 1234.5.",
    "Cancelled; you will get about $1.2k back.",  # an estimate
    "Cancelled. Your other order #W7000001 had a refund of $20.",  # another entity's
    "Cancelled. $1,200.00 goes back to your gift card and $34.50 to your Visa.",  # a split of the refund
    "Cancelled. The lamp cost $84.50; the whole refund is $1,234.50.",  # a part, and the whole
    "Cancelled. Note that the gift card balance is $1,300.",  # a balance the result does not hold
    "Cancelled. If you rebook, you may be charged up to $1,300.",  # a hedge and a bound
    "Cancelled. The total refund across your orders comes to $2,000.",  # a total of the agent's
])
def test_amounts_a_reader_would_not_call_a_misstatement_are_no_claim(answer):
    t, _ = _label(_run(*CANCEL, CANCELLED, answer))
    assert misstated_outcome(TraceView.of(t)) is None, answer


def test_a_bare_thousands_figure_is_no_amount():
    t, _ = _label(_run(*CANCEL, CANCELLED, "Cancelled; a refund is coming, 1.3k points were added too."))
    assert misstated_outcome(TraceView.of(t)) is None


def test_a_charge_stated_as_another_amount_is_f1_and_the_charge_itself_is_not():
    result = json.dumps({"order_id": "#W5521093", "status": "pending (item modified)",
                         "payment_history": [{"transaction_type": "payment", "amount": 120.0},
                                             {"transaction_type": "payment", "amount": 14.25}]})
    args = {"order_id": "#W5521093", "item_ids": ["1"], "new_item_ids": ["2"]}
    wrong = _run("modify_pending_order_items", args, result, "Done! You were charged $41.25 for the difference.")
    assert misstated_outcome(TraceView.of(wrong.build(0.0))) is not None
    right = _run("modify_pending_order_items", args, result, "Done! You were charged $14.25 for the difference.")
    assert misstated_outcome(TraceView.of(right.build(0.0))) is None


@pytest.mark.parametrize("answer", [
    "Your order #W5521093 has been marked as delivered.",
    "Order #W5521093's status was changed to shipped.",
    "The order #W5521093 now shows as pending.",
    "Order #W5521093 is set to processed.",
])
def test_a_status_reached_by_a_passive_or_a_marking_is_read_as_a_status(answer):
    _, lab = _label(_run(*CANCEL, CANCELLED, answer))
    assert lab.first_signal.id == "F1.misstated_outcome", answer
    assert "'cancelled'" in lab.first_signal.evidence


@pytest.mark.parametrize("answer", [
    "Order #W5521093 has been marked as cancelled.",
    "If order #W5521093 is delivered later, we will contact you.",  # a condition
    "Order #W5521093 was pending; it is now canceled.",  # the earlier status, then the result's (spelt otherwise)
])
def test_statuses_a_reader_would_not_call_a_misstatement_are_no_claim(answer):
    t, _ = _label(_run(*CANCEL, CANCELLED, answer))
    assert misstated_outcome(TraceView.of(t)) is None, answer


def test_a_status_of_the_same_stem_as_the_results_is_no_claim():
    result = json.dumps({"order_id": "#W5521093", "status": "return requested"})
    args = {"order_id": "#W5521093", "item_ids": ["1"], "payment_method_id": "card_1"}
    t = _run("return_delivered_order_items", args, result, "Your order #W5521093 is now returned.").build(0.0)
    assert misstated_outcome(TraceView.of(t)) is None


def test_an_amount_another_result_gave_or_a_units_figure_is_no_claim():
    # tau-bench airline (tuning data): "The payment of $600 has been processed" after a calculator said 600.0 and
    # the last write (the bags) recorded other payments; "a refund of $38 per passenger" of a -114 refund
    earlier = json.dumps({"user_id": "lee_ray_4411", "gift_card_balance": 62, "quote": 600.0})
    for answer in ("Cancelled. The payment of $600 has been processed on your card.",
                   "Cancelled. The payment used your $62 gift card.",
                   "Cancelled. The refund of $38 per passenger has been credited back."):
        t = _run(*CANCEL, CANCELLED, answer, earlier=earlier).build(0.0)
        assert misstated_outcome(TraceView.of(t)) is None, answer
    t = _run(*CANCEL, CANCELLED, "Cancelled. The payment of $610 has been refunded.", earlier=earlier).build(0.0)
    assert misstated_outcome(TraceView.of(t)) is not None


def test_a_clause_is_asked_once_whether_it_is_about_the_write_however_many_failures_it_reports(monkeypatch):
    """Each report of failure in a clause asked again whether the whole clause was about the write, a scan of it each
    time: an answer of "could not " 2,000 times (one clause naming no write) took ~5 s to label (~17 s before
    f8b12be), a trace's text costing labelling its square. The clause's answer holds for every report in it."""
    from evoharness.diagnosis import outcome

    asked: list[int] = []
    about = outcome._Write.about
    monkeypatch.setattr(outcome._Write, "about", lambda self, s: asked.append(len(s)) or about(self, s))
    _, lab = _label(_run(*CANCEL, CANCELLED, "could not " * 2000))
    assert lab.first_signal.id != "F1.misstated_outcome" and len(asked) <= 2, len(asked)
    asked.clear()
    _, lab = _label(_run(*CANCEL, CANCELLED, "Sorry, the request failed and failed again."))
    assert lab.first_signal.id == "F1.misstated_outcome" and 1 <= len(asked) <= 3, len(asked)


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_a_result_nested_past_the_parsers_depth_is_read_as_no_object_not_a_traceback(opening):
    """review's find: ``outcome._parse`` caught only ValueError; json.loads of a result nested deeper than the
    interpreter's recursion limit raises RecursionError, which ended the labelling of the run (on with
    ``diagnosis.outcome_claims``)."""
    deep = opening * 50_000 + "1" + ("]" if opening == "[" else "}") * 50_000
    t, label = _label(_run(*CANCEL, result=deep, answer="Sorry, the cancellation of order #W5521093 failed."))
    assert label.trajectory_id == t.id
