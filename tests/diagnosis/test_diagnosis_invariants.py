"""The violation log (schemas and domain policy read from the trace) and where content failures are located."""

from __future__ import annotations

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email. "
          "Before any action that updates the database you must obtain explicit user confirmation (yes).")


def test_write_without_identity_check_or_confirmation_is_logged_and_located():
    b = TraceBuilder("t").system(POLICY).user("Cancel my order #W123, I'm bob@x.com")
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"},
           result='{"status": "cancelled"}')
    t = b.say("Your order #W123 is cancelled.").deliver("Your order #W123 is cancelled.").build(score=0.0)
    lab = Labeller().label(t)
    rules = [(v.rule, v.step) for v in lab.violations]
    assert rules == [("policy.confirmation", 2), ("policy.identity_check", 2)]
    assert lab.first_signal.id == "F4.policy_violation" and lab.first_signal.step == 2
    assert "cancel_pending_order" in lab.first_signal.evidence


def test_confirmed_write_after_lookup_is_clean_and_a_failure_is_located_at_the_proposal_the_user_confirmed():
    b = TraceBuilder("t").system(POLICY).user("Cancel order #W123, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result="bob_1")
    b.call("get_order_details", {"order_id": "#W123"}, result='{"status": "pending"}')
    b.say("Order #W123 is pending. Cancel it because it is no longer needed? (yes/no)").user("yes")
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "ordered by mistake"}, result="ok")
    t = b.deliver("Order #W123 is cancelled.").build(score=0.0)
    lab = Labeller().label(t)
    assert lab.violations == []
    # the write the user said yes to was decided at the agent's proposal (step 6), not at the call (step 8)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 6)
    assert "confirmed by the user at step 7" in lab.first_signal.evidence
    assert Labeller().label(t.model_copy(update={"score": 1.0})).failure_class == "healthy"


def test_schema_inferred_from_the_trace_flags_a_missing_argument():
    b = TraceBuilder("t").user("look up orders")
    for oid in ("#W1", "#W2"):
        b.call("get_order_details", {"order_id": oid}, result="ok")
    b.call("get_order_details", {"id": "#W3"}, result="Error: missing order_id")
    lab = Labeller().label(b.deliver("done").build(score=0.0))
    [v] = lab.violations
    assert v.rule == "schema(inferred).required" and v.step == 5 and "order_id" in v.evidence


def test_a_tool_described_as_authenticating_is_not_an_identity_policy():
    """BFCL-style prompts list tools whose descriptions say "Authenticate ..."; that is no domain policy."""
    prompt = ("You are a careful assistant that solves one task using the tools below.\n"
              "- `authenticate_travel`: Authenticate the user with the travel API\n"
              "- `book_flight`: Book a flight given the travel class and the price\n")
    tools = [{"type": "function", "function": {"name": "book_flight", "description": "Book a flight given the "
                                               "travel class and the price", "parameters": {"type": "object"}}}]
    b = TraceBuilder("t").system(prompt).user("Book me the cheapest flight to Rome")
    b.call("book_flight", {"travel_class": "economy", "price": 120}, result='{"booking_id": "B1"}')
    t = b.deliver("Booked: B1").build(score=0.0)
    t = t.model_copy(update={"meta": {**t.meta, "tools": tools}})
    lab = Labeller().label(t)
    assert [v.rule for v in lab.violations if v.rule.startswith("policy.")] == []
    # the same write under a real policy line is still logged
    b = TraceBuilder("t").system(prompt + POLICY).user("Book me the cheapest flight to Rome")
    b.call("book_flight", {"travel_class": "economy", "price": 120}, result='{"booking_id": "B1"}')
    lab = Labeller().label(b.deliver("Booked: B1").build(score=0.0))
    assert "policy.identity_check" in [v.rule for v in lab.violations]


def test_a_failed_patch_is_located_at_the_first_write_to_a_file_the_patch_changes():
    """A reproduction script is a write, but a wrong patch's failure lives in the file it changes."""
    patch = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "cat > reproduce.py <<'EOF'\nimport pkg\nEOF"}, result="")
    b.call("bash", {"command": "python reproduce.py"}, result="AssertionError")
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/core.py"}, result="")
    lab = Labeller().label(b.deliver(patch).build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 5)  # not the script at 1
    assert "pkg/core.py" in lab.first_signal.evidence
