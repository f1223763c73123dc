"""Noise model and paired statistics."""

from __future__ import annotations

import math
import random

import pytest

from evoharness.verification.noise import (
    composite_sigma,
    noise_table,
    resolvable_difference,
    rollouts_needed,
    table_value,
)
from evoharness.verification.observations import by_task
from evoharness.verification.stats import mcnemar_exact, paired_bootstrap, paired_test
from tests.verification.helpers import ob


def test_papers_table_is_reproduced_at_its_rounding():
    rows = noise_table(0.023, [1, 2, 4, 8, 16])
    assert [r["table"] for r in rows] == [0.07, 0.05, 0.035, 0.025, 0.02]
    assert rows[0]["resolvable"] == pytest.approx(0.069)
    assert rows[2]["resolvable"] == pytest.approx(0.0345)


@pytest.mark.parametrize("x, want", [(0.069, 0.07), (0.07, 0.07), (0.0701, 0.075), (0.01725, 0.02)])
def test_table_value_rounds_up_to_next_005(x, want):
    assert table_value(x) == want


def test_resolvable_halves_when_rollouts_quadruple():
    assert resolvable_difference(0.1, 16) == pytest.approx(resolvable_difference(0.1, 4) / 2)
    with pytest.raises(ValueError):
        resolvable_difference(0.1, 0)


def test_sigma_estimated_from_repeated_rollouts_recovers_true_noise():
    rng = random.Random(1)
    obs = [ob(f"t{t}", s, 0.5 + rng.gauss(0, 0.2)) for t in range(40) for s in range(8)]
    groups = by_task(obs)
    tasks = sorted(groups)
    sigma = composite_sigma(groups, tasks)
    assert sigma == pytest.approx(0.2 / math.sqrt(40), rel=0.1)  # per-task SD over sqrt(#tasks)


def test_sigma_falls_back_when_cell_has_no_repeats_and_respects_floor():
    groups = by_task([ob("a", 0, 0.1), ob("b", 0, 0.9), ob("b", 1, 0.5), ob("b", 2, 0.7)])
    assert composite_sigma(groups, ["a"], fallback_tasks=["a", "b"]) == pytest.approx(0.2)
    assert composite_sigma(groups, ["a"], floor=0.01) == 0.01


def test_rollouts_needed_is_smallest_k_that_resolves_the_effect():
    k = rollouts_needed(0.05, 0.023)
    assert resolvable_difference(0.023, k) <= 0.05 < resolvable_difference(0.023, k - 1)
    assert k == 2


@pytest.mark.parametrize("improved, worsened, p", [(0, 0, 1.0), (5, 0, 1 / 32), (3, 3, 0.65625)])
def test_mcnemar_exact(improved, worsened, p):
    assert mcnemar_exact(improved, worsened) == pytest.approx(p)


def test_paired_test_picks_mcnemar_for_pass_fail_and_bootstrap_for_graded():
    binary = paired_test([0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1])
    assert binary.kind == "mcnemar_exact" and binary.p_value == pytest.approx(1 / 32)
    graded = paired_test([0.2, 0.3, 0.25, 0.4] * 5, [0.3, 0.45, 0.3, 0.5] * 5)
    assert graded.kind == "paired_bootstrap" and graded.p_value < 0.01
    null = paired_test([0.2, 0.6, 0.4, 0.5] * 5, [0.6, 0.2, 0.5, 0.4] * 5)
    assert null.p_value > 0.3


def test_paired_bootstrap_constant_differences():
    assert paired_bootstrap([0.1, 0.1]) == 0.0
    assert paired_bootstrap([-0.1, -0.1]) == 1.0
