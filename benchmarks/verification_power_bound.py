"""What power any level-alpha test could reach at budget B with independent draws, in the simulation's worlds.

``verification_sim.py`` measures the verifier's power for the true +0.05 edit; with independent draws
(no common seeds) it is about 0.2 at ~300 rollouts per candidate. Is 0.6 out of reach for the design,
or for any test? This script computes, in the same worlds (``SimWorld.generate`` with the benchmark's
behaviours, 80 dev tasks; the true edit of ``_true_factor``, on the first anchor ``h0``, every behaviour
in turn as the target), the power of one-sided z-tests that know every task's true variance and spend
the whole budget of B rollouts per candidate on the gain (no control, guard or attribution rollouts; no
other gate), with the true per-task effects ``d_t`` and per-rollout SDs ``s_t`` computed exactly from
the world (score = quality or fail, plus N(0, 0.03); clipping at 0 and 1 ignored, it almost never
happens there):

- ``equal``: the verifier's statistic at its best -- candidate and baseline on every dev task prone to
  the target (not only those the anchor saw firing), B/2 rollouts per side spread evenly, each pair
  weighted equally: ``z = sqrt(n) * sum d_t / sqrt(sum 2 s_t^2)`` with n pairs per task;
- ``anchor_topM`` (M = 1, 3, 5): the same on the M prone tasks where the anchor (8 rollouts, as the
  detectors report them: recall 0.8, false fires 0.05) saw the target fire most often -- a design a
  verifier could run, concentrating the budget where a fix of the firing gains most;
- ``oracle``: the best any two-arm test can do -- it knows which task gains most relative to its noise
  and puts all B rollouts there, split between the sides in proportion to their SDs (Neyman):
  ``z = sqrt(B) * max_t d_t / (s_t,base + s_t,cand)``. Any task weighting or allocation has a
  noncentrality at most this (``NC^2 = sum_t N_t d_t^2 / (s_b + s_c)^2 <= B max_t ...``);
- ``baseline_known``: the baseline's means known exactly (no baseline rollouts at all; no verifier can
  have them), all B candidate rollouts on the best task: ``z = sqrt(B) * max_t d_t / s_t,cand``.

Power is ``Phi(z - z_alpha)``. A sequential test that never spends more than B rollouts on a candidate
has at most the fixed-sample power at B (it is a test on a subset of those B rollouts), so the rows bound
the group-sequential default too, at its maximum spend. Printed: per tier, the mean power over every
(world, target) at each B of ``--budgets`` (comparable to the simulation's pooled power) with its 95%
interval over worlds (a percentile bootstrap resampling whole worlds, ``--boot`` draws seeded: a world's edits
share its tasks, so they are not independent) and min / median / max over edits, and the B each needs for mean
power 0.6, with the same interval. The interval is over which worlds were drawn; the powers themselves are exact
given a world.

    .venv/bin/python benchmarks/verification_power_bound.py [--worlds 50] [--seed 0] [--alpha 0.01]
        [--budgets 320,640,960,1600] [--boot 1000] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import ndtr
from scipy.stats import norm

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.verification.sim import SimHarness, SimWorld

_spec = importlib.util.spec_from_file_location("verification_sim", Path(__file__).with_name("verification_sim.py"))
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)

TOPS = (1, 3, 5)
TIERS = ("equal", *(f"anchor_top{m}" for m in TOPS), "oracle", "baseline_known")


def task_moments(world: SimWorld, commit: str, task_id: str) -> tuple[float, float]:
    """Mean and SD of one rollout's score (exact; clipping ignored)."""
    t = world.tasks[task_id]
    ok = 1.0
    for b in t.prone:
        ok *= 1.0 - world.fire_prob(commit, task_id, b)
    mean = world.expected(commit, task_id)
    var = ok * (1.0 - ok) * (t.quality - t.fail) ** 2 + world.noise_sd ** 2
    return mean, math.sqrt(var)


def noncentralities(seed: int, n_dev: int) -> list[dict[str, float]]:
    """Per target behaviour of world ``seed``: the tiers' noncentrality per sqrt(rollout per candidate)."""
    world = SimWorld.generate(seed, n_dev=n_dev, n_heldout=0, behaviours=vs.BEHAVIOURS, recall=vs.RECALL,
                              false_fire=vs.FALSE_FIRE)
    world.add("h0", SimHarness())
    out = []
    for target in vs.BEHAVIOURS:
        prone = [t for t, task in world.tasks.items() if task.split == "dev" and target in task.prone]
        if not prone:
            continue
        world.add("fix", world.harnesses["h0"].child(factor={target: vs._true_factor(world, "h0", target)}))
        d, sb, sc = [], [], []
        for t in prone:
            mb, s_b = task_moments(world, "h0", t)
            mc, s_c = task_moments(world, "fix", t)
            d.append(mc - mb)
            sb.append(s_b)
            sc.append(s_c)
        # per unit budget: equal needs B/(2T) pairs per task -> z = sqrt(B/(2T)) sum d / sqrt(sum (sb^2+sc^2))
        equal = sum(d) / math.sqrt(sum(x * x + y * y for x, y in zip(sb, sc, strict=True))) / math.sqrt(2 * len(d))
        # the anchor's 8 rollouts (seeds as the simulation's first anchor), as the detectors report them
        seen = [sum(target in world.outcome("h0", t, s).fired for s in range(vs.K)) for t in prone]
        order = sorted(range(len(prone)), key=lambda i: -seen[i])  # stable: ties keep the task order
        top = {}
        for m in TOPS:
            pick = order[:m]
            top[f"anchor_top{m}"] = sum(d[i] for i in pick) / math.sqrt(
                sum(sb[i] ** 2 + sc[i] ** 2 for i in pick)) / math.sqrt(2 * len(pick))
        oracle = max(x / (y + z) for x, y, z in zip(d, sb, sc, strict=True))
        known = max(x / z for x, z in zip(d, sc, strict=True))
        out.append({"world": seed, "target": target, "tasks": len(d), "gain": statistics.fmean(d),
                    "equal": equal, **top, "oracle": oracle, "baseline_known": known})
    return out


def power(nc_unit: float, budget: float, alpha: float) -> float:
    return float(norm.cdf(nc_unit * math.sqrt(budget) - norm.ppf(1 - alpha)))


def budget_for(rows: list[dict], tier: str, alpha: float, target: float = 0.6) -> float:
    """The smallest B (to 1 rollout) whose mean power over ``rows`` reaches ``target``."""
    def mean_power(b: float) -> float:
        return statistics.fmean(power(r[tier], b, alpha) for r in rows)

    lo, hi = 1.0, 2.0
    while mean_power(hi) < target:
        hi *= 2
        if hi > 1e7:
            return math.inf
    while hi - lo > 1:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_power(mid) < target else (lo, mid)
    return hi


def world_weights(rows: list[dict], draws: int, seed: int = 0) -> np.ndarray:
    """(draws x rows) bootstrap weights resampling whole worlds: a row's weight is how often its world was drawn."""
    worlds = sorted({r["world"] for r in rows})
    index = {w: i for i, w in enumerate(worlds)}
    of_row = np.asarray([index[r["world"]] for r in rows])
    picks = np.random.default_rng(seed).integers(0, len(worlds), size=(draws, len(worlds)))
    counts = np.stack([np.bincount(p, minlength=len(worlds)) for p in picks])
    return counts[:, of_row].astype(float)


def boot_ci(rows: list[dict], tier: str, budgets: list[float], alpha: float, weights: np.ndarray,
            target: float = 0.6) -> tuple[dict[str, list[float]], list[float]]:
    """95% percentile intervals of the mean power at each budget and of the B for mean power ``target``."""
    nc = np.asarray([r[tier] for r in rows])
    z = norm.ppf(1 - alpha)
    total = weights.sum(axis=1)

    def mean_power(b):  # b: one budget, or one per bootstrap draw
        return (weights * ndtr(nc[None, :] * np.sqrt(np.asarray(b, dtype=float)).reshape(-1, 1) - z)).sum(1) / total

    at = {f"{b:g}": [float(x) for x in np.percentile(mean_power(b), [2.5, 97.5])] for b in budgets}
    lo, hi = np.ones(len(weights)), np.full(len(weights), 2.0)
    while (short := mean_power(hi) < target).any() and hi.max() <= 1e7:
        hi[short] *= 2
    for _ in range(40):  # bisection to well under a rollout
        mid = (lo + hi) / 2
        up = mean_power(mid) < target
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    hi[mean_power(hi) < target] = math.inf
    return at, [float(x) for x in np.percentile(hi, [2.5, 97.5])]


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--worlds", type=int, default=50, help="worlds per repeat (default 50)")
    ap.add_argument("--seed", type=int, default=0, help="first world's seed (repeat r adds 1000 r)")
    ap.add_argument("--dev-tasks", type=int, default=80, help="dev tasks per world (the simulation's default 80)")
    ap.add_argument("--alpha", type=float, default=0.01, help="one-sided level (default 0.01, sequential_alpha)")
    ap.add_argument("--budgets", default=f"{vs.BUDGET},{2 * vs.BUDGET},{3 * vs.BUDGET},1600",
                    help="rollouts per candidate, comma-separated (default 320,640,960,1600)")
    ap.add_argument("--boot", type=int, default=1000,
                    help="bootstrap draws over worlds for the 95%% intervals (seeded)")
    ap.add_argument("--json", action="store_true")
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    try:
        budgets = [float(x) for x in args.budgets.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--budgets takes numbers separated by commas, not {args.budgets!r}")
    if not budgets or min(budgets) <= 0:
        ap.error("--budgets needs at least one positive number")
    if args.worlds < 1 or args.dev_tasks < vs.MIN_DEV_TASKS or not 0.0 < args.alpha < 0.5 or args.boot < 1:
        ap.error(f"--worlds and --boot must be >= 1, --dev-tasks >= {vs.MIN_DEV_TASKS}, --alpha in (0, 0.5)")
    t0 = time.process_time()
    repeats = [[row for w in range(args.worlds) for row in noncentralities(args.seed + 1000 * r + w, args.dev_tasks)]
               for r in range(args.repeat)]
    rows = [row for rep in repeats for row in rep]
    result = {"alpha": args.alpha, "worlds": args.worlds * args.repeat, "edits": len(rows),
              "tasks_per_edit": statistics.fmean(r["tasks"] for r in rows),
              "mean_gain": statistics.fmean(r["gain"] for r in rows), "tiers": {}}
    weights = world_weights(rows, args.boot)
    for tier in TIERS:
        at = {}
        ci, budget_ci = boot_ci(rows, tier, budgets, args.alpha, weights)
        for b in budgets:
            p = [power(r[tier], b, args.alpha) for r in rows]
            at[f"{b:g}"] = {"mean": statistics.fmean(p), "ci95": ci[f"{b:g}"], "min": min(p),
                            "median": statistics.median(p), "max": max(p),
                            "per_repeat": [statistics.fmean(power(r[tier], b, args.alpha) for r in rep)
                                           for rep in repeats]}
        result["tiers"][tier] = {"power": at, "budget_for_0.6": budget_for(rows, tier, args.alpha),
                                 "budget_for_0.6_ci95": budget_ci,
                                 "budget_for_0.6_per_repeat": [budget_for(rep, tier, args.alpha) for rep in repeats]}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"independent draws, one-sided alpha {args.alpha:g}, known variances, all of B on the gain test; "
          f"{len(rows)} true edits ({result['worlds']} worlds from seed {args.seed}, every target), "
          f"{result['tasks_per_edit']:.1f} prone dev tasks per edit, mean true gain {result['mean_gain']:+.4f}; "
          f"[95% interval over worlds, {args.boot} bootstrap draws]\n")
    print("| test | " + " | ".join(f"power at B = {b:g} (mean [95%]; min / median / max)" for b in budgets)
          + " | B for mean power 0.6 [95%] |")
    print("|---|" + "---|" * (len(budgets) + 1))
    for tier in TIERS:
        t = result["tiers"][tier]
        cells = []
        for b in budgets:
            at = t["power"][f"{b:g}"]
            cells.append(f"**{at['mean']:.3f}** [{at['ci95'][0]:.3f}, {at['ci95'][1]:.3f}]; {at['min']:.3f} / "
                         f"{at['median']:.3f} / {at['max']:.3f}")
        lo, hi = t["budget_for_0.6_ci95"]
        print(f"| {tier} | " + " | ".join(cells) + f" | {t['budget_for_0.6']:.0f} [{lo:.0f}, {hi:.0f}] |")
    if args.repeat > 1:
        for tier in TIERS:
            t = result["tiers"][tier]
            print(f"{tier} over repeats: power at B = {budgets[0]:g} "
                  f"{spread(t['power'][f'{budgets[0]:g}']['per_repeat'])}; "
                  f"B for 0.6 {spread(t['budget_for_0.6_per_repeat'], '.0f')}")
    print(f"\n{time.process_time() - t0:.1f} CPU-s ({load_note()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
