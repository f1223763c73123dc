"""What a warm worker holds: the sandboxed agent loop with an offline model (served host-side through the model
gateway) imports neither LangChain nor structlog nor rich -- in the real bwrap fork server and its batch child,
after rollouts that ran (and one that failed), not in a mock."""

from __future__ import annotations

import json

import git

from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor

# After every model call: which of the heavy packages the rollout's process holds, written into the reply's
# text (what gets recorded). A rollout of the task named FAIL_TASK fails at its second model call (a hook that
# raises: the runner reports the failure), so the rollouts after it run after a failed one.
PROBE = '''import json, sys
HEAVY = ("langchain", "langchain_core", "langchain_openai", "openai", "structlog", "rich")
FAIL_TASK = "{fail}"
def before_model(messages, ctx):
    if ctx["task_id"] == FAIL_TASK and ctx["step"] == 1:
        raise RuntimeError("planned failure")
def after_model(message, ctx):
    held = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    held = json.dumps(held, separators=(",", ":"))
    return {{**message, "content": "HELD " + held + " " + (message.get("content") or "")}}
'''


def test_a_warm_workers_rollouts_hold_no_langchain_structlog_or_rich(tmp_path):
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:3]
    repo = init_harness(tmp_path / "h")
    (repo.path / "middleware" / "probe.py").write_text(PROBE.format(fail=tasks[0]))
    g = git.Repo(repo.path)
    g.git.add("-A")
    g.git.commit("-qm", "probe", env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                      "GIT_COMMITTER_EMAIL": "t@t"})
    commit = g.head.commit.hexsha
    reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=0, rollout=0) for t in tasks]
    with LocalExecutor(repo.path, "synthetic", "standin:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=3) as ex:
        first, second = ex.run(reqs), ex.run(reqs)  # the second batch: a warm server that has served one
        assert ex.warm_starts == 1
        assert ex.warm_changed == {}  # no rollout, not even the failed one, left a module behind in the child
    for trajs in (first, second):
        assert trajs[0].termination.value == "error" and "planned failure" in str(trajs[0].events)
        held = [json.loads(m["content"].split(" ", 2)[1]) for t in trajs for m in t.messages
                if m["role"] == "assistant" and (m.get("content") or "").startswith("HELD ")]
        assert len(held) >= 4, [t.messages for t in trajs]  # the probe ran after each rollout's model calls
        assert held == [[]] * len(held), held
