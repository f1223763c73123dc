"""A user who first refuses a write ("No, don't do that.") and later agrees: the confirmation rule's violation, where
there is one, lies at the write that lacked the yes, never at the refusal; and the first write's proposal is the reply
that put the action to the user, not the agent's acknowledgement of the refusal (issue 13)."""

from __future__ import annotations

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

POLICY = ("# Airline agent policy\nYou must authenticate the user identity by locating their user id via email. "
          "Before taking any actions that update the booking database, you must list the action details and obtain "
          "explicit user confirmation (yes) to proceed.")
PROPOSAL = "Reservation ZFA04Y: cancel it with a refund to your card. Shall I proceed?"


def _label(*turns: tuple[str, str]):
    """A failed run: the request, the user looked up, the proposal (step 4), ``turns`` (("say" | "user", text)),
    then the cancellation and the answer."""
    b = TraceBuilder("t").system(POLICY).user("Cancel reservation ZFA04Y please, my user id is bob_1")
    b.call("get_user_details", {"user_id": "bob_1"}, result='{"user_id": "bob_1", "reservations": ["ZFA04Y"]}')
    b.say(PROPOSAL)
    for kind, text in turns:
        getattr(b, kind)(text)
    write = b.step
    b.call("cancel_reservation", {"reservation_id": "ZFA04Y"}, result='{"status": "cancelled"}')
    return Labeller().label(b.deliver("Done.").build(score=0.0)), write


def test_a_write_right_after_the_refusal_is_the_violation():
    lab, write = _label(("user", "No, don't do that."))
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.confirmation", write)]
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.policy_violation", write)


def test_a_write_after_the_refusal_and_another_question_is_the_violation_at_the_write():
    lab, write = _label(("user", "No, don't do that."), ("say", "OK. Anything else?"), ("user", "What's the weather?"))
    assert [(v.rule, v.step) for v in lab.violations] == [("policy.confirmation", write)]
    assert lab.first_signal.step == write


def test_a_yes_after_the_refusal_confirms_the_write():
    lab, _ = _label(("user", "No, don't do that."), ("say", "Understood, I won't cancel ZFA04Y. Anything else?"),
                    ("user", "Actually, yes, go ahead and cancel it."))
    assert lab.violations == []


def test_the_refused_proposal_accepted_later_is_where_the_write_was_proposed():
    """The reply before the user's yes only acknowledged the refusal ("OK.", "Understood, I won't cancel it"): the
    yes takes the refusal back and accepts the proposal at step 4, which carries the action and its details. It was
    located at the acknowledgement, a reply that proposes nothing."""
    for ack, yes in (("OK.", "Hmm, on second thought, yes, please cancel it."),
                     ("Understood, I won't cancel ZFA04Y. Anything else?", "Actually, yes, go ahead and cancel it.")):
        lab, _ = _label(("user", "No, don't do that."), ("say", ack), ("user", yes))
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4), ack
        assert "confirmed by the user at step 7" in lab.first_signal.evidence


def test_a_proposal_asked_again_after_the_refusal_is_the_one_confirmed():
    lab, _ = _label(("user", "No, don't do that yet. What is the refund amount?"),
                    ("say", "The refund for ZFA04Y is $300. Shall I cancel it now?"), ("user", "Yes."))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 6)
