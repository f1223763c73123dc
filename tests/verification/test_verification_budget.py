"""The budget ledger: never overspent, every spend attributed, checkpointable."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.errors import BudgetExhausted
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.sim import SimHarness, SimSource, SimTask, SimWorld
from evoharness.verification.verifier import Verifier
from tests.verification.helpers import T, candidate


@settings(max_examples=200, deadline=None)
@given(total=st.floats(0, 500, allow_nan=False), unit=st.floats(0.1, 5, allow_nan=False),
       asks=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 5)), max_size=40))
def test_ledger_is_never_overspent(total, unit, asks):
    ledger = BudgetLedger(total=total, units_per_rollout=unit)
    for rollouts, rnd in asks:
        before = list(ledger.spends)
        try:
            ledger.charge(rollouts, rnd, f"cand-{rnd}")
        except BudgetExhausted as e:
            assert ledger.spends == before  # a refused spend records nothing
            assert e.needed > e.left
        assert ledger.spent <= total + 1e-6
    assert sum(ledger.by_candidate().values()) == pytest.approx(ledger.spent)


def _world() -> SimWorld:
    tasks = [SimTask(f"d{i}", "dev", 0.9, 0.1, {T: 0.6} if i % 2 else {}) for i in range(10)]
    world = SimWorld(tasks)
    world.add("main", SimHarness())
    world.add("fix", SimHarness(factor={T: 0.2}))
    return world


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(0, 120), k=st.integers(1, 4), rounds=st.integers(1, 4))
def test_verifier_never_overspends_its_ledger(budget, k, rounds):
    world = _world()
    verifier = Verifier(SimSource(world), VerificationConfig(rollouts=k, anchor_rollouts=2))
    anchor = verifier.measure_anchor("main", list(world.tasks))
    ledger = BudgetLedger(total=budget)
    for r in range(1, rounds + 1):
        try:
            verifier.verify(candidate("fix", round=r), anchor, ledger=ledger, round=r)
        except BudgetExhausted:
            pass
        assert ledger.spent <= budget
    assert all(s.candidate == f"candidate/r{s.round}-test" for s in ledger.spends)


def test_ledger_round_trips_through_model_dump_for_checkpoints():
    ledger = BudgetLedger(total=100, units_per_rollout=2)
    ledger.charge(10, 1, "candidate/r1-a", "candidate", tokens=1234)
    ledger.charge(5, 1, "anchor", "anchor")
    restored = BudgetLedger.model_validate(ledger.model_dump())
    assert restored.left == ledger.left == 70
    assert restored.by_candidate() == {(1, "candidate/r1-a"): 20.0, (1, "anchor"): 10.0}
    assert restored.spends[0].tokens == 1234
    with pytest.raises(BudgetExhausted, match="need 72 units, 70 left"):
        restored.charge(36, 2, "candidate/r2-b")
