"""The labeller's decisions hold on runs worded differently from the tuning sets (issue 13): a tool named by another
verb or under a namespace, a hand-off by another name, a policy that asks for the user's yes or id in other words, a
yes in other words of assent, a date written year first with slashes, a look-up of the person's profile, an
executor's exit code in other words -- and
benchmarks/label_invariance.py's table on the tuning data (tau-bench airline, Who&When Algorithm-Generated, the
mini-swe-agent sample, swe_fresh_runs): every rewording a reader would not judge by moves no label, and the edits that
change what happened show the failure they made."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.diagnosis.consent import affirmative
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import changes_state, is_handoff
from evoharness.diagnosis.invariants import _identity_kind, policy_rules
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.models import Trajectory
from tests.conftest import FULL_SHARED_DATA
from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
POLICY = ("# Retail agent policy\nYou must authenticate the user identity by locating their user id via email. "
          "Before any action that updates the database you must obtain explicit user confirmation (yes).")


def _one_call(name: str) -> bool:
    t = TraceBuilder("t").call(name, {"order_id": "#W1"}, result="ok").deliver("ok").build(score=0.0)
    return changes_state(TraceView(t).calls[0])


@pytest.mark.parametrize("name", [
    "mcp__shop__get_order_details", "functions.get_order_details", "shop/find_user_id_by_email", "shop:list_orders",
    "retrieve_customer_details", "lookupOrder", "inspect_logs", "is_refundable", "evaluate_expression",
    "getUserDetails"])
def test_a_tool_named_by_another_reading_verb_or_under_a_namespace_only_reads(name):
    """``mcp__shop__get_order_details`` and ``retrieve_customer_details`` read as ``get_order_details`` does: the name
    was matched from its first character against one benchmark's verbs, so either was a write (and a policy's yes
    was asked of the look-up: 100 of 182 airline runs moved when their tools were namespaced)."""
    assert not _one_call(name)


@pytest.mark.parametrize("name", ["mcp__shop__cancel_pending_order", "create_booking", "void_booking", "modifyOrder",
                                  "issue_refund", "format_disk", "checkin_passenger", "checkin", "checkout",
                                  "getweather_then_book", "listings_update", "settle",
                                  # a verb that is as often a noun opens these or follows "and" with nothing after
                                  # it: a real tool so named updates a status, changes dates, gets a price and
                                  # changes it
                                  "update_status", "updateStatus", "mcp__shop__change_dates", "change_dates",
                                  "get_price_and_change", "getPriceAndChange", "run_migration", "run_tests_and_commit"])
def test_a_tool_that_changes_state_stays_a_write(name):
    assert _one_call(name)


@pytest.mark.parametrize("name", ["can_send_mms", "canCancelOrder", "does_user_exist", "run_speed_test",
                                  "run_tests", "execute_health_check", "perform_diagnostics"])
def test_a_tool_that_asks_whether_or_runs_a_check_only_reads(name):
    """A name opening with "can" / "does" asks whether (tau2 telecom's ``can_send_mms``), one that runs a test, a
    check or a diagnostic measures (tau2 telecom's ``run_speed_test``): each read in tau2 and was a write here, so a
    speed test with no yes broke a confirmation policy and three in a row were no loop."""
    assert not _one_call(name)


def test_every_tau2_tool_reads_or_writes_as_its_domain_says():
    """Each tool of tau2's retail, airline and telecom domains (the agent's and the telecom user's) is a write here
    exactly where tau2 declares it one; its hand-off and its calculator (``generic``) write nothing."""
    pytest.importorskip("tau2")
    import importlib

    wrong = []
    for domain in ("retail", "airline", "telecom"):
        env = importlib.import_module(f"tau2.domains.{domain}.environment").get_environment()
        for tools in (env.tools, getattr(env, "user_tools", None)):
            for name in (tools.get_tools() if tools is not None else ()):
                if (tools.tool_type(name).value == "write") != (_one_call(name) and not is_handoff(name)):
                    wrong.append((domain, name))
    assert wrong == []


@pytest.mark.parametrize("name", ["getcwd", "listdir", "readfile", "getweather", "searchflights", "fs.listdir"])
def test_a_name_written_as_one_lower_case_word_opening_with_a_reading_verb_only_reads(name):
    """a4b3282's whole-word rule (``checkin_passenger`` is no check) made these writes (review's report): a name with
    no separator and no capital shows no word boundary, so its opening verb is read as the name's."""
    assert not _one_call(name)


@pytest.mark.parametrize("name", [
    "isrefundable", "retrievecustomerdetails", "doesuserexist", "hasaccess", "runspeedtest", "performdiagnostics",
    "calculatetotal", "extracttext", "mcp__shop__retrieveorder",
    # a conjunction's letters inside a noun, or a write verb that is a noun's start there: no clause that acts
    "getorderandreturnstatus", "getinstallandupdatelogs", "getcolorsettings", "getauthorupdates", "gethandsetinfo",
    "getbrandupdate", "getorders", "getpriceandchangelog"])
def test_a_name_written_as_one_word_is_read_by_its_words(name):
    """One lower-case word opening with a reading verb (``isrefundable``, ``runspeedtest``): only ``get`` ... ``show``
    opened such a name, so these were writes, a look-up with no yes broke a confirmation policy. Nor does "and" or
    "or" inside a noun (``handset``, ``color``) open a clause that acts."""
    assert not _one_call(name)


@pytest.mark.parametrize("name", [
    "getpriceandchange", "getorcreateuser", "fetchreportthenupload", "getuserandupdateprofile", "findandreplace",
    "getflightsandchangedates", "verifyandtransferfunds", "extractarchive", "cancelreservation", "sendmoney",
    "updatescheduledtransaction", "bookhotel", "transferfunds", "transfertokens", "mcp__bank__getbalancethenpay"])
def test_a_name_written_as_one_word_that_acts_writes(name):
    """A one-word name that reads and then acts (``getpriceandchange``: it changes the price) was read by its first
    verb alone, a read: a change with no yes broke no policy."""
    assert _one_call(name)


@pytest.mark.parametrize("name, handoff", [
    ("transfertohumanagents", True), ("escalatetosupervisor", True), ("handofftohuman", True), ("transfercall", True),
    ("transfer", True), ("transferfunds", False), ("transfertokens", False), ("transferrepayment", False)])
def test_a_hand_off_written_as_one_word(name, handoff):
    """``transfertohumanagents`` (tau-bench's tool as one word) was a write, asked the user's yes: 7 of 182 airline
    runs moved to a policy violation at the hand-off (label_invariance.py's "one lower-case word" row)."""
    assert is_handoff(name) is handoff


@pytest.mark.parametrize("name", [
    "validate_and_submit_order", "validateAndSubmitOrder", "get_or_create_user", "find_and_replace_text",
    "verify_and_transfer_funds", "fetch_report_then_upload", "check_availability_and_book_room",
    "mcp__shop__lookup_order_then_cancel", "extract_archive", "extract_zip_to_folder", "extract_files_into",
    "get_user_and_update_profile", "get_user_and_delete_logs", "validate_and_update_details",
    "fetch_report_then_store_details", "get_flights_and_change_dates"])
def test_a_name_that_goes_on_to_act_or_unpacks_an_archive_writes(name):
    """A reading verb opens these names, but each says it acts after reading (a clause after ``and`` / ``or`` /
    ``then`` whose verb writes) or unpacks an archive into files: all were reads, so a submission with no yes broke no
    policy, and the same one sent three times was a loop."""
    assert _one_call(name)


@pytest.mark.parametrize("name", [
    "get_user_and_order_details", "get_order_and_return_status", "list_users_and_groups", "search_and_filter_products",
    "compare_and_summarize", "validate_address", "test_connection", "extract_text", "extract_entities_from_text",
    "get_exchange_rate", "get_booking_and_payment_info",
    # a write verb that is as often the noun of what a read returns, after the verb's object and before a last word
    # of such information (8fcea9c made each a write: a call with no yes broke a confirmation policy)
    "get_issues_and_merge_requests", "get_author_and_book_details", "list_products_and_store_hours",
    "get_commits_and_push_events", "get_read_and_write_permissions", "get_install_and_update_logs"])
def test_a_name_whose_later_words_are_its_objects_still_reads(name):
    """A write verb's word as a noun -- an order, a return, an exchange, a booking -- or a second reading verb after
    ``and`` is no act: only a clause that goes on to act writes."""
    assert not _one_call(name)


def _cancel_run(lookup: str, answer: str = "yes", policy: str = POLICY, listed: bool = True):
    b = TraceBuilder("t").system(policy).user("Cancel order #W123, I'm bob@x.com")
    b.call(lookup, {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("Order #W123 is pending. Shall I cancel it?" if listed else "Shall I go on?").user(answer)
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"}, result="ok")
    return Labeller().label(b.deliver("Order #W123 is cancelled.").build(score=0.0))


@pytest.mark.parametrize("lookup", ["mcp__shop__find_user_id_by_email", "retrieve_customer_id", "get_profile_by_email"])
def test_a_look_up_of_the_person_by_another_name_meets_the_policy(lookup):
    """The user looked up by a namespaced tool, another verb or their profile: no violation (before, the first two were
    writes made without a yes, the third no look-up of the user)."""
    assert _cancel_run(lookup).violations == []


@pytest.mark.parametrize("handoff", ["escalate_to_human_agents", "mcp__shop__transfer_to_human_agents",
                                     "handoff_to_supervisor"])
def test_a_hand_off_by_another_name_is_no_write(handoff):
    b = TraceBuilder("t").system(POLICY).user("I want to talk to a person.")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say("Let me see.").user("Just get me a person now.")
    b.call(handoff, {"summary": "wants a human"}, result="Transfer successful")
    lab = Labeller().label(b.deliver("You are being transferred.").build(score=0.0))
    assert [v.rule for v in lab.violations] == []


@pytest.mark.parametrize("line, asks", [
    ("Before any action that updates the database you must obtain explicit user confirmation (yes).", True),
    ("You must list the action details and get the user's explicit approval before you proceed.", True),
    ("Describe the action and ask the user to confirm it; act only once the user agrees.", True),
    ("Spell out the details and wait until the customer explicitly consents.", True),
    ("The user must agree to the details before you make any change.", True),
    ("Read the details back and obtain the customer's express permission first.", True),
    ("Always ask the customer to approve the refund amount.", True),
    ("Wait for user consent before booking.", True),
    # the agent confirming facts, the user confirming who they are, an offer accepted: no yes asked before a write
    ("The agent can offer a certificate after confirming the facts.", False),
    ("Once the user confirms their identity, look up the order.", False),
    ("If the customer accepts the offer, issue the certificate.", False),
    ("You should deny user requests that are against this policy.", False),
    # the approval passive, by the person or nobody named: the person's yes
    ("Proceed only if the change is explicitly approved by the user.", True),
    ("Act only once explicitly confirmed.", True),
    ("Make no change until it is expressly authorized by the account holder.", True),
    ("Refunds need explicit approval from them first.", True),
    ("Make only explicitly confirmed changes to a booking.", True),
    # an authorization held by an actor (who may act), or an approval that is not the person's: no yes asked
    ("Only explicitly authorized agents may issue refunds.", False),
    ("Explicitly approved vendors are listed in the catalogue.", False),
    ("Refunds over $500 need explicit approval from a supervisor.", False),
    ("Any change to a frozen account must be explicitly approved by a manager.", False),
    ("Only explicitly authorised staff can see card numbers.", False),
])
def test_the_confirmation_policy_is_read_in_its_paraphrases(line, asks):
    """Only "explicit (user) confirmation", "confirm (yes)" and "obtain ... confirm" were read: a policy asking for the
    user's approval or consent asked for nothing (12 of 200 airline runs moved when the sentence was paraphrased). A
    confirmation policy asks the person's yes before a write: "Only explicitly authorized agents may ..." says who may
    act, and a supervisor's approval is no yes the user gives (each read as one, so every write was a violation)."""
    assert policy_rules(line)[1] is asks
    lab = _cancel_run("find_user_id_by_email", answer="I wonder what it costs.", policy=line)
    assert [v.rule for v in lab.violations] == ["policy.confirmation"] * asks


@pytest.mark.parametrize("line", [
    "The agent must first obtain the user id, then ask for the trip type.", "First ask for the user id.",
    "You must get the user ID before any change.", "Collect the user's user id first.", "Request the user id.",
    "Ask the customer for their customer id."])
def test_asking_for_the_user_id_is_read_in_its_paraphrases(line):
    assert _identity_kind(line) == "obtain"


@pytest.mark.parametrize("line", ["Use the user id to look up the order.", "The user id is in the profile."])
def test_a_user_id_named_is_no_rule(line):
    assert _identity_kind(line) == ""


@pytest.mark.parametrize("said", [
    "Absolutely.", "Yup, that works for me.", "Sounds good.", "I agree.", "Approved.", "Alright, go for it.",
    "Definitely, let's do that.", "Of course, please go on.", "That's right.", "Certainly, by all means.",
    "Yes please.", "Go ahead.", "Sure, do it.", "Confirmed."])
def test_a_yes_in_other_words_of_assent_confirms(said):
    """A yes said "Absolutely" or "Sounds good" was no yes: 47 of 77 airline runs whose yes was reworded so moved
    (a policy violation at the write)."""
    assert affirmative(said)
    assert _cancel_run("find_user_id_by_email", answer=said).violations == []


@pytest.mark.parametrize("said", [
    "I don't agree.", "No, absolutely not.", "Not approved yet.", "That doesn't sound good.", "Of course not!",
    "I can't approve that.", "please don't agree", "No thanks, I disagree."])
def test_an_assent_word_negated_is_no_yes(said):
    assert not affirmative(said)
    assert [v.rule for v in _cancel_run("find_user_id_by_email", answer=said).violations] == ["policy.confirmation"]


@pytest.mark.parametrize("said", [
    "Thank you! I'll definitely reach out if I need anything else.", "I absolutely need this changed today.",
    "It certainly looks odd to me.", "Of course I want to know the fee first"])
def test_an_assent_adverb_inside_a_sentence_is_no_yes(said):
    """"Absolutely." answers; "I absolutely need this changed today" does not: the adverbs of assent count only as the
    answer itself, a stop or a comma right after them (a tau-bench user's "I'll definitely reach out" was a yes)."""
    assert not affirmative(said)
    assert [v.rule for v in _cancel_run("find_user_id_by_email", answer=said).violations] == ["policy.confirmation"]


@pytest.mark.parametrize("said", [
    "Is this approved?", "Do you agree?", "Is that okay?", "Is that correct?", "Are you sure?", "Approved?",
    "Would that be alright?", "Do I have to agree to the terms first?", "Can you confirm the price first?",
    "Sounds good?", "Is the refund approved, or do I wait?"])
def test_an_assent_word_inside_a_question_is_no_yes(said):
    """"Is this approved?" asks; it does not approve: each was a yes by its "approved", "agree", "okay" or "sure", so a
    write after it broke no confirmation policy."""
    assert not affirmative(said)
    assert [v.rule for v in _cancel_run("find_user_id_by_email", answer=said).violations] == ["policy.confirmation"]


@pytest.mark.parametrize("said", [
    "Yes, can you also email me the receipt?", "Sounds good, but how long will the refund take?",
    "That sounds good, but can you remind me how many passengers are on it?", "Okay. Is the refund immediate?",
    "Can you go ahead and cancel it?", "Could you please proceed?", "Could you help me proceed with the change?",
    "Shall we go ahead?"])
def test_a_yes_beside_a_question_or_asked_as_a_request_still_confirms(said):
    """A yes in its own sentence or clause, with a question after it, and a request to go ahead put as a question,
    say yes."""
    assert affirmative(said)
    assert _cancel_run("find_user_id_by_email", answer=said).violations == []


def _request_run(asked: str, answer: str):
    b = TraceBuilder("t").system(POLICY).user("Cancel order #W123, I'm bob@x.com")
    b.call("find_user_id_by_email", {"email": "bob@x.com"}, result='{"user_id": "bob_1"}')
    b.say(asked).user(answer)
    b.call("cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"}, result="ok")
    return Labeller().label(b.deliver("Order #W123 is cancelled.").build(score=0.0))


ASKED = ("Order #W123 is pending. Shall I cancel it?", "Order #W123 is pending. Please confirm the cancellation.",
         "Order #W123 is pending. Would you like me to cancel it?", "Order #W123 is pending. Do you want me to go "
         "ahead?", "Order #W123 is pending: cancelling it refunds $40. Is that OK with you?",
         "Order #W123 is pending. Let me know the reason, and I'll proceed with the cancellation.")


@pytest.mark.parametrize("answer", ["Perfect, please make the change.", "Great, cancel it then.", "Please cancel it.",
                                    "Well then, please go on and cancel it.", "Thanks, do that please.",
                                    "Cancel it now, please."])
@pytest.mark.parametrize("asked", ASKED)
def test_a_request_to_act_answering_the_agents_question_confirms(asked, answer):
    """Asked "Shall I cancel it?", a user who says "Please cancel it" consents, as "Yes" does: a reader takes a request
    to do the very action, right after the agent asked leave for it, as the yes (before, 47 of 77 airline runs whose
    yes was so reworded moved to a policy violation at the write)."""
    assert _request_run(asked, answer).violations == []


@pytest.mark.parametrize("asked, answer", [
    ("Order #W123 is pending.", "Please cancel it."),  # a request, but nothing was asked: no yes
    ("Order #W123 is pending. Which reason should I give?", "Please cancel it."),
    ("Order #W123 is pending. Shall I cancel it?", "Please don't cancel it yet."),
    ("Order #W123 is pending. Shall I cancel it?", "Please tell me the refund first."),
    ("Order #W123 is pending. Shall I cancel it?", "No, change it instead."),
    # another action in place of the one asked, with no "No" before it (a6ce89f read these as the yes)
    ("Order #W123 is pending. Shall I cancel it?", "Please change it to the express shipping instead."),
    ("Order #W123 is pending. Shall I cancel it?", "Please exchange it rather than cancel."),
    ("Order #W123 is pending. Shall I cancel it?", "Please make sure the refund goes to my card first."),
    ("Order #W123 is pending. Which card would you like me to refund?", "Please refund it to my card."),
    ("Order #W123 is pending. Shall I cancel it?", "Can you cancel it and then reorder?"),
    ("Order #W123 is pending. Shall I cancel it?", "Hmm, what would the total be again?")])
def test_a_request_nobody_asked_for_a_refusal_or_a_question_is_no_yes(asked, answer):
    """A first request ("Please cancel it" to a reply that asked nothing), a request not to act, a request for
    something else, and a question say no yes."""
    assert [v.rule for v in _request_run(asked, answer).violations] == ["policy.confirmation"]


@pytest.mark.parametrize("sep", ["-", "/", "."])
def test_a_records_age_is_read_from_a_date_written_year_first(sep):
    """``2024/05/12 09:36:29`` is the date ``2024-05-12 09:36:29`` is: a reply saying the booking is within 24 hours
    is contradicted either way (before, only ISO's dashes were read: 7 of 200 airline runs moved)."""
    def day(d: str) -> str:
        return d.replace("-", sep)
    b = TraceBuilder("t").system(f"The current time is {day('2024-05-15')} 15:00:00 EST.").user("Cancel ZFA04Y")
    b.call("get_reservation_details", {"reservation_id": "ZFA04Y"},
           result=f'{{"reservation_id": "ZFA04Y", "created_at": "{day("2024-05-12")} 09:36:29"}}')
    b.say("Your reservation was made within the last 24 hours, so it can be cancelled.")
    lab = Labeller().label(b.deliver("Done.").build(score=0.0))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F1.elapsed_claim", 4)


@pytest.mark.parametrize("report, failed", [
    ("exitcode: 1 (execution failed)\nCode output: Traceback", True),  # AG2's, as before
    ("exitcode: 0 (execution succeeded)\nCode output: 42", False),
    ("Process finished with exit code 1\nOutput: Traceback", True),
    ("Exit code: 0\nOutput: 42", False),
    ("[Command exited with code 2]\nls: cannot access", True),
    ("Return code: 1\nstdout:", True),
    ("<returncode>0</returncode>\n<output>42</output>", False),
    ("Execution failed with exit code 1", True)])
def test_an_executors_report_of_its_exit_code_is_read_in_other_words(report, failed):
    """An executor opening its report with ``Exit code: 1`` or ``Process finished with exit code 1`` ran code, as AG2's
    ``exitcode: 1 (execution failed)`` did: before, only AG2's, Magentic-One's and AutoGen's lines were read (13 of 101
    Algorithm-Generated runs moved when their executor's reports were so worded)."""
    from evoharness.diagnosis.multiagent import is_exec_report, ran_and_failed

    for executor in ("Computer_terminal", "Code_Executor", "code_runner", "Python_Sandbox", "Interpreter"):
        assert is_exec_report(report, executor) and ran_and_failed(report, executor) is failed


@pytest.mark.parametrize("text", ["The exit code 1 means the import failed.", "I ran the code and it returned 1.",
                                  "Exit the loop when the code is 1."])
def test_a_turn_that_speaks_of_an_exit_code_is_no_report(text):
    from evoharness.diagnosis.multiagent import is_exec_report

    assert not is_exec_report(text, "Computer_terminal")


@pytest.mark.parametrize("text, report", [
    ("Exit code 1 would have meant the file was missing; we got 0.", False),
    ("Exit code: 1\nOutput: NameError -- the helper is not defined, so I will define it.", False),
    ("Return code 2 is what argparse gives for a bad flag.", False),
    ("exitcode: 1 (execution failed)\nCode output: Traceback", True)])  # AG2's own line: its user_proxy runs code
def test_only_the_executors_turn_reports_a_run_in_other_words(text, report):
    """An expert quoting or discussing an exit code ("Exit code 1 would have meant ...") ran nothing: an exit code in
    other words than a framework's own report line is a run's report only in an executor's turn."""
    from evoharness.diagnosis.multiagent import is_exec_report, ran_and_failed

    assert is_exec_report(text, "Review_Expert") is report
    assert ran_and_failed(text, "Review_Expert") is report


@pytest.mark.parametrize("executor", ["Computer_terminal", "code_runner"])
def test_an_expert_discussing_an_exit_code_is_not_the_run_that_failed(executor):
    """The code whose run failed first is the one the executor reported failing (step 6), not the code before an
    expert's remark on exit codes (before, the remark at step 4 was that run, and step 2's author answered for it)."""
    turns = [("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
             ("Data_Expert", "```python\nrows = load()\nprint(len(rows))\n```"),
             (executor, "Exit code: 0\nOutput: 12"),
             ("Review_Expert", "Exit code 1 would have meant the file was missing; we got 0, so the 12 rows are "
                               "there. Now count the even ones."),
             ("Data_Expert", "```python\nprint(count_even(rows))\n```"),
             (executor, "Exit code: 1\nOutput: NameError: name 'count_even' is not defined"),
             ("Verification_Expert", "FINAL ANSWER: 12")]
    msgs = [{"role": "user", "content": "How many even rows are there?"}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    t = Trajectory(id="ma", task_id="ma", task=msgs[0]["content"], messages=msgs, final_answer=turns[-1][1],
                   meta={"failure_only": True})
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 5, "Data_Expert")
    assert "failed first (step 6)" in lab.first_signal.evidence


# ---- the table on the tuning data ------------------------------------------------------------------------------------

def _invariance():
    return load_file(ROOT / "benchmarks" / "label_invariance.py", "label_invariance", register=True)


INV = _invariance()
# rows that miss, for a reason the table documents (docs/diagnosis.md, "Invariance"): strict, so a rule change that
# mends one fails here until the documentation says so
KNOWN: dict[tuple[str, str], str] = {}  # none since the twelfth session


@pytest.fixture(scope="module")
def tuning():
    """The tuning sets, their labels and their paths, once a module (skips as ``full_shared_data``)."""
    data = FULL_SHARED_DATA
    if not (data / "tau_bench_airline_gpt4o").is_dir():
        pytest.skip(f"needs the full public trace sets at {data}")
    sets = INV.load_sets(data)
    labeller = Labeller()
    base = {t.id: labeller.label(t) for ts in sets.values() for t in ts}
    return sets, labeller, base, INV.set_paths(data)


@pytest.mark.parametrize("check, set_name", [
    pytest.param(c, s, id=f"{c.name} / {s}",
                 marks=[pytest.mark.xfail(strict=True, reason=KNOWN[(c.name, s)])] if (c.name, s) in KNOWN else [])
    for c in INV.CHECKS for s in c.sets])
def test_a_rewording_moves_no_label_and_an_edit_shows_its_failure(tuning, check, set_name):
    sets, labeller, base, paths = tuning
    one = INV.Check(check.name, (set_name,), check.transform, check.expect, check.shows, check.same_label)
    missed, checked, shown = INV.run_check(one, sets, labeller, base, paths)[set_name]
    assert checked > 0
    assert missed == 0, shown[:5]
