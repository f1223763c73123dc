"""The budget ledger: every rollout spends units, attributed to a round and a candidate.

A spend that would take the total past the budget raises `BudgetExhausted` *before* anything is
run or recorded, so the ledger is never overspent. Tokens are recorded where the runner reports
them; they are accounting, not units (a token cost known only after the run could overspend).
The ledger is a pydantic model, so the graph
can checkpoint it with ``model_dump()`` and restore it with ``model_validate``.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from evoharness.errors import BudgetExhausted

_EPS = 1e-9


class Spend(BaseModel):
    round: int
    candidate: str = Field(description="candidate branch, or 'anchor' / 'baseline' for main's measurements")
    purpose: str = "candidate"
    rollouts: int = 0
    units: float = 0.0
    tokens: int = 0


class BudgetLedger(BaseModel):
    total: float = Field(ge=0, description="budget units available")
    units_per_rollout: float = Field(1.0, gt=0)
    spends: list[Spend] = Field(default_factory=list)

    @property
    def spent(self) -> float:
        return sum(s.units for s in self.spends)

    @property
    def left(self) -> float:
        return max(0.0, self.total - self.spent)

    @property
    def rollouts(self) -> int:
        return sum(s.rollouts for s in self.spends)

    def cost(self, rollouts: int) -> float:
        return rollouts * self.units_per_rollout

    def can_afford(self, rollouts: int) -> bool:
        return self.cost(rollouts) <= self.left + _EPS

    def affordable_rollouts(self) -> int:
        return int((self.left + _EPS) // self.units_per_rollout)

    def check(self, rollouts: int) -> None:
        """Raise `BudgetExhausted` unless ``rollouts`` more rollouts fit in the budget."""
        if not self.can_afford(rollouts):
            raise BudgetExhausted(self.cost(rollouts), self.left)

    def charge(
        self, rollouts: int, round: int, candidate: str, purpose: str = "candidate", tokens: int = 0
    ) -> Spend:
        """Record a spend of ``rollouts`` rollouts (raises `BudgetExhausted` first if it does not fit)."""
        if rollouts < 0:
            raise ValueError("rollouts must be >= 0")
        self.check(rollouts)
        spend = Spend(
            round=round,
            candidate=candidate,
            purpose=purpose,
            rollouts=rollouts,
            units=self.cost(rollouts),
            tokens=tokens,
        )
        self.spends.append(spend)
        return spend

    def by_candidate(self) -> dict[tuple[int, str], float]:
        """Units per (round, candidate)."""
        out: dict[tuple[int, str], float] = defaultdict(float)
        for s in self.spends:
            out[(s.round, s.candidate)] += s.units
        return dict(out)

    def dump(self) -> dict:
        return self.model_dump()
