"""When a run stops: the round limit, the ceiling (the Router's), patience, or the budget. Neither ceiling
is declared while the planner (`graph.planning`) has harness evidence or process signals left to try."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoharness.diagnosis.routing import Router
from evoharness.graph.config import RunConfig
from evoharness.graph.records import CompositionEntry
from evoharness.graph.source import ledger_of
from evoharness.graph.state import Typed


class Stopping:
    def __init__(self, run: RunConfig, router: Router, tasks: Callable[[str], list[str]],
                 units_per_rollout: float = 1.0) -> None:
        self.run = run
        self.router = router
        self.tasks = tasks
        self.units = units_per_rollout
        self.planner = None  # graph.planning.RoundPlanner and its HarnessEvidence (set by the wiring)
        self.harness_evidence = None

    def ledger(self, state: dict[str, Any]):
        return ledger_of(state, self.run.budget, self.units)

    def open_work(self, state: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(harness evidence untried against this anchor, process signals above the floor untried)."""
        if self.planner is None or not state.get("anchor"):
            return [], []
        return self.planner.open_evidence(state, self.harness_evidence), self.planner.untried(state)

    def round_cost(self) -> float:
        """Worst case of one round (units): each candidate and its fresh baseline on every dev task, and a
        fresh anchor."""
        return self.units * self.run.rollouts * len(self.tasks("dev")) * (2 * self.run.max_candidates + 1)

    def reserve_for_finish(self) -> float:
        return self.units * self.run.rollouts * len(self.tasks("heldout"))

    def should_stop(self, state: dict[str, Any]) -> bool:
        return self.stop_reason(state)["reason"] is not None

    def stop_reason(self, state: dict[str, Any]) -> dict[str, Any]:
        ledger, t = self.ledger(state), Typed.of(state)
        comp = t.composition if state.get("composition") else (
            CompositionEntry.model_validate(t.anchor.composition) if state.get("anchor") else None)
        shares = comp.composition if comp else {}
        if state.get("round", 1) > self.run.max_rounds:
            return {"reason": f"round limit ({self.run.max_rounds}) reached", "recommendation": None}
        evidence, untried = self.open_work(state)  # no ceiling verdict while the harness has untried work
        ceiling = self.router.stop_reason(shares)
        if ceiling is not None and not evidence:
            return {"reason": ceiling[0], "recommendation": ceiling[1]}
        if state.get("no_accept_streak", 0) >= self.run.patience and not evidence and not untried:
            return {"reason": f"ceiling: {state['no_accept_streak']} rounds in a row with nothing accepted",
                    "recommendation": self.router.weights_advice(shares)}
        if ledger.left < self.round_cost() + self.reserve_for_finish():
            return {"reason": f"budget: {ledger.left:g} units left, a round needs {self.round_cost():g}",
                    "recommendation": None}
        return {"reason": None, "recommendation": None}
