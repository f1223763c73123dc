"""The run's rollout source: runs, stores and labels rollouts, paid from the run's ledger.

One rollout identity (`rollout_key`, `trajectory_id`) for the run: the request's harness commit,
split, task and seed. The ledger is an argument of every call (`ObservationSource` contract).
"""

from __future__ import annotations

from pydantic import Field

from evoharness.diagnosis.labeller import Labeller
from evoharness.graph.progress import Progress
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.models import Split, Trajectory
from evoharness.traces.store import TrajectoryStore
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.observations import Observation, observe


class RunLedger(BudgetLedger):
    """The run's ledger: also remembers which rollouts (by content key) it has paid for.

    It lives in the checkpointed state, so after a crash the re-run node pays again exactly
    for what the lost part of the node had paid -- the ledger of a resumed run equals that of
    an uninterrupted one -- while the content cache makes sure no rollout is *computed* twice.
    """

    paid_keys: list[str] = Field(default_factory=list)


def ledger_of(state: dict, total: float, units_per_rollout: float = 1.0) -> RunLedger:
    """The ledger in a run's state (a fresh one of ``total`` units before the first node)."""
    if state.get("ledger"):
        return RunLedger.model_validate(state["ledger"])
    return RunLedger(total=total, units_per_rollout=units_per_rollout)


def rollout_key(req: RolloutRequest) -> str:
    return f"{req.harness_commit}:{req.split}:{req.task_id}:{req.seed}"


def trajectory_id(req: RolloutRequest) -> str:
    return f"{req.harness_commit[:12]}/{req.split}/{req.task_id}/s{req.seed}"


class GraphSource:
    """The `ObservationSource` the verifier uses in a run: runs, stores and labels rollouts.

    ``pending`` counts the requests ``ledger`` has not paid for yet; ``observe`` records the ones it
    pays for in ``ledger.paid_keys``.
    """

    def __init__(self, runner, store: TrajectoryStore, labeller: Labeller, progress: Progress) -> None:
        self.runner = runner
        self.store = store
        self.labeller = labeller
        self.progress = progress

    def _fired(self, traj: Trajectory) -> tuple[frozenset[str], bool]:
        lab = self.labeller.label(traj)
        return frozenset(s.id for s in lab.signals), lab.failure_class.value == "healthy"

    def pending(self, requests: list[RolloutRequest], ledger: BudgetLedger | None = None) -> int:
        paid = set(getattr(ledger, "paid_keys", ()))
        return len({rollout_key(r) for r in requests} - paid)

    def observe(self, requests: list[RolloutRequest],
                ledger: BudgetLedger | None = None) -> tuple[list[Observation], int]:
        if not requests:
            return [], 0
        self.progress.plan(len(requests), "rollouts")
        trajs = self.runner.run(requests)
        trajs = [t.model_copy(update={"id": trajectory_id(r), "harness_commit": r.harness_commit,
                                      "rollout": r.rollout, "split": Split(r.split)})
                 for r, t in zip(requests, trajs, strict=True)]
        self.store.add(trajs)
        paid = 0
        if isinstance(ledger, RunLedger):
            known = set(ledger.paid_keys)
            for r in requests:
                k = rollout_key(r)
                if k not in known:
                    known.add(k)
                    ledger.paid_keys.append(k)
                    paid += 1
        self.progress.advance(len(requests), ledger.left - paid if ledger is not None else None)
        return [observe(r, t, self._fired) for r, t in zip(requests, trajs, strict=True)], paid
