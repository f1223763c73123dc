"""Each tool call reads its own result (``TraceView.results``), also where the model reused a call id: GPT-4o did in 51
of the 407 tuning runs (a look-up, then a write under the same id), and the view kept one result per id -- the last
-- so the look-up read the write's result (issue 13)."""

from __future__ import annotations

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.invariants import policy_violations
from evoharness.traces.builder import TraceBuilder

VERIFY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email, or "
          "via name + zip code.\nBefore any action that updates the database you must obtain explicit user "
          "confirmation (yes).")


def _reuse(t, ids: dict[str, str]):
    """``t`` with its calls' ids (and their results') renamed by ``ids`` (``call_2`` -> ``call_1``: a reused id)."""
    for m in t.messages:
        for c in m.get("tool_calls") or ():
            c["id"] = ids.get(c["id"], c["id"])
        if m.get("role") == "tool":
            m["tool_call_id"] = ids.get(m["tool_call_id"], m["tool_call_id"])
    return t


def _address_change(reuse: bool):
    """The user is looked up by e-mail (call_1), the agent lists the address change, the user says yes; the change
    fails once (call_2, where ``reuse`` its id is call_1's) and goes through on the retry (call_3)."""
    b = TraceBuilder("t").system(VERIFY).user("Please change the address of order #W123, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result="bob_1")
    b.say("Shall I change the address of #W123 to 12 Elm St?").user("Yes.")
    args = {"order_id": "#W123", "address1": "12 Elm St"}
    b.call("modify_pending_order_address", args, result="Error: the address could not be validated")
    b.call("modify_pending_order_address", args, result='{"order_id": "#W123", "status": "pending"}')
    t = b.deliver("Done.").build(score=0.0)
    return _reuse(t, {"call_2": "call_1"}) if reuse else t


def test_a_look_up_whose_id_a_failed_write_reuses_is_still_the_look_up_that_went_through():
    """The look-up read the failed write's "Error: ..." (the last result under its id): no look-up of the person went
    through before the write, a ``policy.identity_check`` violation the run did not commit."""
    assert [v.rule for v in policy_violations(TraceView(_address_change(reuse=False)))] == []
    assert [v.rule for v in policy_violations(TraceView(_address_change(reuse=True)))] == []


def test_each_call_with_a_reused_id_has_its_own_result_and_key():
    view = TraceView(_address_change(reuse=True))
    lookup, failed, retried = view.calls
    assert (lookup.call_id, failed.call_id) == ("call_1", "call_1")  # the ids as the trace gives them
    assert lookup.id != failed.id  # each occurrence its own key
    assert view.results[lookup.id][1] == "bob_1"
    assert view.results[failed.id][1].startswith("Error:")
    assert view.results[retried.id][1].startswith('{"order_id"')
    # and each tool message answers the call it follows
    assert [view.answered(i) for i in view.tool_steps] == [lookup.id, failed.id, retried.id]


def test_an_occurrence_key_that_is_another_calls_id_is_not_taken():
    """The second "call_1" would be "call_1#2", but a call of the trace already has that id: the key is another."""
    t = _reuse(_address_change(reuse=False), {"call_2": "call_1", "call_3": "call_1#2"})
    view = TraceView(t)
    assert len({c.id for c in view.calls}) == 3
    assert [view.results[c.id][0] for c in view.calls] == view.tool_steps


def test_a_result_no_call_waits_for_is_kept_under_its_id():
    """Two results for one call and a reused id elsewhere: the extra result is kept under the trace's id, as a run with
    no reused id keeps it (the later of the two)."""
    b = TraceBuilder("t").user("hi")
    b.call("get_user_details", {"user_id": "bob_1"}, result="first").result("second")
    b.call("search", {"q": "x"}, result="a").call("search", {"q": "y"}, result="b")
    view = TraceView(_reuse(b.build(), {"call_3": "call_2"}))
    first, search, again = view.calls
    assert view.results[first.id][1] == "second"
    assert (view.results[search.id][1], view.results[again.id][1]) == ("a", "b")
