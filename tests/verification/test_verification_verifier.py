"""The Verifier end to end on fake sources: fresh anchors as the bar, guards, plans, power."""

from __future__ import annotations

import pytest

from evoharness.verification.anchors import AnchorBook
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.gates import make_gates
from evoharness.verification.observations import Observation
from evoharness.verification.selection import BehaviourAware, FixedSplit
from evoharness.verification.sim import SimHarness, SimSource, SimTask, SimWorld
from evoharness.verification.verifier import Verifier
from tests.verification.helpers import T, candidate

TASKS = [f"d{i}" for i in range(8)]


class FnSource:
    """Observations from ``fn(commit, task, seed) -> score``; counts what it was asked to run."""

    def __init__(self, fn) -> None:
        self.fn, self.memo, self.ran = fn, {}, 0

    def pending(self, requests, ledger=None):
        return len({(r.harness_commit, r.task_id, r.seed) for r in requests} - self.memo.keys())

    def observe(self, requests, ledger=None):
        paid, out = 0, []
        for r in requests:
            key = (r.harness_commit, r.task_id, r.seed)
            if key not in self.memo:
                score = self.fn(*key)
                self.memo[key] = Observation(task_id=r.task_id, rollout=r.rollout, seed=r.seed, score=score,
                                             healthy=score >= 0.5, split=r.split)
                paid += 1
            out.append(self.memo[key])
        self.ran += paid
        return out, paid


def level(commit: str, task: str, seed: int) -> float:
    """Each commit has a true level; +-0.01 of rollout noise by seed parity."""
    base = {"main0": 0.50, "cA": 0.80, "mainA": 0.70, "cB": 0.76}[commit]
    return base + (0.01 if seed % 2 else -0.01)


def test_next_rounds_bar_is_the_fresh_anchor_not_the_candidates_reading():
    cfg = VerificationConfig(rollouts=4, anchor_rollouts=4)
    verifier = Verifier(FnSource(level), cfg)
    gates = make_gates(["aggregate"])
    book = AnchorBook()
    book.start(verifier.measure_anchor("main0", TASKS))
    a = verifier.evaluate(candidate("cA", round=1), book.current, FixedSplit(), gates, round=1)
    assert a.verdict.accepted and a.reading == pytest.approx(0.80)

    rec = verifier.reanchor(book, a, "mainA", TASKS, round=1)
    assert rec.optimism == pytest.approx(0.10) and book.optimism == [rec]
    assert book.bar() == pytest.approx(0.70) and book.current.commit == "mainA"

    b = verifier.evaluate(candidate("cB", round=2), book.current, FixedSplit(), gates, round=2)
    assert b.verdict.base == "mainA"
    assert b.verdict.measurements["baseline_mean"] == pytest.approx(0.70)
    assert b.verdict.accepted  # 0.76 beats the fresh 0.70; against A's own 0.80 reading it would not


def two_task_world(p: float = 0.8) -> SimWorld:
    tasks = [SimTask(f"d{i}", "dev", 0.9, 0.1, {T: p} if i < 6 else {}) for i in range(12)]
    tasks += [SimTask(f"h{i}", "heldout", 0.9, 0.1, {T: 0.8}) for i in range(4)]
    world = SimWorld(tasks, noise_sd=0.02)
    world.add("main", SimHarness())
    world.add("fix", SimHarness(factor={T: 0.0}))
    world.add("null", SimHarness())
    world.add("breaks", SimHarness(factor={T: 0.0}, offset={f"d{i}": -0.8 for i in range(6, 12)}))
    return world


def dev(world):
    return [t for t, task in world.tasks.items() if task.split == "dev"]


@pytest.mark.parametrize("commit, accepted, failing", [
    ("fix", True, []), ("null", False, ["behaviour", "sequential_gain", "attribution"]),
    ("breaks", False, ["no_regression"])])
def test_behaviour_aware_verdicts_on_a_known_world(commit, accepted, failing):
    world = two_task_world()
    verifier = Verifier(SimSource(world), VerificationConfig(rollouts=4, anchor_rollouts=4))
    anchor = verifier.measure_anchor("main", dev(world))
    ledger = BudgetLedger(total=1000)
    verdict = verifier.verify(candidate(commit), anchor, BehaviourAware(), ledger=ledger, round=1)
    assert verdict.accepted is accepted
    failed = [g.gate for g in verdict.gates if not g.passed]
    assert set(failing) <= set(failed) and bool(failed) is not accepted  # (a null edit may also trip no_regression)
    assert verdict.measurements["targeted_tasks"] == 6  # only tasks where the behaviour fired
    assert all(s.round == 1 and s.candidate == "candidate/r1-test" for s in ledger.spends)
    assert {s.purpose for s in ledger.spends} == {"baseline", "candidate"}


def test_plan_prints_power_estimate_before_anything_is_spent():
    world = two_task_world()
    source = SimSource(world)
    verifier = Verifier(source, VerificationConfig(rollouts=2, anchor_rollouts=4))
    anchor = verifier.measure_anchor("main", dev(world))
    before = len(source.memo)
    plan = verifier.plan(candidate("fix"), anchor, "behaviour_aware", BudgetLedger(total=100), round=1)
    assert len(source.memo) == before  # nothing ran
    assert plan.rollouts_needed is not None and plan.rollouts_needed > plan.k
    assert "needs k>=" in plan.summary() and "UNDERPOWERED" in plan.summary()


def test_predicted_flips_set_the_predicted_effect():
    world = two_task_world()
    verifier = Verifier(SimSource(world), VerificationConfig(rollouts=4, anchor_rollouts=4))
    anchor = verifier.measure_anchor("main", dev(world))
    plan = verifier.plan(candidate("fix", predicted_flips=["d0", "d1", "d2"]), anchor, round=1)
    assert plan.predicted_effect > 0.05 and plan.rollouts_needed <= 4


def test_verification_stops_before_overspending():
    world = two_task_world()
    source = SimSource(world)
    verifier = Verifier(source, VerificationConfig(rollouts=4))
    anchor = verifier.measure_anchor("main", dev(world), 4)
    from evoharness.errors import BudgetExhausted

    ran = len(source.memo)
    with pytest.raises(BudgetExhausted):
        verifier.verify(candidate("fix"), anchor, ledger=BudgetLedger(total=7), round=1)
    assert len(source.memo) == ran  # not a single rollout was run
    # sequential (looks at 2/4/6/8 seeds): 1 targeted task x 8 seeds x 2 sides, and 2 control tasks on the
    # first look's 2 seeds x 2 sides: 16 + 8 = 24 (reserving the last look for control tasks too fitted 1 task)
    small = BudgetLedger(total=24)
    plan = verifier.plan(candidate("fix"), anchor, ledger=small, round=1)
    assert plan.max_spend() == 24 and len(plan.baseline_requests) + len(plan.candidate_requests) == 48
    verdict = verifier.verify(candidate("fix"), anchor, ledger=small, round=1)
    m = verdict.measurements
    assert small.spent <= 24 and (m["targeted_tasks"], m["control_tasks"], m["max_looks"]) == (1, 2, 4)
    fixed = Verifier(source, VerificationConfig(rollouts=4, sequential=False))
    small = BudgetLedger(total=24)  # fixed design: room for 3 tasks x 4 rollouts x (baseline + candidate)
    verdict = fixed.verify(candidate("fix"), anchor, ledger=small, round=1)
    assert small.spent <= 24 and verdict.measurements["targeted_tasks"] + verdict.measurements[
        "control_tasks"] == 3


def test_fixed_tasks_become_guards_that_veto_a_later_breakage():
    world = two_task_world(p=1.0)
    world.add("breaks_fixed", SimHarness(factor={T: 0.0}, offset={"d0": -0.85}))
    verifier = Verifier(SimSource(world), VerificationConfig(rollouts=4, anchor_rollouts=4))
    book = AnchorBook()
    book.start(verifier.measure_anchor("main", dev(world)))
    out = verifier.evaluate(candidate("fix"), book.current, round=1)
    verifier.reanchor(book, out, "fix", dev(world), round=1)
    assert set(verifier.guards.tasks) == {f"d{i}" for i in range(6)}  # the failures the fix repaired
    later = candidate("breaks_fixed", targets="F2.format_rejected", round=2)
    verdict = verifier.verify(later, book.current, FixedSplit(), make_gates(["aggregate", "guard"]), round=2)
    guard = next(g for g in verdict.gates if g.gate == "guard")
    assert not guard.passed and "d0" in guard.reason


def test_an_observation_refuses_a_nan_or_infinite_score():
    """A NaN score would turn every paired difference, and so every verdict's boundary, into garbage: refused."""
    import math

    import pydantic

    from evoharness.verification.observations import Observation

    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(pydantic.ValidationError, match="finite"):
            Observation(task_id="t", score=bad)
    assert Observation(task_id="t", score=0.5).score == 0.5
