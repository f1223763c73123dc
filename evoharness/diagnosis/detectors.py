"""The signal catalogue: one small detector per signal, each with its threshold in config.

A detector returns the signals it fires for one trajectory (usually zero or one),
each at the step where it *became* consequential. Steps index ``Trajectory.messages``.

F2 friction must be consequential: a friction kind fires once it occurs
``friction_min`` times, or on the first occurrence the agent did not recover from
(its next assistant turn also hit friction, or there was no next turn). One
rejection fixed on the next step does not fire.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.traces.models import Termination

F1, F2, F3, F4 = FailureClass.F1, FailureClass.F2, FailureClass.F3, FailureClass.F4
FRICTION_EVENTS = ("blocked_call", "unknown_tool", "invalid_arguments", "format_rejected", "tool_infra_error")


def quote(text: object, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class Detector(Protocol):
    """``id`` is the catalogue id; ``detect`` never raises for odd but valid trajectories."""

    id: str
    failure_class: FailureClass

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]: ...


def friction_occurrences(view: TraceView) -> dict[str, list[tuple[int, str]]]:
    """Friction occurrences by kind: (step, evidence), from events and unparseable call arguments.

    A call whose arguments did not parse counts as ``invalid_arguments`` unless the harness
    already reported it (an event naming its ``call_id``: rejected, or repaired by middleware).
    """
    occ: dict[str, list[tuple[int, str]]] = defaultdict(list)
    handled: set[str] = set()
    for e in view.traj.events:
        if e.data.get("call_id"):
            handled.add(str(e.data["call_id"]))
        if e.type in FRICTION_EVENTS:
            occ[e.type].append((e.step, e.detail or e.type))
    seen = {s for s, _ in occ.get("invalid_arguments", ())}
    for c in view.calls:
        if not c.parsed_ok and c.step not in seen and c.id not in handled:
            occ["invalid_arguments"].append((c.step, f"{c.name}({c.arguments})"))
    for k in occ:
        occ[k].sort(key=lambda x: x[0])
    return occ


class FrictionDetector:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.id = f"F2.{kind}"
        self.failure_class = F2

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        occ = friction_occurrences(view)
        mine = occ.get(self.kind)
        if not mine:
            return []
        friction_turns = {view.turn_of(s) for items in occ.values() for s, _ in items}
        fire_steps: list[tuple[int, str]] = []
        if len(mine) >= cfg.friction_min:
            step = mine[cfg.friction_min - 1][0]
            quoted = "; ".join(quote(ev, 120) for _, ev in mine[: cfg.friction_min])
            fire_steps.append((step, f"{len(mine)}x {self.kind}: {quoted}"))
        for step, ev in mine:
            nxt = view.next_turn(view.turn_of(step))
            if nxt is None or nxt in friction_turns:
                why = "run ended" if nxt is None else "next turn hit friction again"
                fire_steps.append((step, f"unrecovered {self.kind} ({why}): {quote(ev, 160)}"))
                break
        if not fire_steps:
            return []
        step, evidence = min(fire_steps, key=lambda x: x[0])
        return [Signal(id=self.id, failure_class=F2, step=step, evidence=evidence)]


class HarnessErrorDetector:
    """The harness itself broke (syntax error, crashing middleware, sandbox violation)."""

    id = "F2.harness_error"
    failure_class = F2

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        for e in view.traj.events:
            if e.type in ("harness_error", "sandbox_violation"):
                return [Signal(id=self.id, failure_class=F2, step=e.step, evidence=quote(e.detail or e.type))]
        return []


FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.DOTALL)


def _blocked_calls(view: TraceView) -> set[str]:
    """Ids of calls the harness did not execute (blocked, or rejected as malformed)."""
    ids = set()
    for e in view.traj.events:
        if e.type in ("blocked_call", "format_rejected", "unknown_tool") and e.data.get("call_id"):
            ids.add(str(e.data["call_id"]))
        elif e.type == "middleware_action" and e.data.get("call_id") and e.data.get("blocked"):
            ids.add(str(e.data["call_id"]))
    return ids


class RepeatedActionDetector:
    """The same tool with the same canonical arguments >= repeat_min times within repeat_window turns.

    Messages without tool calls count their fenced code block as the action (text agents).
    Calls the harness blocked (an event naming their ``call_id``) are not repeats: the loop was caught.
    """

    id = "F3.repeated_action"
    failure_class = F3

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        turn_no = {s: n for n, s in enumerate(view.assistant_steps)}
        blocked = _blocked_calls(view)
        actions: list[tuple[int, tuple[str, str]]] = [
            (c.step, (c.name, c.canonical)) for c in view.calls if c.id not in blocked
        ]
        with_calls = {c.step for c in view.calls}
        for s in view.assistant_steps:
            if s not in with_calls:
                content = view.traj.messages[s].get("content")
                blocks = FENCE.findall(content) if isinstance(content, str) else []
                if len(blocks) == 1:
                    actions.append((s, ("code", " ".join(blocks[0].split()))))
        actions.sort(key=lambda x: x[0])
        seen: dict[tuple[str, str], list[int]] = defaultdict(list)
        for step, key in actions:
            turns = seen[key]
            turns.append(step)
            recent = [t for t in turns if turn_no[step] - turn_no[t] < cfg.repeat_window]
            if len(recent) >= cfg.repeat_min:
                name, args = key
                return [Signal(
                    id=self.id, failure_class=F3, step=step,
                    evidence=f"{len(recent)}x {name} {quote(args, 120)} at steps {', '.join(map(str, recent))}",
                )]
        return []


class TerminationDetector:
    def __init__(self, name: str, termination: Termination, event: str) -> None:
        self.id = f"F3.{name}"
        self.failure_class = F3
        self.termination = termination
        self.event = event

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        for e in view.traj.events:
            if e.type == self.event:
                return [Signal(id=self.id, failure_class=F3, step=e.step, evidence=quote(e.detail or e.type))]
        if view.traj.termination == self.termination:
            return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                           evidence=f"termination={self.termination.value}")]
        return []


class StepBudgetDetector(TerminationDetector):
    def __init__(self) -> None:
        super().__init__("step_budget_exhausted", Termination.step_budget, "budget_exhausted")

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        found = super().detect(view, cfg)
        if found:
            return found
        turns = len(view.assistant_steps)
        if cfg.step_budget and turns >= cfg.step_budget and not view.traj.delivered:
            return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                           evidence=f"{turns} assistant turns (budget {cfg.step_budget}), no delivery")]
        return []


class NoDeliveryDetector:
    id = "F3.no_delivery"
    failure_class = F3

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if view.traj.delivered:
            return []
        last = view.traj.messages[view.final_step] if view.traj.messages else {}
        text = last.get("content") or (last.get("tool_calls") and "tool call") or ""
        return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                       evidence=f"no final answer (termination={view.traj.termination.value}); "
                                f"last message: {quote(text, 150)}")]


ID_TOKEN = re.compile(r"(?<![\w$.])[A-Za-z0-9][A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*(?![\w])")


def _looks_like_patch(text: str) -> bool:
    return text.lstrip().startswith(("diff --git", "--- ")) or "\n@@ " in text


def answer_step(view: TraceView) -> int:
    fa = view.traj.final_answer
    for s in reversed(view.assistant_steps):
        c = view.traj.messages[s].get("content")
        if isinstance(c, str) and fa and fa.strip() and fa.strip()[:50] in c:
            return s
    return view.final_step


class UnbackedClaimDetector:
    """Ids and numbers in the final answer found in no tool result, not in the task or user turns.

    Tokens must contain a digit and be at least ``unbacked_min_len`` long; patches
    (a diff as the final answer) are not claims and are skipped.
    """

    id = "F1.unbacked_claim"
    failure_class = F1

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        fa = view.traj.final_answer
        if not fa or _looks_like_patch(fa):
            return []
        ground = view.grounding_text.lower()
        ground_nocomma = ground.replace(",", "")
        missing = []
        for tok in dict.fromkeys(ID_TOKEN.findall(fa)):
            t = tok.strip("-_").lower()
            if len(t) < cfg.unbacked_min_len:
                continue
            if t in ground or t.replace(",", "") in ground_nocomma:
                continue
            missing.append(tok)
        if len(missing) >= cfg.unbacked_min:
            return [Signal(id=self.id, failure_class=F1, step=answer_step(view),
                           evidence=f"not in any tool result or the task: {', '.join(missing[:5])} "
                                    f"— in: {quote(fa, 120)}")]
        return []


class PoorDeliveryDetector:
    """Delivered but scored below ``poor_delivery_threshold`` (or a failure-only, unscored record)."""

    id = "F4.poor_delivery"
    failure_class = F4

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if not t.delivered:
            return []
        if t.score is not None and t.score < cfg.poor_delivery_threshold:
            why = f"score {t.score:.2f} < {cfg.poor_delivery_threshold:g}"
        elif t.score is None and t.meta.get("failure_only"):
            why = "failure-only record (unscored)"
        else:
            return []
        return [Signal(id=self.id, failure_class=F4, step=answer_step(view),
                       evidence=f"{why}; final answer: {quote(t.final_answer, 150)}")]


# Signals that say *that* a run failed rather than where: the labeller takes one as the first
# signal only when no located signal fired (the earliest of them then).
FALLBACK_SIGNALS = frozenset({"F4.poor_delivery", "F4.first_commitment"})


def default_catalogue() -> list[Detector]:
    from evoharness.diagnosis.multiagent import multiagent_detectors

    return [
        *(FrictionDetector(k) for k in FRICTION_EVENTS),
        HarnessErrorDetector(),
        RepeatedActionDetector(),
        StepBudgetDetector(),
        TerminationDetector("timeout", Termination.timeout, "timeout"),
        TerminationDetector("context_overflow", Termination.context_overflow, "context_overflow"),
        NoDeliveryDetector(),
        UnbackedClaimDetector(),
        PoorDeliveryDetector(),
        *multiagent_detectors(),
    ]


def catalogue_ids(detectors: Iterable[Detector] | None = None) -> list[str]:
    return [d.id for d in (detectors or default_catalogue())]
