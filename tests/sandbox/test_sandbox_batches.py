"""Batched rollouts: one sandboxed worker per batch of one commit gives the same trajectories."""

from __future__ import annotations

import git

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


def test_a_hanging_harness_times_out_each_rollout_with_the_reason(tmp_path):
    repo = init_harness(tmp_path / "h")
    (repo.path / "middleware" / "spin.py").write_text("def before_model(messages, ctx):\n    while True:\n"
                                                        "        pass\n")
    g = git.Repo(repo.path)
    g.git.add("-A")
    g.git.commit("-qm", "spin", env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                     "GIT_COMMITTER_EMAIL": "t@t"})
    reqs = _requests(g.head.commit.hexsha, n=2)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       limits=Limits(wall_seconds=2.0, cpu_seconds=30)) as ex:
        trajs = ex.run(reqs)
    assert len(trajs) == 4
    for t in trajs:
        assert t.termination == Termination.timeout and t.final_answer is None and t.score == 0.0
        assert any("wall-time" in e.detail for e in t.events)
