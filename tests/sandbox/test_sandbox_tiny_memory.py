"""Memory limits and hostile rollouts: a worker that cannot start under sandbox.limits.memory_mb (down to its floor,
16 MiB) fails each rollout on the memory limit, not as a plain harness error; a rollout that fills the sandbox's
memory, forks children that do, or stops its warm worker's fork server fails alone, within its wall limit and the
answer grace, and the other rollouts of its batch keep their own results."""

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


# what the second task's rollout does at its first step: fill the sandbox's memory (tmpfs pages count against its
# cgroup, and nothing the process can catch ends it), fork children that each take a part of it, or stop its
# fork server so that it never answers
HOSTILE = {
    "fills_memory": "f = open('/tmp/fill', 'wb')\n        while True:\n            f.write(b'x' * (1 << 20))",
    "forks_and_allocates": "import time\n        for _ in range(12):\n            if os.fork() == 0:\n"
                           "                b = b'x' * (32 << 20)\n                time.sleep(5)\n"
                           "                os._exit(0)\n        for _ in range(12):\n            os.wait()",
    "stops_its_server": "import signal\n        os.kill(os.getppid(), signal.SIGSTOP)",
    # the memory hit comes first, then the wall: recorded as the memory limit (it was the wall alone)
    "forks_allocates_then_hangs": "import time\n        for _ in range(12):\n            if os.fork() == 0:\n"
                                  "                b = b'x' * (32 << 20)\n                time.sleep(5)\n"
                                  "                os._exit(0)\n        for _ in range(12):\n            os.wait()\n"
                                  "        time.sleep(3600)",
}


@pytest.mark.parametrize("fork", ["batch", "rollout"])
@pytest.mark.parametrize("how", sorted(HOSTILE))
def test_a_hostile_rollout_on_a_warm_worker_fails_alone_within_a_bound(monkeypatch, how, fork, second_of_four):
    """The rollout ends in a recorded failure naming its limit (memory; the wall for a server that never answers),
    within its wall limit and the answer grace; the others of its batch keep their own results."""
    import evoharness.sandbox.warm as warm

    monkeypatch.setattr(warm, "ANSWER_GRACE_S", 3.0)  # past the wall limit, how long the host waits for an answer
    repo, tasks, reqs = second_of_four("hostile.py", HOSTILE[how])
    wall = 10.0
    start = time.monotonic()
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       warm_fork=fork, limits=Limits(memory_mb=192, wall_seconds=wall, cpu_seconds=30)) as ex:
        trajs = ex.run(reqs)
    elapsed = time.monotonic() - start
    plain = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None).run([reqs[0], reqs[2], reqs[3]])
    assert [t.task_id for t in trajs] == [t.id for t in tasks]
    failure = trajs[1].meta.get("rollout_failure")
    assert failure is not None and failure["limit"] == ("wall" if how == "stops_its_server" else "memory"), failure
    if how == "stops_its_server":  # the host waited the wall and the grace: the figures and the reason say so alike
        waited = trajs[1].usage.wall_seconds  # it recorded 10.0 (the limit alone) while the host waited 13
        assert wall + 3.0 <= waited < wall + 3.0 + 5, waited
        assert failure["reason"].startswith(f"worker failed: wall-time limit hit, ended after {waited:.1f}s"), failure
    assert trajs[1].score == 0.0 and trajs[1].final_answer is None
    for a, b in zip(plain, [trajs[0], trajs[2], trajs[3]], strict=True):
        assert not b.meta.get("rollout_failure"), b.meta["rollout_failure"]
        assert (a.score, a.final_answer, a.messages) == (b.score, b.final_answer, b.messages)
    assert elapsed < wall + 3.0 + 40, elapsed  # the hostile one's wall and grace, starts and three short rollouts
