"""The violation log (schemas and domain policy read from the trace) and where content failures are located."""

from __future__ import annotations

import pytest

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


def test_a_decline_is_no_confirmation():
    """"No, that's okay" answered a proposal: its "okay" is no yes (it was read as one), so the write after it is
    unconfirmed; a decline that still says go ahead ("No need for a receipt, please proceed") confirms."""
    from evoharness.diagnosis.consent import affirmative

    for said in ("No, that's okay.", "No thanks, I'm okay.", "Nope, that's fine, sure I'll think about it.",
                 "Okay, no thanks.", "no need, ok"):
        assert not affirmative(said), said
    for said in ("No need for a receipt, please proceed.", "No problem, sure.", "Yes, no changes to the dates.",
                 "Okay.", "No, no insurance -- yes, book it."):
        assert affirmative(said), said

    def run(answer: str):
        b = TraceBuilder("t").system(POLICY).user("Cancel order #W123, I'm bob@x.com")
        b.call("find_user_id_by_email", {"email": "bob@x.com"}, result="bob_1")
        b.say("Order #W123 is pending. Shall I cancel it? (yes/no)").user(answer)
        b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"}, result="ok")
        return Labeller().label(b.deliver("Order #W123 is cancelled.").build(score=0.0))

    assert [v.rule for v in run("No, that's okay.").violations] == ["policy.confirmation"]
    assert run("Yes, go ahead.").violations == []


def test_schema_inferred_from_the_trace_flags_a_missing_argument():
    b = TraceBuilder("t").user("look up orders")
    for oid in ("#W1", "#W2"):
        b.call("get_order_details", {"order_id": oid}, result="ok")
    b.call("get_order_details", {"id": "#W3"}, result="Error: missing order_id")
    lab = Labeller().label(b.deliver("done").build(score=0.0))
    [v] = lab.violations
    assert v.rule == "schema(inferred).required" and v.step == 5 and "order_id" in v.evidence


@pytest.mark.parametrize("line, asks", [
    ("Before any change you must authenticate their identity.", True),
    ("Authenticate the customer's identity with their e-mail.", True),
    ("Always verify the user's identity first.", True),
    ("Confirm the identity of the caller before acting.", True),
    ("Confirm who the user is before you change anything.", True),
    ("Make sure you know who the customer is: ask for their e-mail.", True),
    ("Establish the caller's identity by name and zip code.", True),
    ("Authenticate the user by e-mail, or by name and zip code.", True),
    ("use the GITHUB_TOKEN environment variable to authenticate with the GitHub API", False),
    ("Requests are authenticated by a bearer token.", False),
    ("Confirm the booking details with the user.", False),
    ("Check who is on the reservation.", False),
    ("Make sure you know who you are talking to before any change.", True),
    ("Verify who they are before acting on the account.", True),
    # who the customer is talking to, who a ticket is assigned to, the agent's own name: no one's identity to check
    ("Always let the customer know who they are talking to: introduce yourself as Acme support.", False),
    ("Make sure users know who you are before helping.", False),
    ("Check who they are assigned to before reassigning a ticket.", False),
    # a person's identity: the user's, the caller's, theirs, of a passenger
    ("Check the caller's identity before any change.", True),
    ("Verify their identity with the e-mail on file.", True),
    ("Always confirm customer identity first.", True),
    ("Validate the identity of each passenger before rebooking.", True),
    # an identity that is no one's: a database's identity column, an identity provider, an identity mapping
    ("Check that identity columns are not updated by the migration.", False),
    ("Verify the identity provider settings before deploying.", False),
    ("Confirm that the identity map holds one object per primary key.", False),
    ("Authenticate the identity token before each request to the billing API.", False),
    # tau2 telecom's wording: to identify the customer is to establish who they are; their issue is no identity
    ("You must first identify the customer.", True),
    ("Identify the user before making any change to the line.", True),
    ("Identify the customer's issue before suggesting a fix.", False),
    # the identity itself, or a person named otherwise: as worded in many a policy (9d5bf26 read them as no one's)
    ("Verify identity before making any changes to the account.", True),
    ("You must confirm the identity first, then look up the order.", True),
    ("Authenticate identity using the e-mail on file.", True),
    ("Verify the identity of the person you are speaking with.", True),
    ("Before any refund, check the requester's identity.", True),
    ("Check the identity of the cache entries before eviction.", False),
    ("Verify identity columns are preserved by the migration.", False),
    ("Verify identity and access management roles before deploying.", False),  # IAM, a cloud's
    ("Confirm identity and eligibility before any refund.", True),
])
def test_the_identity_policy_is_read_in_its_paraphrases(line, asks):
    """A policy worded 'authenticate their identity' (or 'verify the user's identity', 'confirm who the user is') asks
    for the same check as 'authenticate the user': the narrowed pattern (e49b08b) read none of them but 'verify'."""
    from evoharness.diagnosis.invariants import policy_rules

    assert policy_rules(line)[0] is asks
    b = TraceBuilder("t").system(line).user("Cancel my order #W123, I'm bob@x.com")
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"},
           result='{"status": "cancelled"}')
    lab = Labeller().label(b.deliver("Your order #W123 is cancelled.").build(score=0.0))
    assert [v.rule for v in lab.violations if v.rule == "policy.identity_check"] == (["policy.identity_check"] * asks)


AUTHENTICATE = ("At the beginning of the conversation, you have to authenticate the user identity by locating their "
                "user id via email, or via name + zip code. Before any action that updates the database you must "
                "obtain explicit user confirmation (yes).")
OBTAIN = ("The agent must first obtain the user id from the user. Before any action that updates the database you "
          "must obtain explicit user confirmation (yes).")


@pytest.mark.parametrize(("policy", "violated"), [(AUTHENTICATE, True), (OBTAIN, False)])
def test_a_user_id_the_user_states_meets_only_a_policy_that_asks_for_the_id(policy, violated):
    """A policy that asks to authenticate who the user is is met by a look-up of the user, not by the user saying a
    user id (a claim checks no one: tau2 retail's gold paths look the user up even where the user states it); one
    that asks only to obtain the user id (tau2 airline's) is met by the user's saying it. Before, the user's word met
    both (tau2_gold_paths.py's ``before_identity`` failures of users who state their id were never located)."""
    b = TraceBuilder("t").system(policy).user("Hi, I'm mei_kovacs_8020. Please cancel my order #W123.")
    b.call("get_order_details", {"order_id": "#W123"}, result='{"order_id": "#W123", "user_id": "mei_kovacs_8020", '
                                                            '"status": "pending"}')
    b.say("Cancel order #W123 (reason: no longer needed)? Please confirm (yes).").user("Yes.")
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"},
           result='{"order_id": "#W123", "status": "cancelled"}')
    lab = Labeller().label(b.deliver("Order #W123 is cancelled.").build(score=0.0))
    assert [(v.rule, v.step) for v in lab.violations] == ([("policy.identity_check", 6)] if violated else [])
    b2 = TraceBuilder("t").system(policy).user("Hi, I'm mei_kovacs_8020, mei@x.com. Please cancel my order #W123.")
    b2.call("find_user_id_by_email", {"email": "mei@x.com"}, result="mei_kovacs_8020")
    b2.say("Cancel order #W123 (reason: no longer needed)? Please confirm (yes).").user("Yes.")
    b2.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"},
            result='{"order_id": "#W123", "status": "cancelled"}')
    assert Labeller().label(b2.deliver("Order #W123 is cancelled.").build(score=0.0)).violations == []


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


def _rejected_first_try(first_block: str):
    """A mini-swe-agent-like run: the agent's first edit of pkg/core.py comes in a reply with two bash blocks, the
    harness rejects the reply for its format, and the agent re-sends the edit alone."""
    patch = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "cat > reproduce.py <<'EOF'\nimport pkg\nEOF"}, result="")
    b.say(f"THOUGHT: change it.\n\n```bash\n{first_block}\n```\n\n```bash\ngrep -n b pkg/core.py\n```")
    b.user("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.")
    b.event("format_rejected", step=b.step - 1)
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/core.py"}, result="")
    return Labeller().label(b.deliver(patch).build(score=0.0))


def test_a_patch_edit_first_sent_in_a_reply_rejected_for_its_format_is_located_at_that_reply():
    """The commitment to the edit is made in the rejected reply (the harness refused its form, not its content;
    the same edit is re-sent alone): the dev-labelled SWE runs put the failure there."""
    lab = _rejected_first_try("sed -i 's/a/b/' pkg/core.py")
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 3)
    assert "rejected for its format" in lab.first_signal.evidence
    # a rejected reply that writes no patched file (a reproduction script) is not the patch's first write
    lab = _rejected_first_try("cat > check.py <<'EOF'\nprint(1)\nEOF")
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 5)
    # nor is one that only reads the patched file
    lab = _rejected_first_try("cat pkg/core.py")
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 5)


def test_when_no_write_touches_a_patched_file_the_first_in_place_edit_is_located_not_a_new_scratch_file():
    """The delivered diff names only files the agent never wrote (here an environment's own setup.py change; the
    agent's sed matched nothing): its edits did not reach the submission. The run's change to the code starts at
    its first in-place edit of an existing file, not at the reproduction folder it made first."""
    patch = "diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n"
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "mkdir repro"}, result="")
    b.call("bash", {"command": "cat > repro/run.py <<'EOF'\nimport pkg\nEOF"}, result="")
    b.call("bash", {"command": "sed -i '183s/x/y/' pkg/core.py"}, result="")
    lab = Labeller().label(b.deliver(patch).build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 5)
    assert "in-place edit" in lab.first_signal.evidence
    # no in-place edit at all: the first write, as before
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "mkdir repro"}, result="")
    b.call("bash", {"command": "cat > pkg/new.py <<'EOF'\nx = 1\nEOF"}, result="")
    lab = Labeller().label(b.deliver(patch).build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 1)


@pytest.mark.parametrize("view, edit", [
    # SWE-agent with function calling: one editor tool, the command an argument
    (("str_replace_editor", {"command": "view", "path": "/testbed/pkg/core.py"}),
     ("str_replace_editor", {"command": "str_replace", "path": "/testbed/pkg/core.py", "old_str": "a",
                             "new_str": "b"})),
    # SWE-agent without it: the same tool as a shell command
    (("bash", {"command": "str_replace_editor view /testbed/pkg/core.py"}),
     ("bash", {"command": "str_replace_editor str_replace /testbed/pkg/core.py --old_str a --new_str b"})),
    # the classic windowed editor
    (("bash", {"command": "open pkg/core.py"}), ("bash", {"command": "edit 1:1\nb\nend_of_edit"})),
])
def test_a_view_of_the_patched_file_is_no_write_the_editors_change_is(view, edit):
    patch = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call(*view, result="1\ta")
    b.call("bash", {"command": "python -c 'import pkg'"}, result="")
    b.call(*edit, result="The file /testbed/pkg/core.py has been edited.")
    lab = Labeller().label(b.deliver(patch).build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 5)


def test_a_file_the_patch_creates_is_passed_over_for_one_it_changes():
    """SWE-agent's submissions often keep the reproduction script (``new file mode`` in the diff): writing it is not
    where a wrong fix starts; the first write to a file the patch changes that existed before is."""
    new_file = ("diff --git a/reproduce.py b/reproduce.py\nnew file mode 100644\nindex 0000000..e69de29\n"
                "--- /dev/null\n+++ b/reproduce.py\n@@ -0,0 +1 @@\n+import pkg\n")
    changed = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"

    def label(patch):
        b = TraceBuilder("t").user("Fix the bug in pkg")
        b.call("str_replace_editor", {"command": "create", "path": "/testbed/reproduce.py", "file_text": "import pkg"},
               result="File created successfully at: /testbed/reproduce.py")
        b.call("bash", {"command": "python reproduce.py"}, result="AssertionError")
        b.call("str_replace_editor", {"command": "str_replace", "path": "/testbed/pkg/core.py", "old_str": "a",
                                      "new_str": "b"}, result="The file /testbed/pkg/core.py has been edited.")
        s = Labeller().label(b.deliver(patch).build(score=0.0)).first_signal
        return s.id, s.step

    assert label(new_file + changed) == ("F4.first_write", 5)
    assert label(new_file) == ("F4.first_write", 1)  # a patch that only creates files: its first one, as before


def test_swe_agents_windowed_edit_writes_the_file_it_has_open():
    """Classic SWE-agent: ``create``/``open`` FILE makes FILE the open file and ``edit N:M`` writes it without
    naming it. The reproduction script's edit is not the patch's first write; the edit made with the patched file
    open is."""
    patch = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call("bash", {"command": "create reproduce.py"}, result="[File: /testbed/reproduce.py (1 lines total)]")
    b.call("bash", {"command": "edit 1:1\nimport pkg\nend_of_edit"}, result="File updated.")
    b.call("bash", {"command": "python reproduce.py"}, result="AssertionError")
    b.call("bash", {"command": "open pkg/core.py 10"}, result="[File: /testbed/pkg/core.py (40 lines total)]")
    b.call("bash", {"command": "edit 10:10\n    return b\nend_of_edit"}, result="File updated.")
    lab = Labeller().label(b.deliver(patch).build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 9)
    assert "pkg/core.py" in lab.first_signal.evidence


@pytest.mark.parametrize("answer", ["61,907", "Lakeview's population was 61,907 at the 2020 census."])
def test_a_finish_call_whose_answer_a_tool_showed_is_the_delivery_not_a_write(answer):
    """An agent that answers through a call (``finish``, no reply after it) copying what its search showed: the call
    is the delivery, no domain write, so no identity check or confirmation is owed. 44e2436 made a call holding an
    answer a user message or tool result held before no delivery (for the state "OK" the user gave, written to an
    address and then said), so every such finish was a write made with no look-up of the user and no yes."""
    t = (TraceBuilder("t").system(POLICY).user("How many people live in Lakeview? Answer with the census figure.")
         .call("web_search", {"query": "Lakeview population 2020 census"},
               result="Lakeview: population 61,907 (2020 census). Lakeview's population was 61,907 at the 2020 census.")
         .call("finish", {"answer": answer}, result="ok"))
    t.final_answer = answer
    lab = Labeller().label(t.end("delivered").build(0.0))
    assert lab.violations == []
    assert lab.first_signal.id != "F4.policy_violation"


def test_a_write_holding_the_answer_a_later_finish_delivers_is_still_a_write():
    """The room booked is the answer the ``finish`` call gives after it: the finish is the delivery, the booking a
    write made with no look-up of the user and no yes. Any call holding the answer (the user gave "B12" before, no reply
    says it) was taken for the delivery, so the booking ran no policy rule."""
    t = (TraceBuilder("t").system(POLICY).user("Book meeting room B12 for 3pm and tell me which room you booked.")
         .call("book_room", {"room": "B12", "time": "15:00"}, result='{"status": "booked"}')
         .call("finish", {"answer": "B12"}, result="ok"))
    t.final_answer = "B12"
    lab = Labeller().label(t.end("delivered").build(0.0))
    want = [("policy.confirmation", 2), ("policy.identity_check", 2)]
    assert sorted((v.rule, v.step) for v in lab.violations) == want


@pytest.mark.parametrize("listed", [False, True])
def test_a_request_that_holds_okay_is_no_yes_to_an_action_never_listed(listed):
    """The user's opening request says "okay" ("... okay with any color"); the agent looks the order up and
    writes with no listing and no question: the last user message before the write is the request, which held an
    affirmative word and was taken for the yes (tau2_gold_paths.py's no-confirmation failures of retail 18, 37, 41,
    ... were placed at the write only by the F4.first_write fallback). A yes confirms only after the agent named
    something the write does (or the yes names it). The control: the agent lists the order and the user says yes."""
    b = TraceBuilder("t").system(AUTHENTICATE).user("I'm bob@x.com. Cancel my order #W123, I'm okay with a refund "
                                                    "to my card.")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result="bob_1")
    if listed:
        b.say("Cancel order #W123 (reason: no longer needed)? Please confirm (yes).").user("Yes.")
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"},
           result='{"order_id": "#W123", "status": "cancelled"}')
    lab = Labeller().label(b.deliver("Order #W123 is cancelled.").build(score=0.0))
    assert [v.rule for v in lab.violations] == ([] if listed else ["policy.confirmation"])


@pytest.mark.parametrize(("listing", "args", "confirmed"), [
    ("Shall I move you to Business class?", {"cabin": "business"}, True),
    ("Shall I move you to the flight on May 20th?", {"date": "2024-05-20"}, True),
    ("Shall I move you to the flight on the 20th of May, 2024?", {"date": "2024-05-20"}, True),
    ("Shall I charge $1,234.00 to your card?", {"amount": 1234}, True),
    ("Shall I charge 1234 dollars to your card?", {"amount": 1234.0}, True),
    ("Shall I move you to the flight on May 20, 2023?", {"date": "2024-05-20"}, False),  # another year
    ("Shall I move you to the flight on May 21st?", {"date": "2024-05-20"}, False),
    ("Shall I charge $100 to your card?", {"amount": 1000}, False),
    ("Shall I change reservation HAT069 to 2 bags?", {"reservation_id": "HAT070", "bags": 2.0}, False),
])
def test_a_listing_names_a_value_in_any_case_and_a_number_or_date_however_written(listing, args, confirmed):
    """A yes confirms a write only after the agent named one of its argument values (2399c04), and the match was
    exact: an agent listing "Business", "May 20" or "$1,234.00" for a write of "business", "2024-05-20" or 1234
    had listed nothing, and the write was a policy.confirmation violation. A value is now named in any case, a
    number however written and an ISO date as words (a year said must be the value's)."""
    b = TraceBuilder("t").system(AUTHENTICATE).user("I'm bob@x.com. Please change my booking.")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result="bob_1")
    b.say(f"{listing} Please confirm (yes).").user("Yes.")
    b.call("update_reservation", args, result='{"status": "updated"}')
    lab = Labeller().label(b.deliver("Your booking is updated.").build(score=0.0))
    assert [v.rule for v in lab.violations] == ([] if confirmed else ["policy.confirmation"])
