"""Tiny memory limits (sandbox.limits.memory_mb down to its floor, 16 MiB): every rollout ends within a bounded time
in a failure that names the memory limit -- never a hang, never a plain harness error."""

from __future__ import annotations

import time

import pytest

from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import EventType, Termination


def _requests(commit: str, n: int) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:n]
    return [RolloutRequest(task_id=t, harness_commit=commit, seed=0, rollout=0) for t in tasks]


@pytest.mark.parametrize("batch", [1, 2], ids=["cold", "warm"])
def test_a_worker_that_cannot_start_under_16_mib_fails_each_rollout_on_the_memory_limit(tmp_path, batch):
    """At 16 MiB the Python worker dies in its imports: 'MemoryError', or the loader's 'failed to map segment from
    shared object' (an ImportError) for a C extension. Both were recorded with no limit (a plain harness error,
    EventType.harness_error); a warm worker's start-up death was never classified at all."""
    repo = init_harness(tmp_path / "h")
    start = time.monotonic()
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=batch,
                       limits=Limits(memory_mb=16, wall_seconds=30)) as ex:
        trajs = ex.run(_requests(repo.main_head(), 2))
    assert time.monotonic() - start < 60
    assert len(trajs) == 2
    for t in trajs:
        failure = t.meta["rollout_failure"]
        assert failure["limit"] == "memory", failure
        assert failure["reason"].startswith("worker failed: memory limit hit"), failure["reason"]
        assert [e.type for e in t.events] == [EventType.sandbox_violation]
        assert t.termination == Termination.error and t.score == 0.0
