"""Rollouts through a runner: content cache, resume, infra retries that never decide a verdict."""

from __future__ import annotations

import sqlite3

import pytest

from evoharness.errors import InfraError
from evoharness.sandbox.api import RolloutRequest
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.cache import CachingRunner, RolloutCache
from evoharness.verification.config import VerificationConfig
from evoharness.verification.retry import RetryingRunner
from evoharness.verification.sim import ScriptedRunner, SimHarness, SimTask, SimWorld
from evoharness.verification.verifier import Verifier
from tests.verification.helpers import candidate

ND = "F3.no_delivery"


def world() -> SimWorld:
    tasks = [SimTask(f"d{i}", "dev", 1.0, 0.0, {ND: 0.7} if i < 4 else {}) for i in range(8)]
    w = SimWorld(tasks, noise_sd=0.0)
    w.add("main", SimHarness())
    w.add("fix", SimHarness(factor={ND: 0.0}))
    return w


def reqs(commit="main", n=3):
    return [RolloutRequest(task_id=f"d{i}", harness_commit=commit, seed=s)
            for i in range(n) for s in range(2)]


def test_cache_pays_each_rollout_once_and_a_resumed_run_reuses_it(tmp_path):
    inner = ScriptedRunner(world())
    cache = RolloutCache(tmp_path / "c.sqlite")
    runner = CachingRunner(inner, cache, model="m", env_version="e1")
    first = runner.run(reqs())
    again = runner.run(reqs())
    assert inner.rollouts == 6 and runner.hits == 6
    assert [t.score for t in first] == [t.score for t in again]
    cache.close()

    resumed = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"), model="m", env_version="e1")
    resumed.run(reqs())
    assert inner.rollouts == 6  # a new process on the same file pays nothing
    other_env = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"), model="m", env_version="e2")
    other_env.run(reqs())
    assert inner.rollouts == 12  # a different environment version is different content


def test_cache_kept_when_its_process_is_killed_right_after_a_store(tmp_path):
    """The cache commits without an fsync (a write-ahead log): a process SIGKILLed after a batch was stored still
    left every rollout of it for the next process (only a power cut may lose the last batches)."""
    import os
    import signal
    import subprocess
    import sys

    code = ("import os, signal, sys; from evoharness.verification.cache import CachingRunner, RolloutCache; "
            "from tests.verification.test_verification_rollouts import reqs, world; "
            "from evoharness.verification.sim import ScriptedRunner; "
            "CachingRunner(ScriptedRunner(world()), RolloutCache(sys.argv[1]), model='m', env_version='e1')"
            ".run(reqs()); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c.sqlite")], cwd=os.getcwd(), timeout=120)
    assert done.returncode == -signal.SIGKILL
    inner = ScriptedRunner(world())
    again = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"), model="m", env_version="e1")
    again.run(reqs())
    assert inner.rollouts == 0 and again.hits == 6


def test_a_cache_that_cannot_be_written_is_still_read(tmp_path):
    """A read-only copy of a run's cache (here made immutable: the tests run as root) answers its hits: the switch to
    the write-ahead log raised 'attempt to write a readonly database' (a journal file) or 'unable to open database
    file' (a log file, which needs its shared-memory file beside it) at the first lookup."""
    import shutil
    import subprocess

    runner = CachingRunner(ScriptedRunner(world()), RolloutCache(tmp_path / "c.sqlite"), model="m", env_version="e1")
    runner.run(reqs())
    runner.cache.close()
    ro = tmp_path / "ro"
    ro.mkdir()
    for journal in ("wal", "delete"):  # this cache's own file, and one written before the write-ahead log
        copy = ro / f"{journal}.sqlite"
        shutil.copy(tmp_path / "c.sqlite", copy)
        if journal == "delete":
            with sqlite3.connect(copy) as db:
                db.execute("PRAGMA journal_mode=DELETE")
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, ro.iterdir()), str(ro)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("cannot make a file immutable here")
    try:
        for journal in ("wal", "delete"):
            inner = ScriptedRunner(world())
            again = CachingRunner(inner, RolloutCache(ro / f"{journal}.sqlite"), model="m", env_version="e1")
            assert len(again.run(reqs())) == 6 and inner.rollouts == 0, journal
            again.cache.close()
    finally:
        subprocess.run(["chattr", "-i", *map(str, ro.iterdir()), str(ro)], check=True)


def test_a_stored_row_that_no_longer_reads_as_a_trajectory_is_run_again(tmp_path):
    """A row of another version's schema (or a damaged one) stopped the run with pydantic's ValidationError
    traceback; it is now a miss: run again, replaced, and counted as paid."""
    inner = ScriptedRunner(world())
    cache = RolloutCache(tmp_path / "c.sqlite")
    runner = CachingRunner(inner, cache, model="m", env_version="e1")
    first = runner.run(reqs())
    with cache._db() as db:
        db.execute("UPDATE rollouts SET trajectory = ? WHERE key = ?", ('{"broken": 1}', runner.key(reqs()[0])))
    again = runner.run(reqs())
    assert inner.rollouts == 7 and runner.paid == 7 and runner.hits == 5
    assert [t.model_dump() for t in again] == [t.model_dump() for t in first]
    assert cache.get(runner.key(reqs()[0])) is not None  # replaced


def test_cache_keys_by_tree_so_equal_trees_share_rollouts(tmp_path):
    inner = ScriptedRunner(world())
    runner = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"), tree_of=lambda c: "same-tree")
    runner.run(reqs("main"))
    assert runner.misses(reqs("fix")) == []


def test_cache_keys_by_rollout_index_so_one_seed_under_two_indices_is_two_rollouts(tmp_path):
    inner = ScriptedRunner(world())
    runner = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"), model="m", env_version="e1")
    pair = [RolloutRequest(task_id="d0", harness_commit="main", seed=7, rollout=r) for r in (0, 1)]
    got = runner.run(pair)
    assert inner.rollouts == 2 and runner.hits == 0  # not one rollout served twice
    assert [t.rollout for t in got] == [0, 1]  # each request gets its own index's trajectory


class Flaky:
    """Raises ``fails`` InfraErrors, then delegates."""

    def __init__(self, inner, fails: int, retryable: bool = True) -> None:
        self.inner, self.fails, self.retryable, self.calls = inner, fails, retryable, 0

    def run(self, requests):
        self.calls += 1
        if self.calls <= self.fails:
            raise InfraError("model endpoint rate-limited", retryable=self.retryable)
        return self.inner.run(requests)


def test_retryable_infra_errors_are_retried_and_never_count_as_agent_failures():
    flaky = Flaky(ScriptedRunner(world()), fails=2)
    verifier = Verifier(RetryingRunner(flaky, attempts=3, wait_s=0), VerificationConfig(rollouts=2))
    anchor = verifier.measure_anchor("main", [f"d{i}" for i in range(8)], 2)
    assert flaky.calls == 3
    healthy = [o for o in anchor.observations if o.task_id in ("d4", "d5", "d6", "d7")]
    assert all(o.healthy for o in healthy)  # the failed attempts left no failed rollouts behind


def test_non_retryable_infra_error_aborts_at_once():
    flaky = Flaky(ScriptedRunner(world()), fails=5, retryable=False)
    with pytest.raises(InfraError):
        RetryingRunner(flaky, attempts=4, wait_s=0).run(reqs())
    assert flaky.calls == 1


def test_when_retries_run_out_the_run_pauses_with_no_verdict_and_no_charge():
    w = world()
    good = Verifier(ScriptedRunner(w), VerificationConfig(rollouts=2))
    anchor = good.measure_anchor("main", [f"d{i}" for i in range(8)], 2)
    down = Flaky(ScriptedRunner(w), fails=99)
    verifier = Verifier(RetryingRunner(down, attempts=3, wait_s=0), VerificationConfig(rollouts=2))
    ledger = BudgetLedger(total=1000)
    with pytest.raises(InfraError, match="rate-limited"):
        verifier.verify(candidate("fix", targets=ND), anchor, ledger=ledger, round=1)
    assert down.calls == 3 and ledger.spends == []


def test_verify_through_runner_and_real_labeller_accepts_a_real_fix(tmp_path):
    w = world()
    inner = ScriptedRunner(w)
    runner = CachingRunner(inner, RolloutCache(tmp_path / "c.sqlite"))
    verifier = Verifier(runner, VerificationConfig(rollouts=4, anchor_rollouts=4))
    anchor = verifier.measure_anchor("main", [f"d{i}" for i in range(8)])
    ledger = BudgetLedger(total=500)
    verdict = verifier.verify(candidate("fix", targets=ND), anchor, ledger=ledger, round=1)
    assert verdict.accepted, verdict.table()
    spent = ledger.rollouts
    again = verifier.verify(candidate("fix", targets=ND), anchor, ledger=ledger, round=1)
    assert again.accepted and ledger.rollouts == spent  # the second verification is all cache hits
    first = ledger.spends[0]
    assert first.tokens == 120 * first.rollouts  # tokens recorded where the runner reports them
