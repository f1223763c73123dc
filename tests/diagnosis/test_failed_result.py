"""One reading of "this tool call failed" (``context.failed_result``) for every rule that asks: the invariants read
an ``Error`` prefix only, where the outcome check also read a JSON ``error`` / ``success: false`` / ``ok: false``,
so a lookup answered ``{"error": "user not found"}`` was a failed write's result to one rule and a done identity
check to the other."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import failed_call_ids
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.outcome import _last_write
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email. "
          "Before any action that updates the database you must obtain explicit user confirmation (yes).")

RESULTS = [  # (a tool result, whether it says the call failed)
    ("Error: order not found", True), ("  error - no such user", True), (" " * 100 + "Error: late", True),
    ('{"error": "user not found"}', True), ('{"success": false, "reason": "locked"}', True),
    ('{"ok": false}', True), ('{"status": "cancelled"}', False), ('{"error": null, "id": "u1"}', False),
    ('{"error": ""}', False), ('["error"]', False), ('{"error": "x"', False), ("bob_1", False),
    ('{"note": "the error was fixed", "ok": true}', False),
]


def _run(result: str):
    b = TraceBuilder("t").system(POLICY).user("Cancel order #W123, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result=result)
    b.call("get_order_details", {"order_id": "#W123"}, result='{"status": "pending"}')
    b.say("Cancel order #W123 because it is no longer needed? (yes/no)").user("yes")
    b.call("cancel_order", {"order_id": "#W123", "reason": "no longer needed"}, result=result)
    return b.deliver("Order #W123 is cancelled.").build(score=0.0)


@pytest.mark.parametrize(("result", "failed"), RESULTS)
def test_the_invariants_and_the_outcome_check_read_a_failed_call_alike(result, failed):
    view = TraceView.of(_run(result))
    lookup, _, write = view.calls
    assert (lookup.id in failed_call_ids(view)) is failed
    assert _last_write(view, view.final_step).failed is failed


@pytest.mark.parametrize("result", ['{"error": "user not found"}', "Error: user not found"])
def test_a_lookup_whose_result_says_it_failed_is_no_identity_check(result):
    rules = [v.rule for v in Labeller().label(_run(result)).violations]
    assert "policy.identity_check" in rules, rules
    assert "policy.identity_check" not in [v.rule for v in Labeller().label(_run("bob_1")).violations]
