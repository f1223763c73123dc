"""Build the run's collaborators from settings: repo, runner (+ cache), verifier, roles, queue, env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from evoharness.config import Settings
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


def rollout_key(req: RolloutRequest) -> str:
    return f"{req.harness_commit}:{req.split}:{req.task_id}:{req.seed}"


def trajectory_id(req: RolloutRequest) -> str:
    return f"{req.harness_commit[:12]}/{req.split}/{req.task_id}/s{req.seed}"


class GraphSource:
    """The `ObservationSource` the verifier uses in a run: runs, stores and labels rollouts.

    ``ledger`` is set by the services before each measurement; ``pending`` counts the requests
    the ledger has not paid for yet.
    """

    def __init__(self, runner, store: TrajectoryStore, labeller: Labeller, progress: Progress) -> None:
        self.runner = runner
        self.store = store
        self.labeller = labeller
        self.progress = progress
        self.ledger: RunLedger | None = None

    def _fired(self, traj: Trajectory) -> tuple[frozenset[str], bool]:
        lab = self.labeller.label(traj)
        return frozenset(s.id for s in lab.signals), lab.failure_class.value == "healthy"

    def pending(self, requests: list[RolloutRequest]) -> int:
        paid = set(self.ledger.paid_keys) if self.ledger is not None else set()
        return len({rollout_key(r) for r in requests} - paid)

    def observe(self, requests: list[RolloutRequest]) -> tuple[list[Observation], int]:
        if not requests:
            return [], 0
        self.progress.plan(len(requests), "rollouts")
        trajs = self.runner.run(requests)
        trajs = [t.model_copy(update={"id": trajectory_id(r), "harness_commit": r.harness_commit,
                                      "rollout": r.rollout, "split": Split(r.split)})
                 for r, t in zip(requests, trajs, strict=True)]
        self.store.add(trajs)
        paid = 0
        if self.ledger is not None:
            known = set(self.ledger.paid_keys)
            for r in requests:
                k = rollout_key(r)
                if k not in known:
                    known.add(k)
                    self.ledger.paid_keys.append(k)
                    paid += 1
        self.progress.advance(len(requests), self.ledger.left - paid if self.ledger is not None else None)
        return [observe(r, t, self._fired) for r, t in zip(requests, trajs, strict=True)], paid


def build_collaborators(settings: Settings, run_dir: Path, lazy: bool = False) -> dict[str, Any]:
    from evoharness.datasets.queue import TrainingQueue
    from evoharness.envs import get_environment
    from evoharness.harness_repo.init import init_harness
    from evoharness.harness_repo.repo import HarnessRepo
    from evoharness.roles.factory import make_roles
    from evoharness.sandbox.factory import make_executor
    from evoharness.verification.cache import CachingRunner, RolloutCache
    from evoharness.verification.retry import RetryingRunner
    from evoharness.verification.verifier import Verifier

    run = settings.run
    harness = Path(run.harness)
    if not harness.exists():
        init_harness(harness)
    repo = HarnessRepo(harness, settings.harness_repo)
    env = get_environment(run.env)
    if lazy:
        return {"repo": repo, "runner": None, "verifier": None, "roles": None, "queue": None, "env": env,
                "source": None}
    executor = make_executor(settings, repo.path, run.env, run.model)  # [sandbox] executor, backend, batching
    cache = RolloutCache(Path(settings.home) / "rollout-cache.sqlite")
    vcfg = settings.verification
    retrying = RetryingRunner(executor, vcfg.retry_attempts, vcfg.retry_wait_s, vcfg.retry_max_wait_s)
    runner = CachingRunner(retrying, cache, model=run.model, env_version=f"{run.env}@{getattr(env, 'version', '')}",
                           tree_of=repo.tree_hash)
    store = TrajectoryStore(run_dir / "trajectories.jsonl")
    labeller = Labeller(settings.diagnosis)
    source = GraphSource(runner, store, labeller, Progress(quiet=True))
    verifier = Verifier(source, settings.verification, seed=run.seed)
    queue_url = getattr(settings.datasets, "url", None) or f"sqlite:///{Path(settings.home) / 'queue.db'}"
    return {"repo": repo, "runner": runner, "verifier": verifier, "source": source,
            "roles": make_roles(settings.roles.kind, settings), "queue": TrainingQueue(queue_url), "env": env}
