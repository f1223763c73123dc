"""benchmarks/coupling_real.py's estimator (a fake model with a known coupling) and
benchmarks/verification_power_bound.py's power figures (checked against a simulated z-test)."""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path

import pytest
from scipy.stats import norm

from tests.modules import load_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    return load_file(BENCH / f"{name}.py", name)


@pytest.fixture(scope="module")
def coupling():
    return _load("coupling_real")


@pytest.fixture(scope="module")
def bound():
    return _load("verification_power_bound")


def _u(*parts) -> float:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big") / 2**64


class FakeRoller:
    """A seeded model: a rollout's draw is keyed by (task, seed); the edit keeps the common draw with
    probability ``keep`` per rollout (as the simulation's coupling C), so a pair shares it with C^2."""

    def __init__(self, keep: float, pass_rate: float = 0.5) -> None:
        self.keep, self.pass_rate, self.rollouts = keep, pass_rate, 0

    def __call__(self, harness: Path, task: str, seed: int) -> dict:
        self.rollouts += 1
        who = "" if _u("keep", harness.name, task, seed) < self.keep else harness.name
        draw = _u("draw", who, task, seed)
        return {"sig": f"{who}:{draw}", "score": float(draw < self.pass_rate), "steps": 1,
                "first": f"reply {draw:.6f}", "error": False}


@pytest.mark.parametrize("keep", [1.0, 0.9, 0.5, 0.0])
def test_coupling_estimate_recovers_the_fake_models_coupling(coupling, keep):
    roller = FakeRoller(keep)
    tasks = [f"t{i}" for i in range(30)]
    per_task = coupling.measure(roller, Path("base"), Path("edit"), tasks, list(range(1, 41)), 4, "")
    out = coupling.summarise(per_task)
    tr = out["trajectory"]
    assert tr["null"]["agree"] == tr["null"]["pairs"] > 0  # the same harness on the same seed: the same draw
    assert tr["indep"]["agree"] == 0
    assert tr["C"] == pytest.approx(keep, abs=0.05)
    lo, hi = tr["C_ci"]
    assert lo - 0.02 <= keep <= hi + 0.02
    # scores agree by chance half the time; corrected, they tell the same coupling (more noisily)
    assert out["score"]["a"] == pytest.approx(keep * keep, abs=0.12)


def test_score_agreement_is_uninformative_when_every_rollout_scores_the_same(coupling, capsys):
    roller = FakeRoller(0.9, pass_rate=0.0)
    per_task = coupling.measure(roller, Path("base"), Path("edit"), ["a", "b", "c"], [1, 2, 3, 4], 2, "")
    out = coupling.summarise(per_task)
    assert out["score"]["a"] is None and out["pass_rate"] == 0.0
    assert out["trajectory"]["a"] is not None
    out.update({"model": "fake", "env": "synthetic", "edit": "lesson", "temperature": 0.7, "max_tokens": 8,
                "seeds_per_task": 4, "repeat": 1, "C_per_repeat": []})
    coupling.render(json.loads(json.dumps(out)))
    assert "score agreement is uninformative" in capsys.readouterr().out


def test_coupling_cli_refuses_bad_input_with_one_line(coupling, tmp_path, capsys):
    for argv in (["--seeds", "1"], ["--endpoint", "http://x/v1"], ["--temperature", "3"]):
        with pytest.raises(SystemExit) as e:
            coupling.main(argv)
        assert e.value.code == 2
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit) as e:
        coupling.main(["--from-json", str(bad)])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: --from-json")


def test_prefix_and_signature(coupling):
    assert coupling.prefix("abcdef", "abcxyz") == 3 and coupling.prefix("", "a") == 0
    from evoharness.traces.models import Trajectory

    def traj(answer: str, calls=None) -> Trajectory:
        msg = {"role": "assistant", "content": answer}
        if calls:
            msg["tool_calls"] = [{"id": "random-id", "type": "function",
                                  "function": {"name": "get_order", "arguments": calls}}]
        return Trajectory(id="x", task_id="t", messages=[{"role": "user", "content": "q"}, msg],
                          final_answer=answer)

    assert coupling.signature(traj("a")) != coupling.signature(traj("b"))
    assert coupling.signature(traj("a", '{"order_id": "A-100"}')) != coupling.signature(traj("a", '{"order_id": "B"}'))


def test_power_bound_matches_a_simulated_known_variance_z_test(bound):
    """The ``equal`` tier's power at B is what a z-test on B simulated rollouts rejects at."""
    vs = bound.vs
    from evoharness.verification.sim import SimHarness, SimWorld

    seed, alpha, n = 3, 0.01, 8  # n pairs per prone task
    world = SimWorld.generate(seed, n_dev=80, n_heldout=0, behaviours=vs.BEHAVIOURS, recall=vs.RECALL,
                              false_fire=vs.FALSE_FIRE)
    world.add("h0", SimHarness())
    target = vs.BEHAVIOURS[0]
    world.add("fix", world.harnesses["h0"].child(factor={target: vs._true_factor(world, "h0", target)}))
    prone = [t for t, task in world.tasks.items() if task.split == "dev" and target in task.prone]
    var = sum(bound.task_moments(world, "h0", t)[1] ** 2 + bound.task_moments(world, "fix", t)[1] ** 2
              for t in prone)
    [row] = [r for r in bound.noncentralities(seed, 80) if r["target"] == target]
    predicted = bound.power(row["equal"], 2 * n * len(prone), alpha)
    crit, trials, rejected = norm.ppf(1 - alpha), 300, 0
    rng = random.Random(0)
    for _ in range(trials):
        total = 0.0
        for t in prone:
            for _ in range(n):
                cand, base = world.outcome("fix", t, rng.getrandbits(40)), world.outcome("h0", t, rng.getrandbits(40))
                total += cand.score - base.score
        rejected += total / math.sqrt(n * var) > crit
    assert 0.1 < predicted < 0.9  # informative: neither tail
    assert rejected / trials == pytest.approx(predicted, abs=0.09)  # ~3.5 binomial SEs at 300 trials


def test_power_bound_tiers_are_ordered_and_the_cli_prints_them(bound, capsys):
    rows = [r for w in range(5) for r in bound.noncentralities(w, 80)]
    for r in rows:
        others = max(r["equal"], r["anchor_top1"], r["anchor_top3"], r["anchor_top5"])
        assert r["baseline_known"] >= r["oracle"] >= others
        assert r["gain"] == pytest.approx(0.05, abs=1e-3)
    assert bound.main(["--worlds", "3", "--budgets", "320,640", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    eq = data["tiers"]["equal"]
    assert eq["power"]["320"]["mean"] < eq["power"]["640"]["mean"]
    assert data["tiers"]["oracle"]["budget_for_0.6"] < eq["budget_for_0.6"]
    with pytest.raises(SystemExit) as e:
        bound.main(["--budgets", "x"])
    assert e.value.code == 2


def test_power_bound_intervals_hold_their_estimate_and_narrow_with_more_worlds(bound, capsys):
    """Each mean power and B for 0.6 comes with a 95% interval over worlds (bootstrap of whole worlds) that holds
    the estimate and narrows as worlds are added; no bootstrap draws is refused."""
    widths = []
    for worlds in (3, 12):
        assert bound.main(["--worlds", str(worlds), "--budgets", "320,640", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        for tier in bound.TIERS:
            t = data["tiers"][tier]
            for at in t["power"].values():
                assert at["ci95"][0] <= at["mean"] <= at["ci95"][1]
            lo, hi = t["budget_for_0.6_ci95"]
            assert lo - 1 <= t["budget_for_0.6"] <= hi + 1
        ci = data["tiers"]["equal"]["power"]["320"]["ci95"]
        widths.append(ci[1] - ci[0])
    assert 0 < widths[1] < widths[0]
    with pytest.raises(SystemExit) as e:
        bound.main(["--boot", "0"])
    assert e.value.code == 2


class PrefixCacheRoller:
    """A server whose reply depends on whether the request before it had the same prompt (harness)."""

    def __init__(self) -> None:
        self.last, self.rollouts = None, 0

    def __call__(self, harness: Path, task: str, seed: int) -> dict:
        self.rollouts += 1
        after_same = self.last == harness.name
        self.last = harness.name
        return {"sig": f"{harness.name}:{task}:{after_same}", "score": 0.0, "steps": 1, "first": "", "error": False}


def test_order_check_counts_replies_that_depend_on_the_request_before(coupling):
    out = coupling.order_check(PrefixCacheRoller(), Path("base"), Path("edit"), ["a", "b"], 1)
    assert out == {"tasks": 2, "same_both_after_another_prompt": 2, "same_after_another_vs_after_the_same_prompt": 0}
    out = coupling.order_check(FakeRoller(1.0), Path("base"), Path("edit"), ["a", "b", "c"], 1)
    assert out["same_after_another_vs_after_the_same_prompt"] == out["same_both_after_another_prompt"] == 3
