"""Where observations come from: rollouts through a `RolloutRunner` (or a simulation)."""

from __future__ import annotations

from typing import Protocol

from evoharness.errors import InfraError
from evoharness.sandbox.api import RolloutRequest, RolloutRunner
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.observations import Labeller, Observation, observe


class ObservationSource(Protocol):
    """Turns rollout requests into observations.

    Contract: ``pending(requests, ledger)`` is how many of them would be paid for (not already
    cached, or not already paid from ``ledger``); ``observe(requests, ledger)`` returns one observation
    per request in order, plus the number of rollouts actually paid for. The ledger is an argument (a
    source may record in it what it paid for, e.g. the run's `RunLedger`), never state of the source.
    Infrastructure failures raise `InfraError`; agent failures are data.
    """

    def pending(self, requests: list[RolloutRequest], ledger: BudgetLedger | None = None) -> int: ...

    def observe(self, requests: list[RolloutRequest],
                ledger: BudgetLedger | None = None) -> tuple[list[Observation], int]: ...


class RunnerSource:
    """Observations from a `RolloutRunner`, labelled by ``labeller`` (the diagnosis labeller by default).

    A runner with a ``misses(requests)`` method (`CachingRunner`) is asked what it would pay for.
    """

    def __init__(self, runner: RolloutRunner, labeller: Labeller | None = None) -> None:
        self.runner, self.labeller = runner, labeller

    def pending(self, requests: list[RolloutRequest], ledger: BudgetLedger | None = None) -> int:
        misses = getattr(self.runner, "misses", None)
        return len(misses(requests)) if callable(misses) else len(requests)

    def observe(self, requests: list[RolloutRequest],
                ledger: BudgetLedger | None = None) -> tuple[list[Observation], int]:
        if not requests:
            return [], 0
        paid = self.pending(requests)
        trajs = self.runner.run(requests)
        if len(trajs) != len(requests):
            raise InfraError(f"runner returned {len(trajs)} trajectories for {len(requests)} requests")
        return [observe(r, t, self.labeller) for r, t in zip(requests, trajs, strict=True)], paid
