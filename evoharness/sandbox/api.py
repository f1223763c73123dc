"""The small rollout interface verification and the graph depend on.

Anything that can turn ``RolloutRequest``s into ``Trajectory``s is a ``RolloutRunner``:
the sandboxed local executor, a Ray executor, or a simulated runner in tests.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from evoharness.traces.models import Trajectory


def rollout_id(task_id: str, harness_commit: str | None, split: str, seed: int) -> str:
    """The one identity of a rollout: harness commit (12 hex), split, task and seed. It is the trajectory's
    id (worker, executor failure, run store) and the key a run's ledger pays once; the content cache keys
    the same rollout by what determines its outcome (`verification.cache.cache_key`)."""
    return f"{(harness_commit or 'worktree')[:12]}/{split}/{task_id}/s{seed}"


class RolloutRequest(BaseModel):
    task_id: str
    harness_commit: str = Field(description="commit (or tree) of the harness to run")
    seed: int = 0
    rollout: int = Field(0, description="rollout index k within a cell")
    split: str = "dev"

    @property
    def id(self) -> str:
        """`rollout_id` of this request."""
        return rollout_id(self.task_id, self.harness_commit, self.split, self.seed)


class RolloutRunner(Protocol):
    """Runs rollouts and returns one trajectory per request, in request order.

    Contract: an individual agent failure (crash, hang, broken harness, sandbox
    violation) is returned as a failed, scored trajectory -- never raised.
    Infrastructure failures (endpoint down, sandbox backend unusable) raise
    ``evoharness.errors.InfraError``.
    """

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]: ...
