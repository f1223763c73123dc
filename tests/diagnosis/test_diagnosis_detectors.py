"""Each detector fires on a small hand-written trajectory, and stays silent where it must."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import (
    FrictionDetector,
    HarnessErrorDetector,
    NoDeliveryDetector,
    PoorDeliveryDetector,
    RepeatedActionDetector,
    StepBudgetDetector,
    TerminationDetector,
    UnbackedClaimDetector,
)
from evoharness.diagnosis.labeller import label_trajectory
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.models import Termination

CFG = DiagnosisConfig()


def fired(detector, traj, cfg=CFG):
    return detector.detect(TraceView.of(traj), cfg)


def test_repeated_action_fires_on_third_identical_call():
    b = TraceBuilder().user("look up order 7")
    for _ in range(3):
        b.call("get_order", {"id": 7}, result="order 7: pending")
    t = b.deliver("order 7 is pending").build(score=0.0)
    [s] = fired(RepeatedActionDetector(), t)
    assert s.id == "F3.repeated_action"
    assert s.step == 5  # the third call: messages 1, 3, 5
    assert "3x get_order" in s.evidence


def test_repeated_action_uses_canonical_arguments():
    b = TraceBuilder().user("x")
    b.call("f", '{"a": 1, "b": 2}', result="r").call("f", '{"b":2,"a":1}', result="r").call("f", '{"a":1,"b":2}',
                                                                                               result="r")
    assert fired(RepeatedActionDetector(), b.build())


def test_repeated_action_silent_for_distinct_calls_or_outside_window():
    b = TraceBuilder().user("x")
    for i in range(4):
        b.call("get_order", {"id": i}, result="ok")
    assert fired(RepeatedActionDetector(), b.build()) == []
    # same call three times but spread over more turns than the window
    b = TraceBuilder().user("x")
    for i in range(13):
        b.call("same" if i % 6 == 0 else f"other{i}", {}, result="ok")
    assert fired(RepeatedActionDetector(), b.build()) == []


def test_repeated_action_ignores_calls_the_harness_blocked():
    b = TraceBuilder().user("x")
    b.call("f", {}, result="ok").call("f", {}, result="ok").call("f", {}, result="blocked by loop guard")
    b.event("blocked_call", "loop guard blocked repeat", call_id="call_3")
    assert fired(RepeatedActionDetector(), b.build()) == []


def test_one_format_rejection_fixed_next_step_does_not_fire():
    b = TraceBuilder().user("x").say("two actions at once")
    b.user("Please provide exactly one action").event("format_rejected", "found 2 actions")
    b.call("bash", {"command": "ls"}, result="file.py")
    t = b.deliver("done").build(score=0.0)
    assert fired(FrictionDetector("format_rejected"), t) == []


def test_rejections_each_fixed_on_the_next_turn_are_friction_not_the_failure():
    # two rejections, each fixed at once (the mini-swe-agent pattern in failed and resolved runs alike)
    b = TraceBuilder().user("x")
    b.say("bad 1").user("rejected").event("format_rejected", "found 2 actions")
    b.call("bash", {"command": "ls"}, result="ok")
    b.say("bad 2").user("rejected").event("format_rejected", "found 3 actions")
    b.call("bash", {"command": "cat f"}, result="ok")
    assert fired(FrictionDetector("format_rejected"), b.deliver("done").build(score=0.0)) == []
    # recovered, each is friction even with friction_min=1
    assert fired(FrictionDetector("format_rejected"), b.build(score=0.0), DiagnosisConfig(friction_min=1)) == []


def test_rejections_fixed_after_several_turns_are_friction_not_the_failure():
    b = TraceBuilder().user("x")
    for k in range(3):  # three rejected replies in a row, then an accepted action
        b.say(f"bad {k}").user("rejected").event("format_rejected", f"found {k + 2} actions")
    b.call("bash", {"command": "ls"}, result="ok")
    assert fired(FrictionDetector("format_rejected"), b.deliver("done").build(score=0.0)) == []
    # the same three with no accepted action after them: the agent never got past the harness
    b = TraceBuilder().user("x")
    for k in range(3):
        b.say(f"bad {k}").user("rejected").event("format_rejected", f"found {k + 2} actions")
    [s] = fired(FrictionDetector("format_rejected"), b.say("I cannot continue.").build(score=0.0))
    assert s.step == 2
    # friction_min=1: one rejection the agent never got past fires though the next turn hit no friction
    b = TraceBuilder().user("x").say("bad").user("rejected").event("format_rejected", "found 2 actions")
    t = b.deliver("done").build(score=0.0)
    assert fired(FrictionDetector("format_rejected"), t) == []
    [s] = fired(FrictionDetector("format_rejected"), t, DiagnosisConfig(friction_min=1))
    assert s.step == 2


def _listing_run(between: str) -> object:
    b = TraceBuilder().user("Fix the bug in pkg/core.py")
    for _ in range(4):  # the same listing four times, nothing between
        b.say("Let me look.\n```bash\nls -la\n```").user("core.py\nsetup.py")
    b.say(f"Now this.\n```bash\n{between}\n```").user("")
    b.say("Again.\n```bash\nls -la\n```").user("core.py\nnotes.txt\nsetup.py")
    return b.deliver("done").build(score=0.0)


def test_a_repeat_looked_at_again_after_a_write_is_still_a_loop():
    """Four identical ``ls -la`` with nothing between are a loop though a later ``ls -la`` shows another listing: a
    file was written before it, so the listing changed with the write, not by trying again (mini-swe django-12125:
    read as a retry that got through). With no write before it, the other listing is a retry that got through."""
    [s] = fired(RepeatedActionDetector(), _listing_run("echo notes > notes.txt"))
    assert s.step == 5 and "3x" in s.evidence
    assert fired(RepeatedActionDetector(), _listing_run("cat setup.py")) == []


def test_a_tool_error_retried_until_it_went_through_is_not_the_failure():
    b = TraceBuilder().user("book it")
    for _ in range(3):
        b.call("book", {"id": 1}, result="Error: service busy").event("tool_error", "Error: service busy")
    t = b.call("book", {"id": 1}, result="booked").deliver("booked").build(score=0.0)
    assert fired(FrictionDetector("tool_error"), t) == []
    assert fired(RepeatedActionDetector(), t) == []  # a retry that got through is no loop either
    b = TraceBuilder().user("book it")
    for _ in range(3):
        b.call("book", {"id": 1}, result="Error: service busy").event("tool_error", "Error: service busy")
    t = b.call("search", {"q": 1}, result="ok").deliver("sorry").build(score=0.0)
    [s] = fired(FrictionDetector("tool_error"), t)  # another tool going through does not recover this one
    assert s.step == 2
    [s] = fired(RepeatedActionDetector(), t)
    assert s.step == 5


def test_friction_that_took_half_a_budget_exhausted_run_explains_the_failure():
    """Friction the agent got past is still the failure when the run then ran out of its step budget and the
    friction took at least half its turns (it explains how the run failed); not with fewer, nor on delivery."""
    def run(rejected: int, accepted: int, *, out_of_budget: bool):
        b = TraceBuilder().user("x")
        for k in range(rejected):
            b.say(f"bad {k}").user("rejected").event("format_rejected", f"found {k + 2} actions")
        for k in range(accepted):
            b.call("bash", {"command": f"ls {k}"}, result=f"ok {k}")
        if out_of_budget:
            return b.event("budget_exhausted", "step limit").end(Termination.step_budget).build(score=0.0)
        return b.deliver("done").build(score=0.0)

    [s] = fired(FrictionDetector("format_rejected"), run(3, 3, out_of_budget=True))
    assert s.step == 2 and "3 of the run's 6 turns" in s.evidence
    assert label_trajectory(run(3, 3, out_of_budget=True)).failure_class == "F2"
    assert fired(FrictionDetector("format_rejected"), run(3, 4, out_of_budget=True)) == []  # under half
    assert fired(FrictionDetector("format_rejected"), run(3, 1, out_of_budget=False)) == []  # it delivered


def test_a_rejection_repeated_until_the_agent_fixed_the_call_is_no_loop():
    # tau-bench airline 11:2: book_reservation sent three times with the same payment and the same
    # "Error: payment amount does not add up", then with the right amount: it went through
    b = TraceBuilder().user("book it")
    for _ in range(3):
        b.call("book", {"amount": 299}, result="Error: payment amount does not add up")
        b.event("tool_error", "Error: payment amount does not add up")
    t = b.call("book", {"amount": 375}, result="booked").deliver("booked").build(score=0.0)
    assert fired(RepeatedActionDetector(), t) == []
    assert fired(FrictionDetector("tool_error"), t) == []
    # the same three repeats with the same (successful) result are a loop: nothing was rejected
    b = TraceBuilder().user("find it")
    for _ in range(3):
        b.call("search", {"q": "x"}, result="no match")
    t = b.call("search", {"q": "y"}, result="found").deliver("found").build(score=0.0)
    [s] = fired(RepeatedActionDetector(), t)
    assert s.step == 5


def test_tool_error_is_friction_f2_reads_and_infra_faults_are_class_e():
    b = TraceBuilder().user("book it").call("book", {"id": 1}, result="Error: payment amount does not add up")
    b.event("tool_error", "Error: payment amount does not add up").say("Let me recompute.")
    b.call("book", {"id": 1}, result="booked")
    assert fired(FrictionDetector("tool_error"), b.deliver("booked").build(score=0.0)) == []  # recovered
    b = TraceBuilder().user("book it").call("book", {"id": 1}, result="Error: flight not available")
    b.event("tool_error", "Error: flight not available")
    b.call("book", {"id": 2}, result="Error: flight not available").event("tool_error", "Error: flight not available")
    [s] = fired(FrictionDetector("tool_error"), b.build(score=0.0))
    assert (s.id, s.step) == ("F2.tool_error", 2)
    b = TraceBuilder().user("x").call("f", {}, result="Error: 503 service unavailable")
    b.event("tool_infra_error", "503 service unavailable")
    lab = label_trajectory(b.build(score=0.0))
    assert lab.failure_class == "E" and lab.lever == "none" and lab.first_signal.id == "E.tool_infra_error"


def test_in_place_edits_with_any_flags_are_progress():
    for edit in ("sed -E -i 's/a{k}/b/' src/x.py", "sed -ri 's/a{k}/b/' src/x.py", "perl -pi -e 's/a{k}/b/' src/x.py",
                 "sed --in-place 's/a{k}/b/' src/x.py", "sed -e 's/a{k}/b/' -i src/x.py", "sed -i.bak 's/a{k}/b/' x"):
        b = TraceBuilder().user("fix the bug")
        for k in range(3):  # the same failing output each time: only the edit between makes it progress
            b.call("bash", {"command": "python -m pytest tests/test_x.py"}, result="1 failed")
            b.call("bash", {"command": edit.format(k=k)}, result="")
        assert fired(RepeatedActionDetector(), b.deliver("patch").build(score=0.0)) == [], edit
    for look in ("sed -n '1,20p' src/x.py", "perl -Mstrict -ne 'print if /def/' src/x.py", "perl -Ilib t/x.t",
                 "sed -n '1,20p' src/x.py | grep -i def"):
        b = TraceBuilder().user("fix the bug")
        for _ in range(3):  # these only read (sed -n prints; an i in -Mstrict or -Ilib, or grep's -i, edits nothing)
            b.call("bash", {"command": "python -m pytest tests/test_x.py"}, result="1 failed")
            b.call("bash", {"command": look}, result="def f(): ...")
        assert [s.id for s in fired(RepeatedActionDetector(), b.deliver("patch").build(score=0.0))] == \
            ["F3.repeated_action"], look


def test_edit_then_rerun_is_progress_not_a_loop():
    b = TraceBuilder().user("fix the bug")
    for i in range(4):
        b.call("bash", {"command": "python -m pytest tests/test_x.py"}, result=f"{4 - i} failed")
        b.call("bash", {"command": f"sed -i 's/a{i}/b{i}/' src/x.py"}, result="")
    assert fired(RepeatedActionDetector(), b.deliver("patch").build(score=0.0)) == []
    # the same test run after an edit, with the same output each time, is still not a loop (the state changed)
    b = TraceBuilder().user("fix the bug")
    for i in range(4):
        b.call("bash", {"command": "python -m pytest"}, result="1 failed")
        b.call("bash", {"command": f"echo fix{i} >> src/x.py"}, result="")
    assert fired(RepeatedActionDetector(), b.build(score=0.0)) == []
    # re-running a read with a different result each time is progress too (a page that loads)
    b = TraceBuilder().user("x")
    for i in range(3):
        b.call("get_status", {"id": 7}, result=f"pending {i}")
    assert fired(RepeatedActionDetector(), b.build(score=0.0)) == []


def test_unrecovered_friction_fires_on_first_occurrence():
    # rejected, and the very next turn is rejected again (of another kind)
    b = TraceBuilder().user("x")
    b.say("bad").user("rejected").event("format_rejected", "no action found")
    b.call("nosuch", {}, result="Error: unknown tool nosuch").event("unknown_tool", "unknown tool nosuch")
    [s] = fired(FrictionDetector("format_rejected"), b.build(score=0.0))
    assert s.step == 2 and "unrecovered" in s.evidence
    # friction at the last turn: the run ended on it
    b = TraceBuilder().user("x").call("f", {}, result="Error: blocked").event("blocked_call", "policy")
    [s] = fired(FrictionDetector("blocked_call"), b.build(score=0.0))
    assert "run ended" in s.evidence


def test_a_shell_call_of_another_program_does_not_get_past_a_blocked_call():
    # one shell tool runs everything: eight blocked deletions, then an ls that went through, then a wrong answer
    b = TraceBuilder().user("clean the build folder")
    for _ in range(8):
        b.call("bash", {"command": "rm -rf build/"}, result="Error: blocked by policy").event("blocked_call", "rm")
    b.call("bash", {"command": "ls"}, result="build src")
    [s] = fired(FrictionDetector("blocked_call"), b.deliver("done").build(score=0.0))
    assert s.id == "F2.blocked_call" and "unrecovered" in s.evidence
    # the same program going through later (after cd) is getting past it, as before
    b = TraceBuilder().user("clean the build folder")
    for _ in range(3):
        b.call("bash", {"command": "rm -rf build/"}, result="Error: blocked by policy").event("blocked_call", "rm")
    b.call("bash", {"command": "cd /repo && rm -rf build/tmp"}, result="")
    assert fired(FrictionDetector("blocked_call"), b.deliver("done").build(score=0.0)) == []


def test_invalid_arguments_from_unparseable_call_arguments():
    b = TraceBuilder().user("x").call("f", '{"a": 1', result="Error: invalid JSON")
    b.call("f", '{"a": 1}', result="ok")
    t = b.build()
    assert fired(FrictionDetector("invalid_arguments"), t) == []  # recovered at once
    b.call("f", "{oops", result="Error")
    [s] = fired(FrictionDetector("invalid_arguments"), b.build())
    assert s.id == "F2.invalid_arguments"


def test_harness_error_fires_at_event():
    t = TraceBuilder().user("x").event("harness_error", "SyntaxError in middleware/guard.py", step=0).build()
    [s] = fired(HarnessErrorDetector(), t)
    assert s.step == 0 and "SyntaxError" in s.evidence
    assert fired(HarnessErrorDetector(), TraceBuilder().user("x").build()) == []


def test_step_budget_timeout_context_overflow():
    t = TraceBuilder().user("x").call("f", {}, result="ok").end("step_budget").build()
    assert fired(StepBudgetDetector(), t)[0].id == "F3.step_budget_exhausted"
    assert fired(StepBudgetDetector(), TraceBuilder().user("x").deliver("a").build()) == []
    cfg = DiagnosisConfig(step_budget=2)
    t = TraceBuilder().user("x").call("f", {}, result="ok").call("g", {}, result="ok").build()
    assert fired(StepBudgetDetector(), t, cfg)
    t = TraceBuilder().user("x").end("timeout").build()
    assert fired(TerminationDetector("timeout", Termination.timeout, "timeout"), t)
    t = TraceBuilder().user("x").event("context_overflow", "128k tokens").build()
    det = TerminationDetector("context_overflow", Termination.context_overflow, "context_overflow")
    assert fired(det, t)[0].evidence == "128k tokens"


def test_no_delivery():
    t = TraceBuilder().user("x").call("f", {}, result="ok").build()
    [s] = fired(NoDeliveryDetector(), t)
    assert s.step == 1
    assert fired(NoDeliveryDetector(), TraceBuilder().user("x").deliver("y").build()) == []


def _sent_then_silent(score):
    """The synthetic env's message task done by a write: the message sent, then an empty reply (no final answer)."""
    return (TraceBuilder().user("Send Ada Lovelace a message saying exactly: Meeting moved to 10:00.")
            .call("lookup_contact", {"name": "Ada Lovelace"}, result='{"email": "ada@example.org"}')
            .call("send_message", {"to": "ada@example.org", "body": "Meeting moved to 10:00."},
                  result='{"sent": true}').say("").build(score=score))


@pytest.mark.parametrize("score,fires", [(1.0, False), (0.0, True), (None, True)])
def test_no_delivery_on_a_run_done_by_a_write(score, fires):
    """A run that reached the healthy threshold delivered, whatever its last message: its task was a write. A failed
    one, or one with no score to tell, still has no final answer."""
    t = _sent_then_silent(score)
    assert t.final_answer is None
    assert bool(fired(NoDeliveryDetector(), t)) is fires
    lab = label_trajectory(t)
    assert ("F3.no_delivery" in {s.id for s in lab.signals}) is fires


def test_no_delivery_reads_the_configured_healthy_threshold():
    t = _sent_then_silent(0.6)
    assert fired(NoDeliveryDetector(), t, DiagnosisConfig(healthy_threshold=0.5)) == []
    assert fired(NoDeliveryDetector(), t, DiagnosisConfig(healthy_threshold=0.7))


def test_unbacked_claim_fires_on_invented_id_only():
    b = TraceBuilder().user("book me a flight").call("search", {"to": "SEA"}, result="flights: HAT100, HAT200")
    good = b.deliver("I booked HAT100 for you.").build()
    assert fired(UnbackedClaimDetector(), good) == []
    b = TraceBuilder().user("book me a flight").call("search", {"to": "SEA"}, result="flights: HAT100, HAT200")
    bad = b.deliver("I booked HAT999, confirmation ZX81QQ.").build()
    [s] = fired(UnbackedClaimDetector(), bad)
    assert "HAT999" in s.evidence and s.step == 3


def test_unbacked_claim_skips_patches():
    t = TraceBuilder().user("fix").deliver("diff --git a/x b/x\n@@ -1 +1 @@\n-a1234\n+b5678").build()
    assert fired(UnbackedClaimDetector(), t) == []


@pytest.mark.parametrize("score,fires", [(0.0, True), (0.5, True), (1.0, False), (None, False)])
def test_poor_delivery(score, fires):
    t = TraceBuilder().user("x").deliver("answer").build(score=score)
    assert bool(fired(PoorDeliveryDetector(), t)) is fires


def test_poor_delivery_on_failure_only_unscored():
    t = TraceBuilder().user("x").deliver("answer").build(meta={"failure_only": True})
    [s] = fired(PoorDeliveryDetector(), t)
    assert "failure-only" in s.evidence


def test_repaired_arguments_are_not_friction():
    b = TraceBuilder().user("x").call("f", "{'a': 1}", result="ok")
    b.event("middleware_action", "repaired JSON arguments of f", call_id="call_1", action="repair_json")
    b.call("g", "{'b': 2}", result="ok")
    b.event("middleware_action", "repaired JSON arguments of g", call_id="call_2", action="repair_json")
    assert fired(FrictionDetector("invalid_arguments"), b.build()) == []


def test_a_status_contradicting_the_latest_tool_result_is_f1_where_first_claimed():
    b = TraceBuilder().user("where are my orders #W111 and #W123?")
    b.call("get_order_details", {"order_id": "#W111"}, result='{"order_id": "#W111", "status": "pending"}')
    b.call("get_order_details", {"order_id": "#W123"}, result='{"order_id": "#W123", "status": "delivered"}')
    ok = b.build(score=0.0)
    b.say("Order #W111 is pending. Only pending orders can be cancelled; #W123 is delivered.")
    b.say("Your order #W123 is still pending, so I can cancel it.")
    [s] = fired(UnbackedClaimDetector(), b.deliver("Cancelled.").build(score=0.0))
    assert s.step == 6 and "'delivered' in the tools, the reply says 'pending'" in s.evidence
    assert fired(UnbackedClaimDetector(), ok) == []


def test_fast_token_scans_find_what_their_regexes_define():
    """The digit-run, digit and id-field scans (cheaper than the regexes, found digit or literal first) return
    exactly what the regex they replace returns, on random text mixing run letters, ASCII and other digits,
    JSON punctuation and keys (a scan that skipped, merged or split a run would fail here)."""
    import random
    import re

    from evoharness.diagnosis.detectors import (
        ANY_DIGIT,
        DIGIT_RUN,
        DIGIT_TOKEN,
        ID_FIELD,
        has_digit,
        id_like_runs,
        id_like_tokens,
        id_values,
    )

    lazy = {DIGIT_RUN: re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]*?\d[A-Za-z0-9_-]*+"),
            DIGIT_TOKEN: re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]*?[0-9][A-Za-z0-9_-]*+")}
    rnd = random.Random(7)
    pieces = ['a', 'Z', '1', '0', '-', '_', ' ', '.', '$', '\n', '\u0661', '\u00b2', '\u00e9', '"', ':', 'id', '_id',
              '"id": "', 'x_id": "', 'abc', '\\', '"user_id": "u1234"', 'W1', ', ', '2024-05-17', '1234', 'HAT',
              '12th', '1ST', '\ud800', '12345678', '0000', 'X9']
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 16)))
        for scan, reference in lazy.items():
            assert scan.findall(text) == scan.pattern.findall(text) == reference.findall(text), text
        assert has_digit(text) == (ANY_DIGIT.search(text) is not None), text
        assert id_values(text) == ID_FIELD.findall(text), text
        ids = id_like_tokens(dict.fromkeys(DIGIT_TOKEN.pattern.findall(text)))
        assert id_like_runs(text) == ids, text
        if text.isascii():
            assert ids == id_like_tokens(dict.fromkeys(DIGIT_RUN.pattern.findall(text))), text


def test_status_contradiction_skips_its_regex_only_where_it_cannot_match():
    """``EntityStatus.contradicted`` leaves the claim regex out when an ASCII reply holds no known status: the
    same answers as always running it, on random replies (mixed case, Unicode case variants of the status letters:
    the Kelvin sign and the long s match k and s under IGNORECASE, yet ``str.lower`` keeps the long s)."""
    import random

    from evoharness.diagnosis.detectors import EntityStatus, _status_claim

    def reference(es: EntityStatus, reply: str) -> str | None:  # the rule without the shortcut
        low = reply.lower()
        named = [e for e in es.latest if e in low]
        if not named:
            return None
        claims = [(m.group(1).lower(), m.group(2).lower())
                  for m in _status_claim(frozenset(es.vocab)).finditer(reply[:20_000])]
        for entity in named:
            expected = es.latest[entity]
            history = es.earlier.get(entity, ())
            wrong = sorted({status for verb, status in claims if status != expected
                            and not (verb in EntityStatus.PAST and status in history)})
            if wrong and expected not in low:
                return f"{entity} is {expected!r} in the tools, the reply says {wrong[0]!r}"
        return None

    es = EntityStatus()
    es.read('{"reservation_id": "ABC123", "status": "confirmed"}')
    es.read('{"order_id": "W42", "status": "Sent Back"}')
    es.read('[{"status": "cancelled"}, {"status": "pending"}]')  # two values: vocabulary only
    words = ["abc123", "ABC123", "w42", "is", "was", "has been", "status:", "the", "CANCELLED", "cancelled",
             "pending", "Sent back", "confirmed", "\u212aept", "\u017fent back", "pen\u212aing", "ca\u017f", "é", ".",
             "now", "still"]
    rng = random.Random(7)
    checked = fired = 0
    for _ in range(4000):
        reply = " ".join(rng.choice(words) for _ in range(rng.randint(1, 9)))
        got = es.contradicted(reply)
        assert got == reference(es, reply), reply
        checked += 1
        fired += got is not None
    assert es.contradicted("ABC123 is cancelled") is not None and fired > 50  # the rule itself still fires
    assert checked == 4000


def test_swe_agents_windowed_editor_commands_are_progress_and_its_views_are_reads():
    """SWE-agent's classic commands: ``edit N:M`` ... ``end_of_edit`` and ``create FILE`` change files, so a
    re-run after one is no loop even with the same output; ``str_replace_editor view`` only reads, so the same
    view between the re-runs makes no progress."""
    for edit in ("edit 5:7\n    return b{k}\nend_of_edit", "create check{k}.py",
                 "str_replace_editor insert /testbed/src/x.py 5 --new_str 'y{k}'"):
        b = TraceBuilder().user("fix the bug")
        for k in range(3):
            b.call("bash", {"command": "python reproduce.py"}, result="AssertionError")
            b.call("bash", {"command": edit.format(k=k)}, result="File updated.")
        assert fired(RepeatedActionDetector(), b.deliver("patch").build(score=0.0)) == [], edit
    b = TraceBuilder().user("fix the bug")
    for _ in range(3):
        b.call("bash", {"command": "python reproduce.py"}, result="AssertionError")
        b.call("bash", {"command": "str_replace_editor view /testbed/src/x.py"}, result="def f(): ...")
    assert [s.id for s in fired(RepeatedActionDetector(), b.deliver("patch").build(score=0.0))] == \
        ["F3.repeated_action"]


def test_a_long_run_of_new_reads_is_searched_for_loops_in_linear_time():
    """Each action that shows something new is progress for every other action (4585926): marking every action seen
    so far at each new one took quadratic time (20,000 distinct reads: ~12 s, 32,000: 32 s, where 0.5 s before that
    rule). The same answers: an ``ls`` looked back at between new reads is no loop; three reads in a row with nothing
    between them are one, at the third."""
    import time

    b = TraceBuilder().user("fix it")
    for i in range(20_000):
        b.call("bash", {"command": f"cat f{i}.py"}, result=f"content {i}")
        if i % 100 == 0:
            b.call("bash", {"command": "ls"}, result="a b")
    for _ in range(3):
        b.call("bash", {"command": "cat f7.py"}, result="content 7")
    view = TraceView.of(b.deliver("done").build(score=0.0))
    start = time.process_time()
    [s] = RepeatedActionDetector().detect(view, CFG)
    assert time.process_time() - start < 2
    assert s.step == len(view.traj.messages) - 3 and "3x bash" in s.evidence


def test_a_long_retry_that_got_through_is_read_in_linear_time():
    """A repeat is no loop where a later try of the same action got another result (a retry that got through);
    each repeat scanned the rest of the run for one (16,000 identical ``ls`` calls, then another answer: ~7 s).
    The same answer: no loop."""
    import time

    b = TraceBuilder().user("fix it")
    for _ in range(16_000):
        b.call("bash", {"command": "ls"}, result="a b")
    b.call("bash", {"command": "ls"}, result="a b c")
    view = TraceView.of(b.deliver("done").build(score=0.0))
    start = time.process_time()
    assert RepeatedActionDetector().detect(view, CFG) == []
    assert time.process_time() - start < 2
