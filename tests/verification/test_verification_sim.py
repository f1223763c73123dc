"""The decision-quality simulation: its JSON shape, and its ground truth on a tiny run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evoharness.verification.sim import SimHarness, SimWorld

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "verification_sim.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("verification_sim", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
                  "power": 0.5, "heldout_gain": 0.01, "rollouts": 100.0, "selection_optimism": None}}
    out = bench.table(rows)
    assert out.splitlines()[2] == "| a | 0.000 | 0.100 | 0.200 | 0.500 | +0.0100 | 100 | - |"
