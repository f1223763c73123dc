"""F4.stalled: a failed conversation that wrote nothing, located where the agent first declined to go on.

A run that changed nothing failed by not doing, and what it did after follows from the first place the agent
would not proceed. Two shapes, the earlier wins:

- a refusal: an assistant message declining the request ("I'm unable to ...", "I cannot ...", "... cannot be
  modified"; not "I'm unable to find ...", a look-up that found nothing; ``detectors.first_refusal``, the place
  ``F4.poor_delivery`` names as a fallback), before the delivery;
- an insistence: the user says it does not have (remember, know, recall) an identifier -- a user id, an e-mail
  address, a zip code, a reservation / order / confirmation number, named in the denying sentence or, for "I don't
  have those", the kinds the agent's last reply asked for (``environment.ID_KINDS``) -- and the agent's very next
  message, with no tool call, asks for that identifier again (it names the kind and ``need`` / ``require`` /
  ``provide`` / ``must`` / ``necessary``), offering no way on without it (``WAY_ON``: no "I can look up your
  reservations", no "you don't need it"), at the latest in the reply that delivers. Not where the simulated user's
  instruction (``meta.user_instruction``) gives the identifier: the user withheld what it has, and insisting is the
  agent's part (``E.user_withheld_id`` reads that side).

Unlike ``F4.poor_delivery`` this is a located signal: a later located one (a simulated user leaving, ``E.user_quit``;
one saying it lacks an id at a later turn, ``E.user_withheld_id``) does not override the agent's earlier stall.
Failed delivered runs only (as ``F4.poor_delivery``): a reward-1 run's label cannot change. Single-agent
conversations only (a user turn, no named speakers).
"""

from __future__ import annotations

import re

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import _failed_delivery, answer_step, first_refusal, quote, text_edit_steps
from evoharness.diagnosis.environment import (
    DENIAL,
    ID_KINDS,
    PRONOUN,
    SENTENCE_SPLIT,
    TAIL_CHARS,
    _given_ids,
    _may_deny,
    _sentence_at,
    id_named,
)
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.models import FailureClass, Signal

F4 = FailureClass.F4
# the agent's reply holds the identifier as a condition to go on: "I need the reservation ID", "which requires ..."
NEED = re.compile(r"\bneed|\brequire|\bprovide\b|\bmust\b|\bnecessary\b")
# ... unless it offers a way on without it: the agent finding the booking itself ("I can look up your reservations
# from your user id", "let me search ...") or saying the id is not needed. Telling the user where to find it ("you can
# find it in your confirmation e-mail") is no way on: the agent still waits for the id.
WAY_ON = re.compile(r"\b(?:i|we)(?:\s+(?:can|could|will|would|may)|['’]ll)\s+(?:also\s+|still\s+|try\s+to\s+)?"
                    r"(?:look|find|search|retrieve|locate|pull)\b|\blet me\s+(?:look|find|search|retrieve|locate)\b"
                    r"|\b(?:don['’]t|do not|no)\s+need\b|\bnot (?:necessary|required)\b")


class StalledDetector:
    id = "F4.stalled"
    failure_class = F4

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if not _failed_delivery(view, cfg) or not _no_write_conversation(view):
            return []  # most failed runs wrote: the cheap tests first
        # before the delivery (a closing pleasantry after it declines nothing: not ``_before_closing``, whose outcome
        # regex costs a compile where nothing else needs it)
        delivered = answer_step(view)
        declined = first_refusal(view, delivered)
        # an insistence up to the delivery (the last reply may be the one asking again), none after it
        insisted = _insistence(view, declined if declined is not None else delivered + 1)
        if insisted is not None:
            step, kind, denied = insisted
            return [Signal(id=self.id, failure_class=F4, step=step,
                           evidence=f"no write; the agent asked again for the {kind} the user said it lacks "
                                    f"(step {denied}): {quote(view.texts[step], 150)}")]
        if declined is not None:
            return [Signal(id=self.id, failure_class=F4, step=declined,
                           evidence=f"no write, and the agent first declined here: {quote(view.texts[declined], 150)}")]
        return []


def _no_write_conversation(view: TraceView) -> bool:
    """A single-agent conversation (a user turn, no named speakers) with no write action."""
    msgs = view.traj.messages
    return bool(view.user_steps and view.assistant_steps) and not msgs[view.assistant_steps[0]].get("name") \
        and not write_calls(view) and not text_edit_steps(view)


def _insistence(view: TraceView, before: int) -> tuple[int, str, int] | None:
    """``(reply, kind, denial)``: the first agent reply before step ``before`` that asks again for an identifier the
    user's message just before it said it lacks (see the module docstring); None if there is none."""
    msgs, texts, roles = view.traj.messages, view.texts, view.roles
    instruction = view.traj.meta.get("user_instruction")
    for i in view.user_steps:
        j = i + 1
        if j >= before:
            return None
        if roles[j] != "assistant" or msgs[j].get("tool_calls") or not texts[j].strip() or not _may_deny(texts[i]):
            continue
        low = view.lowered(i)
        denied: list[str] = []
        for m in DENIAL.finditer(low):
            sentence = _sentence_at(low, m.start(), m.end())
            kinds = [k for k, named, _ in ID_KINDS if named.search(sentence)]
            if not kinds and PRONOUN.search(sentence):
                asked = next((texts[k][-TAIL_CHARS:].lower() for k in range(i - 1, -1, -1)
                              if roles[k] == "assistant" and texts[k]), "")  # its question is at its end
                kinds = [k for k, named, _ in ID_KINDS if named.search(asked)]
            denied += kinds
        if not denied:
            continue
        reply = view.lowered(j)
        again = [k for k, named, _ in ID_KINDS if k in denied and named.search(reply)]
        if not again or not NEED.search(reply) or WAY_ON.search(reply) or _asks_another_key(view, reply, denied, j):
            continue
        # the instruction's ids only now (its regexes scan the whole instruction: cached, but not free)
        given = _given_ids(instruction) if isinstance(instruction, str) and instruction else {}
        if not any(k in given for k in again):
            return j, id_named(again[0], reply), i  # as the reply names it: an order number is no reservation id
    return None


# a sentence that asks for another key in place of the one the user lacks: an ask ("provide", "share", "give me",
# "tell me") and a replacement ("instead", "alternatively", "otherwise", "if you don't ..."): "If you don't remember
# your email, please provide your name and zip code instead" -- not "please provide it along with your user ID" (both
# wanted) nor "if you don't have it, you might find it in your email" (where to look)
ASK = re.compile(r"\bprovide\b|\bshare\b|\bgive me\b|\btell me\b")
INSTEAD = re.compile(r"\binstead\b|\balternatively\b|\botherwise\b|\bif you (?:don['’]t|do not|can['’]t|cannot)\b")


def _asks_another_key(view: TraceView, reply: str, denied: list[str], step: int) -> bool:
    """The reply asks, in place of the identifier the user lacks, for one of another kind that the user has not given
    yet -- another key to find the user or the order by (tau-bench retail authenticates by e-mail *or* by name and zip
    code: "If you don't remember your email, please provide your name and zip code instead"; ``ASK`` and ``INSTEAD`` in
    one sentence): a way on without the one the user lacks. Asking for it beside the lacking one ("provide it along
    with your user ID"), for one the user already gave, or naming another kind only as where to look ("check your
    email for it") offers nothing new."""
    others = [(named, value) for kind, named, value in ID_KINDS if kind not in denied and named.search(reply)]
    if not others:
        return False
    asked = [sentence for sentence in SENTENCE_SPLIT.split(reply)
             if ASK.search(sentence) and INSTEAD.search(sentence)]
    others = [value for named, value in others if any(named.search(sentence) for sentence in asked)]
    if not others:
        return False
    said = [view.texts[i] for i in view.user_steps if i < step]
    return any(not any(value.search(t) for t in said) for value in others)
