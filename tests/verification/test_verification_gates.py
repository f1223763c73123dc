"""Table tests for every gate: each row is a scenario a reviewer would recognise."""

from __future__ import annotations

import pytest

from evoharness.harness_repo.models import Verdict
from evoharness.verification.gates import (
    AggregateGate,
    AttributionGate,
    BehaviourGate,
    GainGate,
    GuardGate,
    NoRegressionGate,
    PairedGate,
    default_gates,
    make_gates,
)
from tests.verification.helpers import anchor_of, cell, evidence

TARGETED = ["t1", "t2", "t3", "t4"]
CONTROL = ["c1", "c2", "c3", "c4"]


def side(spec: dict[str, tuple[list[float], list[bool]]], seed0: int = 0):
    return [o for task, (scores, fired) in spec.items() for o in cell(task, scores, fired, seed0)]


def noisy_anchor():
    """Anchor with within-task SD 0.1155 on every task: sigma(4 tasks) = 0.0577, resolvable(k=4) = 0.0866."""
    spec = {t: ([0.4, 0.6, 0.4, 0.6], [True, False, True, False]) for t in TARGETED}
    spec.update({t: ([0.7, 0.9, 0.7, 0.9], [False] * 4) for t in CONTROL})
    return anchor_of(side(spec))


def uniform(tasks, score, fired):
    return {t: ([score] * 4, [fired] * 4) for t in tasks}


def mixed(tasks, scores, fired):
    return {t: (list(scores), list(fired)) for t in tasks}


FIX = mixed(TARGETED, [0.9, 0.9, 0.9, 0.2], [False, False, False, True])
BASE = mixed(TARGETED, [0.2, 0.2, 0.2, 0.9], [True, True, True, False])

CASES = [
    # gate, baseline, candidate, passed, why
    (BehaviourGate(), BASE, FIX, True, "incidence 0.75 -> 0.25"),
    (BehaviourGate(), BASE, BASE, False, "incidence unchanged"),
    (BehaviourGate(), FIX, BASE, False, "incidence rose"),
    (BehaviourGate(), {}, {}, False, "no targeted rollouts"),
    (GainGate(), uniform(TARGETED, 0.5, False), uniform(TARGETED, 0.6, False), True, "+0.10 > 0.0866"),
    (GainGate(), uniform(TARGETED, 0.5, False), uniform(TARGETED, 0.55, False), False, "+0.05 within noise"),
    (GainGate(), uniform(TARGETED, 0.5, False), uniform(TARGETED, 0.3, False), False, "a loss"),
    (AttributionGate(), BASE, FIX, True, "the gain is the behaviour stopping"),
    (AttributionGate(), mixed(TARGETED, [0.2, 0.5, 0.2, 0.5], [True, False, True, False]),
     mixed(TARGETED, [0.4, 0.7, 0.4, 0.7], [True, False, True, False]), False,
     "same firing pattern, +0.2 everywhere: gain from elsewhere"),
    (AttributionGate(), mixed(TARGETED, [0.2, 0.8, 0.2, 0.8], [True, False, True, False]),
     mixed(TARGETED, [0.8, 0.2, 0.8, 0.2], [False, True, False, True]), False,
     "as many rollouts start firing as stop: no gain"),
    (AttributionGate(), BASE, BASE, False, "no gain at all"),
]


@pytest.mark.parametrize("gate, base, cand, passed, why", CASES, ids=[c[4] for c in CASES])
def test_targeted_gates(gate, base, cand, passed, why):
    ev = evidence(side(base), side(cand), TARGETED, anchor=noisy_anchor())
    result = gate.check(ev)
    assert result.passed is passed, (why, result)
    assert result.gate == gate.name and result.numbers


REGRESSION_CASES = [
    (uniform(CONTROL, 0.8, False), uniform(CONTROL, 0.8, False), True, "control unchanged"),
    (uniform(CONTROL, 0.8, False), uniform(CONTROL, 0.75, False), True, "-0.05 is within noise"),
    (uniform(CONTROL, 0.8, False), uniform(CONTROL, 0.6, False), False, "-0.20 is a regression"),
]


@pytest.mark.parametrize("base, cand, passed, why", REGRESSION_CASES, ids=[c[3] for c in REGRESSION_CASES])
def test_no_regression_gate(base, cand, passed, why):
    ev = evidence(side(base), side(cand), TARGETED, CONTROL, anchor=noisy_anchor())
    result = NoRegressionGate().check(ev)
    assert result.passed is passed, why
    assert result.numbers["resolvable"] == pytest.approx(0.0866, abs=1e-3)


def test_no_regression_bound_over_tasks_refuses_harm_that_lands_on_one_control_task():
    """c1 loses 0.12 on every seed, c2-c4 are unchanged: the control mean falls 0.03, inside the allowed
    -0.0866, so the point rule passes. Over tasks the four d_t are (-0.12, 0, 0, 0): SD 0.06, the 95% lower
    bound -0.03 - 2.353 * 0.03 = -0.1006 falls outside. A uniform -0.03 has SD 0 (floored): it passes."""
    base = uniform(CONTROL, 0.8, False)
    one_harmed = {**base, "c1": ([0.68] * 4, [False] * 4)}
    point = NoRegressionGate().check(evidence(side(base), side(one_harmed), TARGETED, CONTROL, anchor=noisy_anchor()))
    assert point.passed and point.numbers["lower_bound"] is None
    gate = NoRegressionGate(alpha=0.05)
    bound = gate.check(evidence(side(base), side(one_harmed), TARGETED, CONTROL, anchor=noisy_anchor()))
    assert not bound.passed and bound.numbers["lower_bound"] == pytest.approx(-0.03 - 2.3534 * 0.03, abs=1e-3)
    assert "lower bound over 4 tasks" in bound.reason
    even = gate.check(evidence(side(base), side(uniform(CONTROL, 0.77, False)), TARGETED, CONTROL,
                               anchor=noisy_anchor()))
    assert even.passed and even.numbers["task_sd"] == 0.005
    # the config reaches the verifier's default gates (the real path: `evoharness verify`, the graph)
    assert [g.alpha for g in make_gates(["no_regression"], no_regression_alpha=0.05)] == [0.05]
    assert [g.alpha for g in default_gates("behaviour_aware") if g.name == "no_regression"] == [None]
    # one control task cannot show "no regression" under the bound (it fell back to the point rule before)
    lone = gate.check(evidence(side({"c1": base["c1"]}), side({"c1": one_harmed["c1"]}), TARGETED, ["c1"],
                               anchor=noisy_anchor()))
    assert not lone.passed and lone.numbers["lower_bound"] is None and "needs at least 2" in lone.reason
    assert NoRegressionGate().check(evidence(side({"c1": base["c1"]}), side({"c1": base["c1"]}), TARGETED, ["c1"],
                                             anchor=noisy_anchor())).passed


def test_no_regression_passes_without_control_tasks_and_says_so():
    result = NoRegressionGate().check(evidence(side(BASE), side(FIX), TARGETED, anchor=noisy_anchor()))
    assert result.passed and result.reason == "no control tasks"


AGG_CASES = [
    (uniform(TARGETED + CONTROL, 0.5, False), uniform(TARGETED, 0.6, False) | uniform(CONTROL, 0.6, False),
     True, "+0.10 everywhere beats 0.0612"),
    (uniform(TARGETED + CONTROL, 0.5, False), uniform(TARGETED, 0.6, False) | uniform(CONTROL, 0.5, False),
     False, "+0.05 overall is within noise"),
    (uniform(TARGETED + CONTROL, 0.5, False), uniform(TARGETED, 0.7, False) | uniform(CONTROL, 0.3, False),
     False, "target up, control down: net zero"),
]


@pytest.mark.parametrize("base, cand, passed, why", AGG_CASES, ids=[c[3] for c in AGG_CASES])
def test_aggregate_gate(base, cand, passed, why):
    ev = evidence(side(base), side(cand), TARGETED, CONTROL, anchor=noisy_anchor())
    result = AggregateGate().check(ev)
    assert result.passed is passed, why
    assert result.numbers["tasks"] == 8


GUARD_CASES = [
    ({"g1": ([0.1] * 4, [True] * 4)}, False, "fails every rollout: veto"),
    ({"g1": ([0.1, 0.1, 0.9, 0.1], [True, True, False, True])}, True, "one healthy rollout: flaky, no veto"),
    ({}, True, "no guard tasks"),
]


@pytest.mark.parametrize("cand, passed, why", GUARD_CASES, ids=[c[2] for c in GUARD_CASES])
def test_guard_gate(cand, passed, why):
    guards = list(cand)
    ev = evidence(side(BASE), side(FIX) + side(cand, 1000), TARGETED, guard=guards, anchor=noisy_anchor())
    assert GuardGate().check(ev).passed is passed, why


def test_paired_gate_mcnemar_on_pass_fail():
    base = mixed(TARGETED, [0.0, 0.0, 1.0, 1.0], [True, True, False, False])
    good = mixed(TARGETED, [1.0, 1.0, 1.0, 1.0], [False] * 4)
    result = PairedGate(alpha=0.05).check(evidence(side(base), side(good), TARGETED, anchor=noisy_anchor()))
    assert result.passed and result.numbers["test"] == "mcnemar_exact"
    assert result.numbers["p_value"] == pytest.approx(1 / 256, abs=1e-6)
    flat = PairedGate().check(evidence(side(base), side(base), TARGETED, anchor=noisy_anchor()))
    assert not flat.passed


def test_gate_table_shows_the_numbers_behind_each_gate():
    ev = evidence(side(BASE), side(FIX), TARGETED, anchor=noisy_anchor())
    gates = [g.check(ev) for g in default_gates("behaviour_aware")]
    table = Verdict(candidate="c", commit="x", base="y", accepted=True, gates=gates).table()
    assert "| gain | pass |" in table and "resolvable=0.0866" in table
    assert "| attribution | pass |" in table and "| behaviour | pass |" in table


def test_default_gate_lists_and_unknown_gate():
    assert [g.name for g in default_gates("behaviour_aware")] == [
        "behaviour", "gain", "no_regression", "attribution", "guard"]
    assert [g.name for g in default_gates("fixed_split")] == ["aggregate", "guard"]
    from evoharness.errors import InputError

    with pytest.raises(InputError, match="unknown gate"):
        make_gates(["vibes"])


def test_paired_gain_judges_the_difference_by_its_own_variance():
    from evoharness.verification.gates import PairedGainGate

    base = mixed(TARGETED, [0.2, 0.8, 0.2, 0.8], [True, False, True, False])
    # the same seeds behave alike except where the behaviour stopped firing: +0.3 mean
    fixed = mixed(TARGETED, [0.8, 0.8, 0.8, 0.8], [False] * 4)
    gate = PairedGainGate(alpha=0.01)
    ok = gate.check(evidence(side(base), side(fixed), TARGETED, anchor=noisy_anchor()))
    assert ok.passed and ok.numbers["mean_diff"] == pytest.approx(0.3)
    assert ok.numbers["pairs"] == 16 and ok.numbers["tasks"] == 4
    # +0.15 whose paired differences go both ways (one rollout worse, two better) is within their noise
    shuffled = mixed(TARGETED, [0.8, 0.2, 0.8, 0.8], [False, True, False, False])
    loose = gate.check(evidence(side(base), side(shuffled), TARGETED, anchor=noisy_anchor()))
    assert not loose.passed and loose.numbers["p_value"] > 0.01
    null = gate.check(evidence(side(base), side(base), TARGETED, anchor=noisy_anchor()))
    assert not null.passed and null.numbers["mean_diff"] == 0
    assert "paired_gain" in {g.name for g in make_gates(["paired_gain"])}


def test_paired_mean_test_uses_each_tasks_variance():
    from evoharness.verification.stats import paired_mean_test

    quiet = paired_mean_test({"a": [0.1, 0.1, 0.1, 0.1], "b": [0.1] * 4}, sd_floor=0.01)
    assert quiet.se == pytest.approx(0.01 / 8 ** 0.5) and quiet.p_value < 1e-6
    noisy = paired_mean_test({"a": [0.1, 0.1, 0.1, 0.1], "b": [0.9, -0.7, 0.9, -0.7]})
    # only task b's spread counts: var = 4 * 0.8533 / 64
    assert noisy.se == pytest.approx((4 * 0.853333 / 64) ** 0.5, rel=1e-4)
    assert 0.1 < noisy.p_value < 0.5
    single = paired_mean_test({"a": [0.2, 0.4], "b": [0.3]})  # b borrows a's variance
    assert single.se == pytest.approx(((2 * 0.02 + 0.02) / 9) ** 0.5)
    assert paired_mean_test({}).p_value == 1.0


def test_attribution_reads_the_cost_of_a_firing_on_the_pairs_where_it_changed():
    """Detectors that miss a firing (seed 0) and report a spurious one (seed 7): a real fix that stops the
    behaviour on 3 of 4 firing seeds still explains its gain. Pooling every firing against every silent
    rollout put the cost at 0.34 (missed failures among the silent, spurious ones among the firing) and
    explained 38% of the gain; the same seed's two sides put it at 0.6 (67%)."""
    truth = [0.2, 0.2, 0.2, 0.2, 0.8, 0.8, 0.8, 0.8]
    reported = [False, True, True, True, False, False, False, True]
    fixed = [0.8, 0.8, 0.8, 0.2, 0.8, 0.8, 0.8, 0.8]
    fixed_reported = [False, False, False, True, False, False, False, True]
    ev = evidence(side(mixed(TARGETED, truth, reported)), side(mixed(TARGETED, fixed, fixed_reported)), TARGETED,
                  k=8)
    result = AttributionGate().check(ev)
    assert result.passed, result.reason
    assert result.numbers["cost_per_firing"] == pytest.approx(0.6)
    assert result.numbers["share"] == pytest.approx(2 / 3, abs=1e-3)


def test_no_regression_does_not_let_a_gain_on_the_target_pay_for_harm_elsewhere():
    """c1 is a control task still prone to the target: it fired on one baseline seed and the edit stopped it
    (+0.6 there). c2-c4 lose 0.16 on every seed. Means over all control rollouts: 0.7625 -> 0.68 (-0.0825),
    inside the allowed -0.0866; on the pairs where the target fired on neither side: -0.128."""
    base = {"c1": ([0.2, 0.8, 0.8, 0.8], [True, False, False, False]), **uniform(["c2", "c3", "c4"], 0.8, False)}
    cand = {"c1": ([0.8, 0.8, 0.8, 0.8], [False] * 4), **uniform(["c2", "c3", "c4"], 0.64, False)}
    result = NoRegressionGate().check(evidence(side(base), side(cand), [], control=CONTROL, anchor=noisy_anchor()))
    assert not result.passed, result.reason
    assert result.numbers["left_out"] == 1 and result.numbers["delta"] == pytest.approx(-0.128)
    assert result.numbers["candidate"] - result.numbers["baseline"] == pytest.approx(-0.0825)
