"""LocalExecutor: per-commit harness exports, request order, failed trajectories with reasons.

The worker here is a small script committed into the harness itself (``{harness}/worker.py``),
so each harness commit can misbehave differently; the real agent worker is tested elsewhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import git
import pytest

from evoharness.errors import InfraError, InputError
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.base import ProcessSandbox
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination

WORKER = r'''
import json, os, sys, pathlib
req = json.load(open(sys.argv[1]))
mode = pathlib.Path(req["harness_dir"], "mode.txt").read_text().strip()
if mode == "spin":
    while True: pass
if mode == "alloc":
    b = bytearray(4 * 1024**3)
if mode == "crash":
    raise RuntimeError("middleware exploded")
if mode == "garbage":
    open(sys.argv[2], "w").write("{not json")
    sys.exit(0)
if mode == "nothing":
    sys.exit(0)
traj = {"id": f"{req['task_id']}-{req['seed']}", "task_id": req["task_id"], "split": req["split"],
        "harness_commit": req["harness_commit"], "model": req["model_spec"], "rollout": req["rollout"],
        "final_answer": "done " + mode, "score": 1.0,
        "meta": {"secret": os.environ.get("EVO_FAKE_SECRET"), "env_spec": req["env_spec"]}}
open(sys.argv[2], "w").write(json.dumps(traj))
'''

MODES = ["ok", "spin", "alloc", "crash", "garbage", "nothing"]


@pytest.fixture
def harness_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "harness"
    repo = git.Repo.init(path)
    (path / "worker.py").write_text(WORKER)
    commits = {}
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.com")
    for mode in MODES:
        (path / "mode.txt").write_text(mode + "\n")
        repo.index.add(["worker.py", "mode.txt"])
        commits[mode] = repo.index.commit(f"mode {mode}").hexsha
    return path, commits


def _executor(path: Path, sandbox, workers: int = 2, **kw) -> LocalExecutor:
    return LocalExecutor(path, "synthetic:basic", "scripted:weak", sandbox=sandbox, workers=workers,
                         limits=Limits(wall_seconds=3, memory_mb=1024, pids=16),
                         worker=[sys.executable, "{harness}/worker.py"], **kw)


def test_each_misbehaving_commit_is_a_failed_trajectory_with_its_reason(harness_repo, monkeypatch):
    path, commits = harness_repo
    monkeypatch.setenv("EVO_FAKE_SECRET", "hunter2")
    reqs = [RolloutRequest(task_id=f"t{i}", harness_commit=commits[m], seed=i) for i, m in enumerate(MODES)]
    seen: list[int] = []
    with _executor(path, BwrapSandbox(), on_result=lambda i, t: seen.append(i)) as ex:
        out = ex.run(reqs)
    assert [t.task_id for t in out] == [r.task_id for r in reqs]  # request order
    assert sorted(seen) == list(range(len(MODES)))
    by_mode = dict(zip(MODES, out, strict=True))
    ok = by_mode["ok"]
    assert ok.final_answer == "done ok" and ok.score == 1.0 and ok.harness_commit == commits["ok"]
    assert ok.meta["secret"] is None  # the host secret did not reach the worker
    expect = {"spin": ("timeout", "wall-time limit"), "alloc": ("sandbox_violation", "memory limit"),
              "crash": ("harness_error", "middleware exploded"), "garbage": ("harness_error", "invalid trajectory"),
              "nothing": ("harness_error", "wrote no trajectory")}
    for mode, (kind, words) in expect.items():
        t = by_mode[mode]
        assert t.final_answer is None and t.score == 0.0, mode
        assert t.events[0].type == kind and words in t.events[0].detail, (mode, t.events[0])
        assert t.termination == (Termination.timeout if mode == "spin" else Termination.error)
        assert t.harness_commit == commits[mode]


def test_plain_process_backend_runs_the_same_worker(harness_repo):
    path, commits = harness_repo
    with _executor(path, ProcessSandbox(), workers=1) as ex:
        ok, crash = ex.run([RolloutRequest(task_id="a", harness_commit=commits["ok"]),
                            RolloutRequest(task_id="b", harness_commit=commits["crash"])])
    assert ok.final_answer == "done ok"
    assert crash.score == 0.0 and "middleware exploded" in crash.events[0].detail


def test_export_is_read_only_and_cached_per_commit(harness_repo):
    path, commits = harness_repo
    ex = _executor(path, BwrapSandbox())
    a = ex.checkouts.get(commits["ok"])
    assert ex.checkouts.get(commits["ok"][:8]) == a
    assert (a / "mode.txt").read_text() == "ok\n"
    assert not os.stat(a / "mode.txt").st_mode & 0o222
    ex.close()
    assert not a.exists()


def test_unknown_commit_is_bad_input(harness_repo):
    path, _ = harness_repo
    with _executor(path, BwrapSandbox()) as ex, pytest.raises(InputError, match="unknown harness commit"):
        ex.run([RolloutRequest(task_id="a", harness_commit="deadbeef")])


def test_unusable_backend_raises_before_any_rollout(harness_repo):
    path, commits = harness_repo
    with _executor(path, BwrapSandbox(bwrap="/nonexistent/bwrap")) as ex, pytest.raises(InfraError):
        ex.run([RolloutRequest(task_id="a", harness_commit=commits["ok"])])


class _ClosingSandbox(ProcessSandbox):
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_an_executor_closes_only_a_sandbox_it_owns(harness_repo):
    path, _ = harness_repo
    shared, owned = _ClosingSandbox(), _ClosingSandbox()
    with LocalExecutor(path, "fake:x", "fake", sandbox=shared):
        pass
    with LocalExecutor(path, "fake:x", "fake", sandbox=owned, owns_sandbox=True):
        pass
    assert (shared.closed, owned.closed) == (0, 1)  # e.g. a Docker pool's containers are removed on close


def test_a_branch_name_is_looked_up_once_per_run_call_and_its_rollouts_run_that_commit(harness_repo, monkeypatch):
    path, commits = harness_repo
    repo = git.Repo(path)
    looked: list[str] = []
    with _executor(path, ProcessSandbox(), batch_size=2) as ex:
        real = ex.checkouts.repo.commit

        def commit(ref):  # the git lookup; HEAD moves to another commit after the first lookup
            looked.append(str(ref))
            got = real(ref)
            repo.head.reference.set_commit(commits["crash"])
            return got

        monkeypatch.setattr(ex.checkouts.repo, "commit", commit)
        repo.head.reference.set_commit(commits["ok"])
        trajs = ex.run([RolloutRequest(task_id="a", harness_commit="HEAD", seed=s) for s in range(4)])
    assert [ref for ref in looked if ref != commits["ok"]] == ["HEAD"]  # a full sha's lookup is remembered
    assert [t.harness_commit for t in trajs] == [commits["ok"]] * 4
    assert all(t.final_answer == "done ok" for t in trajs)


def test_an_in_process_rollout_imports_nothing_per_rollout(tmp_path, monkeypatch):
    """LocalExecutor._in_process and run_rollout imported their helpers inside the per-rollout call (three
    imports a rollout through the import machinery, ~6 us a rollout). They are module imports now: the executor's
    and runner's code asks the import system for nothing per in-process rollout (the environment's and stand-in
    model's own per-call imports are left as they are)."""
    import builtins
    from collections import Counter

    from evoharness.harness_repo.init import init_harness

    repo = init_harness(tmp_path / "h")
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None) as ex:
        reqs = [RolloutRequest(task_id="contact_0", seed=s, harness_commit="HEAD") for s in range(3)]
        ex.run(reqs[:1])  # the environment and the model's modules, loaded once
        asked: Counter[tuple[str, str]] = Counter()
        real = builtins.__import__

        def counting(name, globals=None, locals=None, fromlist=(), level=0):
            caller = sys._getframe(1).f_code
            if caller.co_filename.endswith(("sandbox/executor.py", "agent/runner.py")):
                asked[(name, caller.co_name)] += 1
            return real(name, globals, locals, fromlist, level)

        monkeypatch.setattr(builtins, "__import__", counting)
        trajs = ex.run(reqs)
        monkeypatch.setattr(builtins, "__import__", real)
    assert [t.task_id for t in trajs] == ["contact_0"] * 3 and Termination.error not in {t.termination for t in trajs}
    assert not [k for k, n in asked.items() if n >= len(reqs)], asked  # once a batch (the user model) at most
