"""Batched rollouts: one sandboxed worker per batch of one commit gives the same trajectories."""

from __future__ import annotations

import pytest

from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination


def _requests(commit: str, n: int = 4) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:n]
    return [RolloutRequest(task_id=t, harness_commit=commit, seed=s, rollout=s) for t in tasks for s in (0, 1)]


def test_batched_equals_one_sandbox_per_rollout(tmp_path):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(repo.main_head())
    one = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=2).run(reqs)
    # closed at the end (``with``): batched bwrap rollouts run on warm workers, which live until close()
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=2,
                       batch_size=3) as ex:
        batched = ex.run(reqs)
    assert [t.task_id for t in batched] == [r.task_id for r in reqs]
    for a, b in zip(one, batched, strict=True):
        assert (a.score, a.final_answer, a.messages) == (b.score, b.final_answer, b.messages)


def test_a_hanging_harness_times_out_each_rollout_with_the_reason(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(commit_middleware(repo, "spin.py", "def before_model(messages, ctx):\n    while True:\n"
                                                        "        pass\n"), n=2)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       limits=Limits(wall_seconds=2.0, cpu_seconds=30)) as ex:
        trajs = ex.run(reqs)
    assert len(trajs) == 4
    for t in trajs:
        assert t.termination == Termination.timeout and t.final_answer is None and t.score == 0.0
        assert any("wall-time" in e.detail for e in t.events)


# the second task's rollout ends the batch's process: killed outright, or by the sandbox's memory limit (/tmp is a
# tmpfs whose pages count against the sandbox's cgroup; nothing the process can catch)
ENDS_ITS_PROCESS = {
    "crash": "import os, signal\n        os.kill(os.getpid(), signal.SIGKILL)",
    "memory": "f = open('/tmp/fill', 'wb')\n        while True:\n            f.write(b'x' * (1 << 20))",
}


@pytest.mark.parametrize("how", sorted(ENDS_ITS_PROCESS))
def test_a_rollout_that_ends_a_batch_fails_alone_and_the_later_ones_run(how, second_of_four):
    """One process per batch (Docker, or ``sandbox.warm = false``): the rollouts after the one that ended it never
    ran; they used to be recorded as failed with its reason (a 'memory limit hit' they never hit), now they run again,
    each in a sandbox of its own."""
    repo, tasks, reqs = second_of_four("end.py", ENDS_ITS_PROCESS[how])
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       warm=False, limits=Limits(memory_mb=256, wall_seconds=60, cpu_seconds=30)) as ex:
        trajs = ex.run(reqs)
    plain = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None).run([reqs[0], reqs[2], reqs[3]])
    assert [t.task_id for t in trajs] == [t.id for t in tasks]
    failed = [t.task_id for t in trajs if t.meta.get("rollout_failure")]
    assert failed == [tasks[1].id], [t.meta.get("rollout_failure") for t in trajs]
    reason = trajs[1].meta["rollout_failure"]
    assert reason["limit"] == ("memory" if how == "memory" else None), reason
    assert "killed by SIGKILL" in reason["reason"] or "memory limit hit" in reason["reason"], reason
    for a, b in zip(plain, [trajs[0], trajs[2], trajs[3]], strict=True):
        assert (a.score, a.final_answer, a.messages) == (b.score, b.final_answer, b.messages)
