"""Class E from the conversation: the simulated user, or the task itself, broke the run -- not the agent.

Routed to neither lever (``routing``: E -> none). Each rule fires at most once, at the step named, and
is meant to be specific rather than complete: on the public tau-bench airline runs none fires on a
reward-1 run (tests/diagnosis/test_environment_claims.py runs them unguarded on those), and they fire
on 3 of the 116 failed ones.

- ``E.user_simulator_error``: the benchmark's own evaluator says the simulated user broke
  (tau2's ``termination_reason: user_error``, imported as ``meta.environment_failure``); at the last
  user message.
- ``E.user_quit``: the simulated user ends the conversation (``###STOP###``, ``###TRANSFER###``,
  ``###OUT-OF-SCOPE###``) before the agent could act: the agent has made no state-changing call yet, its
  last reply asked the user for something (a question, "please provide / confirm", "let me know") that
  is not a closing offer ("anything else", "feel free to reach out", ...), and the user's last message
  answers nothing (no yes / no / go ahead / please, no digit). At the user's message.
- ``E.user_off_script``: where the simulated user's instruction is in the trace (``meta.user_instruction``:
  tau-bench's ``info.task.instruction``, tau2's user scenario), the user states an identifier (letters
  and digits, or a long number: an id, an e-mail's local part, a card number) that neither the
  instruction nor anything the user or the agent said before holds (the user never sees tool results):
  the simulator invented information that conflicts with its own task. At the user's message.
- ``E.unsatisfiable_task``: a tool answered, in its first ``MISSING_CHARS`` characters, that an entity
  does not exist (``not found``, ``does not exist``, ``no such``, ``unknown``) and the user names that
  entity again afterwards (insists on what the environment does not have). At the tool result.

The last three skip Healthy runs in ``detect`` (a Healthy label cannot change; the checks are spent on
failures); ``find`` is the rule on any run.
"""

from __future__ import annotations

import re

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import (
    DIGIT_RUN,
    changes_state,
    has_digit,
    id_like_runs,
    id_like_tokens,
    quote,
)
from evoharness.diagnosis.models import FailureClass, Signal

E = FailureClass.E
STOP_MARK = re.compile(r"###(?:STOP|TRANSFER|OUT-OF-SCOPE)###")
ASKS = re.compile(r"\?|\bplease (?:provide|confirm|share|specify|let me know)|\blet me know\b", re.IGNORECASE)
CLOSING = re.compile(r"anything else|further (?:assistance|questions|help)|feel free"
                     r"|have a (?:great|good|wonderful|nice)|safe travels|take care|reach out|i'll be here"
                     r"|i will be here|whenever you", re.IGNORECASE)
ANSWERS = re.compile(r"\b(?:yes|yeah|yep|sure|ok|okay|please|go ahead|proceed|confirm|no|don't|do not)\b|\d",
                     re.IGNORECASE)
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


class UserQuitDetector:
    id = "E.user_quit"
    failure_class = E

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        msgs, texts = view.traj.messages, view.texts
        stop = next((i for i in view.user_steps if "###" in texts[i] and STOP_MARK.search(texts[i])), None)
        if stop is None:
            return []
        if any(c.step < stop and changes_state(c) for c in view.calls):
            return []  # the agent had acted
        said = STOP_MARK.sub(" ", msgs[stop]["content"])
        if ANSWERS.search(said):
            return []
        asked = next((m["content"][-TAIL_CHARS:] for m in reversed(msgs[:stop]) if m.get("role") == "assistant"
                      and isinstance(m.get("content"), str) and m["content"].strip()), "")
        if asked and ASKS.search(asked) and not CLOSING.search(asked):
            return [Signal(id=self.id, failure_class=E, step=stop,
                           evidence=f"the user ended the conversation before the agent acted: "
                                    f"{quote(msgs[stop]['content'], 100)} — unanswered: {quote(asked, 100)}")]
        return []


class UserOffScriptDetector:
    id = "E.user_off_script"
    failure_class = E

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        instruction = view.traj.meta.get("user_instruction")
        if not isinstance(instruction, str) or not instruction:
            return []
        told = instruction.lower()
        texts, roles = view.texts, view.roles
        for i in view.user_steps:
            content = texts[i]
            if content.isascii():
                ids = id_like_runs(content)  # the same as below: \d is [0-9] in ASCII text
            elif has_digit(content):
                ids = id_like_tokens(dict.fromkeys(DIGIT_RUN.findall(content)))
            else:
                continue
            candidates = [t for t in ids if t.lower() not in told]
            if not candidates:
                continue  # the usual case: the ids the user states are in its instruction
            # what the user saw: its words and the agent's replies before this message, latest first (a token holds
            # no newline, so this is searching them joined by newlines)
            said = [j for j in range(i - 1, -1, -1) if roles[j] == "user" or roles[j] == "assistant"]
            invented = [t for t in candidates if not any(t.lower() in view.lowered(j) for j in said)]
            if invented:
                return [Signal(id=self.id, failure_class=E, step=i,
                               evidence=f"the simulated user states {', '.join(invented[:3])}, in neither "
                                        f"its instruction nor the conversation: {quote(content, 120)}")]
        return []


def _healthy(view: TraceView, cfg: DiagnosisConfig) -> bool:
    return view.traj.score is not None and view.traj.score >= cfg.healthy_threshold


def _says_missing(low: str) -> bool:
    """Any of ``MISSING`` in ``low`` (written out: a generator over the five costs more than the searches)."""
    return "not found" in low or "does not exist" in low or "doesn't exist" in low or "no such" in low or \
        "unknown" in low


class UnsatisfiableTaskDetector:
    id = "E.unsatisfiable_task"
    failure_class = E

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        return [] if _healthy(view, cfg) else self.find(view)

    def find(self, view: TraceView) -> list[Signal]:
        """The rule, on any run (``detect`` leaves Healthy runs alone: their label cannot change)."""
        texts, roles = view.texts, view.roles
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
