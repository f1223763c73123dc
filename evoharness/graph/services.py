"""The run's services, one per stage of the graph: the book (tasks, rollouts, labels, queue), the desk
(analyst, critic, engineer), the gate (verify, settle, merge) and the stopping rule.

Every side effect is idempotent so a node that re-runs after a crash repeats nothing that already
happened. Built by `graph.wiring.build_services`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evoharness.graph.book import Book
from evoharness.graph.desk import Desk
from evoharness.graph.gate import Gate
from evoharness.graph.progress import Progress
from evoharness.graph.source import RunLedger
from evoharness.graph.stopping import Stopping
from evoharness.traces.store import TrajectoryStore


@dataclass
class Services:
    repo: Any  # HarnessRepo
    book: Book
    desk: Desk
    gate: Gate
    stopping: Stopping
    progress: Progress
    chain: Any = None  # the rollout chain (None when built lazily)

    @property
    def store(self) -> TrajectoryStore:
        return self.book.store

    def ledger(self, state: dict[str, Any]) -> RunLedger:
        return self.stopping.ledger(state)

    def should_stop(self, state: dict[str, Any]) -> bool:
        return self.stopping.should_stop(state)

    def close(self) -> None:
        """Close the rollout chain (the executor's exported checkouts, the cache)."""
        if self.chain is not None:
            self.chain.close()
