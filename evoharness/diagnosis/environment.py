"""Class E from the conversation: the simulated user, or the task itself, broke the run -- not the agent.

Routed to neither lever (``routing``: E -> none). Each rule fires at most once, at the step named, and
is meant to be specific rather than complete: on the public tau-bench airline runs, unguarded, they fire on
8 of the 116 failed ones and on one reward-1 run (``E.user_withheld_id``: the user withheld its id, the task
expected no change anyway; tests/diagnosis/test_environment_claims.py runs them unguarded on those).

- ``E.user_simulator_error``: the benchmark's own evaluator says the simulated user broke
  (tau2's ``termination_reason: user_error``, imported as ``meta.environment_failure``); at the last
  user message.
- ``E.infra_error``: the run ended on an infrastructure fault its importer read from the framework's own exit status
  (``traces.endings``: an ``infra_error`` event, e.g. mini-swe-agent's ``RateLimitError``); at the event.
- ``E.user_quit``: the simulated user ends the conversation (``###STOP###``, ``###TRANSFER###``,
  ``###OUT-OF-SCOPE###``) before the agent could act: the agent has made no state-changing call yet, its
  last reply asked the user for something (a question, "please provide / confirm", "let me know") that
  is not a closing offer ("anything else", "feel free to reach out", ...), and the user's last message
  answers nothing (no yes / no / go ahead / please, no digit). Or: the user says yes to a change the agent's
  last reply proposed and asked it to confirm (``book``, ``cancel``, ``issue``, ``refund``, ...; not a
  transfer) and ends the conversation in the same message, so the agent never gets a turn to make it. At the
  user's message.
- ``E.user_off_script``: where the simulated user's instruction is in the trace (``meta.user_instruction``:
  tau-bench's ``info.task.instruction``, tau2's user scenario), the user states an identifier (letters
  and digits, or a long number: an id, an e-mail's local part, a card number) that neither the
  instruction nor anything the user or the agent said before holds (the user never sees the agent's tool results):
  the simulator invented information that conflicts with its own task. At the user's message. A token of two
  characters ("5G" on a phone's status bar, "4K") names a kind or a size, no record: an identifier here only where a
  place's noun puts it ("seat 3A", "gate B2": a label the user may make up). A result of the
  user's own call (``user_tool_result_steps``: tau2 telecom's customer reading its phone) is what the user saw, not what
  it said: never off script, and the user may repeat what it holds.
- ``E.user_withheld_id``: where the instruction is in the trace, the simulated user says it does not have
  (or remember, know, recall) an identifier its instruction gives -- a user id, an e-mail address, a zip code,
  a reservation / order / confirmation number -- in a message that does not state it either (the kind named
  in the denial, or, for "I don't have that / those / either", the kinds the agent's last reply asked for),
  the instruction does not say the user forgot it, and after the denial no tool is called at all: the agent
  was left with nothing to look anything up by. At the user's message.
- ``E.unsatisfiable_task``: a tool answered, in its first ``MISSING_CHARS`` characters, that an entity
  does not exist (``not found``, ``does not exist``, ``no such``, ``unknown``) and the user names that
  entity again afterwards (insists on what the environment does not have). At the tool result.

The last four skip Healthy runs in ``detect`` (a Healthy label cannot change; the checks are spent on
failures); ``find`` is the rule on any run.
"""

from __future__ import annotations

import re
from functools import lru_cache

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.consent import affirmed, may_affirm
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import (
    DIGIT_RUN,
    _recovered,
    changes_state,
    friction_occurrences,
    has_digit,
    id_like_runs,
    id_like_tokens,
    quote,
)
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.traces.patterns import user_tool_result_steps

E = FailureClass.E
STOP_MARK = re.compile(r"###(?:STOP|TRANSFER|OUT-OF-SCOPE)###")
ASKS = re.compile(r"\?|\bplease (?:provide|confirm|share|specify|let me know)|\blet me know\b", re.IGNORECASE)
CLOSING = re.compile(r"anything else|further (?:assistance|questions|help)|feel free"
                     r"|have a (?:great|good|wonderful|nice)|safe travels|take care|reach out|i'll be here"
                     r"|i will be here|whenever you", re.IGNORECASE)
ANSWERS = re.compile(r"\b(?:yes|yeah|yep|sure|ok|okay|please|go ahead|proceed|confirm|no|don't|do not)\b|\d",
                     re.IGNORECASE)
# the agent's last reply asks for a yes to a change it proposes (not a transfer, not a closing offer)
# (on lower-cased text: case-blind patterns are slow)
CONFIRM_ASK = re.compile(r"\bconfirm\b|\bwould you like (?:me|us) to\b|\bshall i\b|\bdo you want (?:me|us) to\b"
                         r"|\bproceed\b")
PROPOSED_CHANGE = re.compile(r"\b(?:book|cancel|chang|modif|updat|upgrad|downgrad|add|remov|issu|send|sent|process"
                             r"|refund|exchang|return|purchas|appl|compensat)")
TRANSFER = re.compile(r"\btransfer|\bhuman agent")
MISSING = ("not found", "does not exist", "doesn't exist", "no such", "unknown")
MISSING_CHARS = 300  # "not found" answers are short; a long result is data, not a refusal
TAIL_CHARS = 400  # the end of the agent's last reply, where its question is


class UserSimulatorErrorDetector:
    id = "E.user_simulator_error"
    failure_class = E

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if view.traj.meta.get("environment_failure") is not True:
            return []
        msgs = view.traj.messages
        step = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "user"), view.final_step)
        reason = view.traj.meta.get("termination_reason") or "environment_failure"
        return [Signal(id=self.id, failure_class=E, step=step,
                       evidence=f"the benchmark ended the run as a user-simulator error ({reason}); last user "
                                f"message: {quote(msgs[step].get('content') if msgs else '', 120)}")]


class InfraErrorDetector:
    """The infrastructure ended the run (``traces.endings``: an importer's ``infra_error`` event, e.g. mini-swe-agent's
    exit status ``RateLimitError``, SWE-agent's ``exit_api`` -- also after it auto-submitted what the run had left,
    ``submitted (exit_api)``): at the event."""

    id = "E.infra_error"
    failure_class = E
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if _healthy(view, cfg):
            return []
        for e in t.events:
            if e.type == "infra_error":
                return [Signal(id=self.id, failure_class=E, step=min(e.step, view.final_step),
                               evidence=f"the infrastructure ended the run: {quote(e.detail or e.type, 160)}")]
        return []


class UserQuitDetector:
    id = "E.user_quit"
    failure_class = E
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        msgs, texts = view.traj.messages, view.texts
        stop = next((i for i in view.user_steps if "###" in texts[i] and STOP_MARK.search(texts[i])), None)
        if stop is None:
            return []
        said = STOP_MARK.sub(" ", msgs[stop]["content"])
        if any(c.step < stop and changes_state(c) for c in view.calls):
            return self._yes_and_gone(view, stop)  # the agent had acted
        if ANSWERS.search(said):
            return self._yes_and_gone(view, stop)
        asked = _last_reply(msgs, stop)
        if asked and _asks(asked) and not _closing_offer(asked):
            return [Signal(id=self.id, failure_class=E, step=stop,
                           evidence=f"the user ended the conversation before the agent acted: "
                                    f"{quote(msgs[stop]['content'], 100)} — unanswered: {quote(asked, 100)}")]
        return []

    def _yes_and_gone(self, view: TraceView, stop: int) -> list[Signal]:
        """The user confirmed the change the agent's last reply proposed, and left in the same message: a yes as the
        confirmation rule reads one (``consent.affirmed``: "Absolutely.", or a request to do what was asked)."""
        if not may_affirm(view.texts[stop][:2000]) or any(c.step > stop for c in view.calls):
            return []  # (``may_affirm``: a cheap test before ``affirmed``, no word a yes holds)
        asked = _last_reply(view.traj.messages, stop).lower()
        if not asked or not CONFIRM_ASK.search(asked) or not PROPOSED_CHANGE.search(asked) or TRANSFER.search(asked):
            return []
        if not affirmed(view, stop):
            return []
        return [Signal(id=self.id, failure_class=E, step=stop,
                       evidence=f"the user confirmed and ended the conversation in one message, so the agent never "
                                f"got a turn to act: {quote(view.texts[stop], 100)} — proposed: {quote(asked, 100)}")]


# every match of CLOSING is one of these, case-blind (the regex is literals only)
CLOSING_WORDS = ("anything else", "further assistance", "further questions", "further help", "feel free",
                 "have a great", "have a good", "have a wonderful", "have a nice", "safe travels", "take care",
                 "reach out", "i'll be here", "i will be here", "whenever you")


def _asks(text: str) -> bool:
    """``ASKS.search(text) is not None``: its first alternative is a "?" (a C search finds one), and in ASCII text the
    others need "please " or "let me know" (a case-blind regex tries every character: ~37 microseconds a reply)."""
    if "?" in text:
        return True
    if text.isascii():
        low = text.lower()
        if "please " not in low and "let me know" not in low:
            return False
    return ASKS.search(text) is not None


def _closing_offer(text: str) -> bool:
    """``CLOSING.search(text) is not None``, the regex (~68 microseconds a reply) run only on ASCII text that holds one
    of its literals lower-cased, or on other text (a case-blind regex folds other characters onto ASCII letters)."""
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in CLOSING_WORDS):
            return False
    return CLOSING.search(text) is not None


def _last_reply(msgs: list[dict], stop: int) -> str:
    return next((m["content"][-TAIL_CHARS:] for m in reversed(msgs[:stop]) if m.get("role") == "assistant"
                 and isinstance(m.get("content"), str) and m["content"].strip()), "")


class UserOffScriptDetector:
    id = "E.user_off_script"
    failure_class = E
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        instruction = view.traj.meta.get("user_instruction")
        if not isinstance(instruction, str) or not instruction:
            return []
        told = instruction.lower()
        texts, roles = view.texts, view.roles
        own_results = user_tool_result_steps(view.traj)
        for i in view.user_steps:
            content = texts[i]
            if i in own_results:
                continue  # the user's own tool result: what it saw (a later message may repeat it)
            if content.isascii():
                ids = id_like_runs(content)  # the same as below: \d is [0-9] in ASCII text
            elif has_digit(content):
                ids = id_like_tokens(dict.fromkeys(DIGIT_RUN.findall(content)))
            else:
                continue
            # (a token of two characters -- "5G", "4K" -- is a kind or a size, no record's id; one a place's name puts
            # -- "seat 3A", "gate B2" -- is a label the user may make up: ``_place_label``)
            candidates = [t for t in ids if (len(t) > 2 or _place_label(content, t)) and t.lower() not in told]
            if not candidates:
                continue  # the usual case: the ids the user states are in its instruction
            # what the user saw: its words and the agent's replies before this message, latest first (a token holds
            # no newline, so this is searching them joined by newlines)
            said = [j for j in range(i - 1, -1, -1) if roles[j] == "user" or roles[j] == "assistant"]
            invented = [t for t in candidates if not any(t.lower() in view.lowered(j) for j in said)]
            invented = [t for t in invented if not _got_past(view, t.lower())]
            if invented:
                return [Signal(id=self.id, failure_class=E, step=i,
                               evidence=f"the simulated user states {', '.join(invented[:3])}, in neither "
                                        f"its instruction nor the conversation: {quote(content, 120)}")]
        return []


# the places whose label a person states: a seat, a gate, a room, a cabin ... ("seat 3A", "gate B2", "seats 3A and 3B",
# "room no. 4C"): the English nouns of places that are numbered, not of kinds or sizes (a phone's "5G", a screen's "4K")
_PLACES = ("seat|gate|row|room|cabin|berth|suite|unit|apartment|apt|flat|locker|terminal|platform|desk|bay|stall|"
           "slot|booth|table|section|zone|ward|bed|pod|dock|lane|spot|space")


def _place_label(content: str, token: str) -> bool:
    """A two-character token of ``content`` is a place's label: right after a place's noun (``_PLACES``), its number
    sign or a list of labels before it ("seats 3A and 3B"). Asked only of the few such tokens a user message holds that
    its instruction does not."""
    return re.search(rf"\b(?:{_PLACES})s?(?:[^\S\n]+(?:number|no\.?|#))?[^\S\n]*[#:]?[^\S\n]*"
                     rf"(?:[a-z0-9]{{1,4}}(?:[^\S\n]*,[^\S\n]*|[^\S\n]+(?:and|or|&)[^\S\n]+))*"
                     rf"{re.escape(token.lower())}\b", content.lower()) is not None


def _got_past(view: TraceView, token: str) -> bool:
    """The run got past an identifier the user made up: every call that used it failed (an ``Error:`` result, a
    friction occurrence) and the agent got past each failure (``detectors._recovered``: the same look-up, or one by
    another key, went through later) -- a mistyped or made-up e-mail looked up, then the user found by name and zip
    (tau-bench retail). The slip did not shape the run; an id the run went on with, or never tried, still counts."""
    used = [c for c in view.calls if token in c.canonical.lower()]
    if not used:
        return False
    occ = friction_occurrences(view)
    friction = {s for items in occ.values() for s, _ in items}
    steps = [view.results.get(c.id, (-1, ""))[0] for c in used]
    return all(s in friction and _recovered(view, occ, s) for s in steps)


# an identifier kind the user may be asked for: how a message names it, and what the instruction's value of it
# looks like (a user id is an underscore-joined token with digits, as tau-bench's ``mia_li_3668``)
ID_KINDS = (  # how a message names the kind: patterns on lower-cased text (case-blind patterns are slow)
    ("user id", re.compile(r"\buser\s?(?:id|name)\b"), re.compile(r"\b[a-z]+(?:_[a-z0-9]+)*_\d+\b")),
    ("email", re.compile(r"\be-?mail\b"), re.compile(r"[\w.+-]+@[\w-]+\.[a-z]{2,}", re.I)),
    ("zip code", re.compile(r"\b(?:zip|postal)\b"), re.compile(r"\b\d{5}\b")),
    ("reservation id", re.compile(r"\b(?:reservation|order|confirmation|booking)\s?(?:id|number|code|#)"),
     re.compile(r"\b(?:[Rr]eservation|[Oo]rder|[Cc]onfirmation|[Bb]ooking)\b[^.]{0,30}?"
                r"(#?[A-Z0-9]*\d[A-Z0-9]*|[A-Z]{6})\b")),
)
_ID_WORDS = re.compile(r"^(reservation|order|confirmation|booking)\s?")


def id_named(kind: str, text: str) -> str:
    """How ``text`` (lower-cased) names an identifier of ``kind``, for evidence: for the 'reservation id' kind the
    words it uses ("order number", "confirmation code": tau retail's order is no reservation), else the kind."""
    named = next(n for k, n, _ in ID_KINDS if k == kind)
    m = named.search(text) if kind == "reservation id" else None
    return _ID_WORDS.sub(r"\1 ", m.group(0)) if m else kind


# "don't / didn't / can't / do not / cannot [really] have / remember / recall / know / find", "not sure about": every
# branch starts with "n", which the regex engine skips to (a pattern opening with \b tries every position: ~30x slower)
DENIAL = re.compile(r"n(?:['’]t|ot)\s+(?:\w+\s+)?(?:have|remember|recall|know|find)\b|not sure (?:about|of|what)\b")
# a denial that names no kind: "I don't have that information", "I don't have those with me"
PRONOUN = re.compile(r"\b(?:that|those|them|it|either|neither|this)\b")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n")  # the instruction's sentences (once per instruction)
FORGOT = re.compile(r"\b(?:remember|recall|forg[eo]t|know)\b")


class UserWithheldIdDetector:
    id = "E.user_withheld_id"
    failure_class = E
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        instruction = view.traj.meta.get("user_instruction")
        if not isinstance(instruction, str) or not instruction:
            return []
        texts, roles = view.texts, view.roles
        last_call = view.calls[-1].step if view.calls else -1
        # the user's messages after the agent's last tool call, where one denies an identifier (cheap tests first)
        steps = []
        for i in reversed(view.user_steps):
            if i < last_call:
                break
            if _may_deny(texts[i]):
                steps.append(i)
        steps.reverse()
        if not steps:
            return []
        given = _given_ids(instruction)
        if not given:
            return []
        for i in steps:
            content, low = texts[i], view.lowered(i)
            for m in DENIAL.finditer(low):
                sentence = _sentence_at(low, m.start(), m.end())
                kinds, named_in = [k for k, named, _ in ID_KINDS if named.search(sentence)], sentence
                if not kinds and PRONOUN.search(sentence):
                    asked = next((texts[j][-TAIL_CHARS:].lower() for j in range(i - 1, -1, -1)
                                  if roles[j] == "assistant" and texts[j]), "")  # its question is at its end
                    kinds, named_in = [k for k, named, _ in ID_KINDS if named.search(asked)], asked
                withheld = [k for k in kinds if k in given and not any(v.lower() in low for v in given[k])]
                if withheld:
                    return [Signal(id=self.id, failure_class=E, step=i,
                                   evidence=f"the simulated user says it lacks its {id_named(withheld[0], named_in)}, "
                                            f"which its "
                                            f"instruction gives ({given[withheld[0]][0]}), and nothing is looked up "
                                            f"after: {quote(content, 120)}")]
        return []


def _sentence_at(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around ``text[start:end]``: from the last ". " / "! " / "? " / newline before it to the
    next one after it."""
    left = max(text.rfind(". ", 0, start), text.rfind("! ", 0, start), text.rfind("? ", 0, start),
               text.rfind("\n", 0, start))
    rights = [r for r in (text.find(". ", end), text.find("! ", end), text.find("? ", end), text.find("\n", end))
              if r != -1]
    return text[left + 1:min(rights) if rights else len(text)]


def _may_deny(text: str) -> bool:
    return "n't" in text or "n’t" in text or "not " in text or "annot" in text


@lru_cache(maxsize=512)
def _given_ids(instruction: str) -> dict[str, list[str]]:
    """Kind -> the values the instruction gives of it, leaving out a kind the instruction says is forgotten
    ("you do not remember your email")."""
    out: dict[str, list[str]] = {}
    sentences = SENTENCE_SPLIT.split(instruction.lower())
    for kind, named, value in ID_KINDS:
        if any(named.search(s) and FORGOT.search(s) for s in sentences):
            continue
        found = [m.group(m.lastindex or 0) for m in value.finditer(instruction)]
        if found:
            out[kind] = found
    return out


def _healthy(view: TraceView, cfg: DiagnosisConfig) -> bool:
    return view.traj.score is not None and view.traj.score >= cfg.healthy_threshold


def _says_missing(low: str) -> bool:
    """Any of ``MISSING`` in ``low`` (written out: a generator over the five costs more than the searches)."""
    return "not found" in low or "does not exist" in low or "doesn't exist" in low or "no such" in low or \
        "unknown" in low


class UnsatisfiableTaskDetector:
    id = "E.unsatisfiable_task"
    failure_class = E
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        texts, roles = view.texts, view.roles
        # no tool result says something is missing (the usual case), told by one test of their heads joined: a phrase
        # of MISSING holds no newline, so it is in the joined text only where it is in one head
        if not _says_missing("\n".join([texts[i][:MISSING_CHARS] for i in view.tool_steps]).lower()):
            return []
        # the first tool result that says something is missing: no user message before it can insist
        start = next((i for i in view.tool_steps if texts[i] and _says_missing(texts[i][:MISSING_CHARS].lower())), None)
        if start is None:
            return []
        missing: dict[str, tuple[int, str]] = {}
        for i in range(start, len(texts)):
            content, role = texts[i], roles[i]
            if role == "tool" and content and _says_missing(content[:MISSING_CHARS].lower()):
                for tok in id_like_tokens(DIGIT_RUN.findall(content[:MISSING_CHARS])):
                    missing.setdefault(tok.lower(), (i, content))
            elif role == "user" and missing:
                low = content.lower()
                hit = next((tok for tok in missing if tok in low), None)
                if hit:
                    step, said = missing[hit]
                    return [Signal(id=self.id, failure_class=E, step=step,
                                   evidence=f"the tool says {hit} does not exist ({quote(said, 80)}) and the user "
                                            f"insists at step {i}: {quote(content, 100)}")]
        return []
