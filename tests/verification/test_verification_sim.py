"""The decision-quality simulation: its JSON shape, and its ground truth on a tiny run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.verification.sim import SimHarness, SimWorld
from tests.modules import load_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "verification_sim.py"


@pytest.fixture(scope="module")
def bench():
    return load_file(BENCH, "verification_sim")


def test_json_has_every_strategy_with_the_issues_keys(bench, capsys):
    assert bench.main(["--runs", "1", "--runs-24x", "1", "--rounds", "1", "--dev-tasks", "24",
                       "--only", "behaviour_aware", "fixed_split", "fixed_split_24x", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"behaviour_aware", "fixed_split", "fixed_split_24x"}
    for row in data.values():
        assert {"null_false_accept", "harmful_false_accept", "power", "heldout_gain", "rollouts"} <= set(row)
        assert 0 <= row["null_false_accept"] <= 1 and row["rollouts"] > 0
    assert data["fixed_split_24x"]["rollouts"] > 10 * data["fixed_split"]["rollouts"] / 2


def test_true_edit_is_calibrated_to_plus_005_on_its_prone_tasks(bench):
    world = SimWorld.generate(3, n_dev=40, n_heldout=10, behaviours=bench.BEHAVIOURS)
    world.add("h0", SimHarness())
    target = bench.BEHAVIOURS[0]
    r = bench._true_factor(world, "h0", target)
    world.add("fix", SimHarness(factor={target: r}))
    prone = [t for t, task in world.tasks.items() if task.split == "dev" and target in task.prone]
    gain = sum(world.expected("fix", t) - world.expected("h0", t) for t in prone) / len(prone)
    assert gain == pytest.approx(0.05, abs=1e-4)


def test_table_prints_one_row_per_strategy(bench):
    rows = {"a": {"null_false_accept": 0.0, "harmful_false_accept": 0.1, "noisefit_false_accept": 0.2,
                  "power": 0.5, "heldout_gain": 0.01, "per_candidate": 50.0, "rollouts": 100.0,
                  "selection_optimism": None}}
    out = bench.table(rows)
    assert out.splitlines()[2] == "| a | 0.000 | 0.100 | 0.200 | 0.500 | +0.0100 | 50 | 100 | - |"


def test_partial_observation_reports_what_detectors_would_and_scores_follow_the_truth():
    exact = SimWorld.generate(5, n_dev=30, n_heldout=0, behaviours=("b",), prone_share=1.0)
    noisy = SimWorld.generate(5, n_dev=30, n_heldout=0, behaviours=("b",), prone_share=1.0,
                              recall=0.5, false_fire=0.2)
    for w in (exact, noisy):
        w.add("h", SimHarness(), name="h")
    missed = spurious = 0
    for t in exact.tasks:
        for seed in range(20):
            truth, seen = exact.outcome("h", t, seed), noisy.outcome("h", t, seed)
            assert seen.score == truth.score  # the score follows what truly fired
            missed += "b" in truth.fired and "b" not in seen.fired
            spurious += "b" not in truth.fired and "b" in seen.fired
    assert missed > 50 and spurious > 10


def test_coupling_keeps_the_common_draws_in_its_share_of_rollouts():
    """At coupling 1 an edit that changes nothing reproduces its base's rollouts; at 0.7 a pair of
    harnesses shares its draws on about 0.7^2 = 0.49 of the seeds (the others draw afresh)."""
    pairs = []
    for coupling in (1.0, 0.7):
        w = SimWorld.generate(1, n_dev=20, n_heldout=0, behaviours=("b",), prone_share=1.0, common_seeds=True,
                              coupling=coupling)
        w.add("h0", SimHarness())
        w.add("null", w.harnesses["h0"].child())
        same = [w.outcome("h0", t, s).score == w.outcome("null", t, s).score for t in w.tasks for s in range(50)]
        pairs.append(sum(same) / len(same))
    assert pairs[0] == 1.0 and 0.43 < pairs[1] < 0.55


def test_counts_and_exact_bounds_are_reported_and_bad_options_exit_2(bench, capsys):
    assert bench.clopper_pearson_upper(0, 300, one_sided=True) == pytest.approx(1 - 0.05 ** (1 / 300))
    assert bench.clopper_pearson_upper(0, 300) == pytest.approx(0.0122, abs=1e-4)
    assert bench.clopper_pearson_upper(2, 600) == pytest.approx(0.0120, abs=1e-4)
    assert bench.main(["--runs", "1", "--rounds", "1", "--dev-tasks", "24", "--common-seeds", "--coupling", "0.9",
                       "--seed", "5", "--only", "behaviour_aware_sequential", "--set", "max_tasks=12"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| behaviour_aware_sequential "))
    assert "/1 " in row.split("|")[2]  # "accepted/proposed rate [interval]"
    assert "exact (Clopper-Pearson) 95% upper bounds" in out
    assert bench._cell("power", 0.0, None, 0, 0) == "0/0 -"  # nothing proposed: no rate, not a zero one
    for bad in (["--coupling", "0.5"], ["--only", "nope"], ["--jobs", "0"], ["--set", "nope=1"], ["--scale", "0"],
                ["--scale", "nan"],
                ["--set", "sequential_alpha=x"], ["--rounds", "0"], ["--dev-tasks", "0"], ["--dev-tasks", "3"]):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--runs", "1", *bad])
        assert exit_.value.code == 2


def test_scale_buys_more_rollouts_per_candidate_and_undecided_verdicts_are_counted(bench, capsys):
    args = ["--runs", "1", "--rounds", "1", "--dev-tasks", "24", "--only", "behaviour_aware_sequential", "--json"]
    rows = []
    for scale in ("1", "2"):
        assert bench.main([*args, "--scale", scale]) == 0
        rows.append(json.loads(capsys.readouterr().out)["behaviour_aware_sequential"])
    assert rows[1]["per_candidate"] > 1.3 * rows[0]["per_candidate"]
    assert rows[0]["undecided_true_n"] == rows[0]["power_n"] == 1 and rows[0]["undecided_true_k"] in (0, 1)
    res = {"s": {**rows[0], "undecided_true_k": 2, "undecided_true_n": 5, "undecided_null_k": 1,
                 "undecided_null_n": 5, "asked_median": 240.0}}
    assert "s  " in bench.undecided(res) and "true 2/5, null 1/5; median more rollouts asked for a true edit 240" \
        in bench.undecided(res)
    assert bench.undecided({"s": {**rows[0], "undecided_true_k": 0, "undecided_null_k": 0}}) == ""


def test_every_figure_has_an_interval_and_the_24x_split_gets_the_same_seeds(bench, capsys):
    assert bench.main(["--runs", "2", "--rounds", "1", "--dev-tasks", "24",
                       "--only", "behaviour_aware", "fixed_split_24x", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for row in data.values():
        assert row["runs"] == 2
        for key in ("null_false_accept", "harmful_false_accept", "power", "heldout_gain", "rollouts"):
            lo, hi = row[f"{key}_ci"]
            assert lo <= row[key] <= hi
    assert bench.wilson(0, 10)[0] == 0.0 and 0.2 < bench.wilson(0, 10)[1] < 0.35


def test_weights_analysis_oracle_weights_bound_every_weighting():
    """The oracle weights d_t / v_t maximise the noncentrality (Cauchy-Schwarz): no weighting beats them."""
    mod = load_file(BENCH.with_name("verification_weights.py"), "verification_weights")
    row = mod.one_world(2, seeds=40)
    assert row["tasks"] > 3
    assert all(row[name] <= row["oracle"] + 1e-12 for name in mod.WEIGHTINGS)
    assert mod.noncentrality([1.0, 1.0], [0.1, 0.1], [0.5, 0.5]) == pytest.approx(0.2)


def _world_result(asked: list[int], optimism: list[float]) -> dict:
    counts = {k: 1 for k in ("true", "null", "harmful", "noisefit")}
    return {"accepted": {**counts, "null": 0}, "proposed": counts, "undecided": {**counts, "null": 0},
            "asked": asked, "rollouts": 100, "per_candidate": 25.0, "heldout_gain": 0.01, "optimism": optimism,
            "why": {k: {"accepted": 1} if k != "null" else {"gain(futile@1)": 1} for k in counts},
            "spent": {k: 25 for k in counts}}


def test_repeats_pool_the_asked_values_and_the_optimism_readings_not_their_per_repeat_summaries(bench):
    """--repeat N: the median "more rollouts asked" is the median of every value asked in every repeat
    (before: the runs-weighted mean of the repeats' medians, here (200 + 1000) / 2 = 600), and the optimism
    the mean of every re-anchoring's reading (before: weighted by runs, here (0.01 + 0.05) / 2)."""
    first = bench._summarise([_world_result([100, 200, 300], [0.01, 0.01, 0.01])], 1)
    second = bench._summarise([_world_result([1000], [0.05])], 1)
    assert (first["asked_median"], second["asked_median"]) == (200, 1000)
    row = bench.pooled([{"s": first}, {"s": second}])["s"]
    assert row["asked_median"] == 250  # median of 100, 200, 300, 1000
    assert row["selection_optimism"] == pytest.approx((3 * 0.01 + 0.05) / 4)
    assert row["runs"] == 2 and row["power_k"] == 2 and row["power_n"] == 2
    assert row["heldout_gain"] == pytest.approx(0.01)
    assert row["why"]["null"] == {"gain(futile@1)": 2} and row["spent_by_kind"]["true"] == 25


def test_why_counts_every_verdict_and_names_the_gates_that_failed(bench, capsys):
    args = ["--runs", "2", "--rounds", "2", "--dev-tasks", "24", "--seed", "3", "--only",
            "behaviour_aware_sequential", "--repeat", "2"]
    assert bench.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    row = data["behaviour_aware_sequential"]
    for kind, key in bench._KEY.items():  # every proposal has one label; "accepted" is the accepted count
        assert sum(row["why"][kind].values()) == row[f"{key}_n"] > 0
        assert row["why"][kind].get("accepted", 0) == row[f"{key}_k"]
        assert row["spent_by_kind"][kind] > 0
    labels = {label for kind in bench.KINDS for label in row["why"][kind]}
    gates = {"accepted", "behaviour", "no_regression", "attribution", "guard"}
    assert all(part in gates or part.startswith("gain(") for label in labels for part in label.split("+"))
    # pooled over the repeats: the counts of both repeats together
    reps = data["_repeats"]
    assert row["why"]["null"] == {k: sum(r["behaviour_aware_sequential"]["why"]["null"].get(k, 0) for r in reps)
                                  for k in row["why"]["null"]}
    assert bench.main([*args, "--why"]) == 0
    assert "why candidates were turned away" in capsys.readouterr().out
    # a verification stopped by a failed stop gate is labelled so, and no gate's name is lost
    from evoharness.harness_repo.models import GateResult, Verdict

    v = Verdict(candidate="c", commit="c", base="b", accepted=False, strategy="s", reason="r", gates=[
        GateResult(gate="sequential_gain", passed=False, reason="", numbers={"look": 1, "looks": 4,
                                                                            "stopped_by": "no_regression"}),
        GateResult(gate="no_regression", passed=False, reason=""), GateResult(gate="guard", passed=True, reason="")])
    assert bench.reject_reason(v) == "gain(stopped@1)+no_regression"


def test_a_plan_over_the_budget_is_counted_not_verified_as_the_graph_records_it(bench):
    """--set max_tasks=9 sequential_max_factor=5 (a plan of 1,000 rollout units against 960 left) ended the whole
    simulation with a BudgetExhausted traceback; the graph records such a candidate 'not verified' and goes on."""
    strategy, gates, budget, max_tasks, k = bench.strategies(24)["behaviour_aware"]
    out = bench.run_one("behaviour_aware", (strategy, gates, k, max_tasks, k), seed=3, rounds=2, n_dev=24)
    turned = {kind: out["why"][kind].get("not verified (budget)", 0) for kind in bench.KINDS}
    assert all(turned[kind] == out["proposed"][kind] > 0 for kind in bench.KINDS)
    assert sum(out["accepted"].values()) == 0 and out["per_candidate"] == 0
