"""How much a per-task weighting of the paired differences could lift the sequential test's power.

In the simulation's independent-draws world (an API model sampling at temperature: no pairing gain),
the sequential gain test averages the candidate - baseline differences over the targeted tasks with
equal weight per pair, each task its own variance (``stats.paired_mean_test``). Could weighting the
tasks do better? For task weights ``w_t``, per-task effect ``d_t`` and per-rollout variance of the
difference ``v_t``, the test's z grows with the noncentrality per seed

    NC(w) = sum_t w_t d_t / sqrt(sum_t w_t^2 v_t)      (one seed per task and side; x sqrt(seeds))

This script computes NC for the true +0.05 edit of ``verification_sim.py`` (the same world generator,
detectors and calibration) on every task prone to the target, with ``d_t`` and ``v_t`` from
``--seeds`` rollouts per side, for four weightings:

- ``equal``: what the verifier does (one weight per pair);
- ``inverse_variance``: ``1 / v_t`` with the true variances (the best a task-variance weighting can do);
- ``anchor_inverse_variance``: ``1 / s_t^2`` from the anchor's 8 rollouts (what a verifier could use
  without peeking at the test data);
- ``oracle``: ``d_t / v_t``, the most powerful weights, which need the unknown effects.

It prints min / median / max over the worlds of each NC and of its ratio to ``equal``, and the seeds per
task a one-look test at one-sided alpha 0.01 would need for power 0.6 on the tasks prone to the target.

    .venv/bin/python benchmarks/verification_weights.py [--worlds 10] [--seeds 300] [--repeat 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.verification.sim import SimHarness, SimWorld

_spec = importlib.util.spec_from_file_location("verification_sim", Path(__file__).with_name("verification_sim.py"))
vs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vs)

WEIGHTINGS = ("equal", "inverse_variance", "anchor_inverse_variance", "oracle")


def noncentrality(weights: list[float], d: list[float], v: list[float]) -> float:
    return sum(w * x for w, x in zip(weights, d, strict=True)) / math.sqrt(
        sum(w * w * y for w, y in zip(weights, v, strict=True)))


def one_world(seed: int, seeds: int) -> dict[str, float]:
    world = SimWorld.generate(seed, n_dev=80, n_heldout=0, behaviours=vs.BEHAVIOURS, recall=vs.RECALL,
                              false_fire=vs.FALSE_FIRE)
    world.add("h0", SimHarness())
    target = vs.BEHAVIOURS[seed % len(vs.BEHAVIOURS)]
    world.add("fix", world.harnesses["h0"].child(factor={target: vs._true_factor(world, "h0", target)}))
    d, v, anchor_var = [], [], []
    for t, task in world.tasks.items():
        if target not in task.prone:
            continue
        base = [world.outcome("h0", t, s).score for s in range(seeds)]
        cand = [world.outcome("fix", t, s).score for s in range(seeds)]
        anchor = [world.outcome("h0", t, 10**6 + s).score for s in range(8)]
        d.append(statistics.fmean(cand) - statistics.fmean(base))
        v.append(statistics.variance(base) + statistics.variance(cand))
        anchor_var.append(max(statistics.variance(anchor), 0.005**2))
    weights = {"equal": [1.0] * len(d), "inverse_variance": [1 / x for x in v],
               "anchor_inverse_variance": [1 / x for x in anchor_var],
               "oracle": [x / y for x, y in zip(d, v, strict=True)]}
    out = {name: noncentrality(w, d, v) for name, w in weights.items()}
    out["tasks"] = len(d)
    return out


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--worlds", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=300, help="rollouts per task and side for d_t and v_t")
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.worlds < 1 or args.seeds < 2:
        ap.error("--worlds must be at least 1 and --seeds at least 2")
    t0 = time.perf_counter()
    rows = [one_world(r * 1000 + w, args.seeds) for r in range(args.repeat) for w in range(args.worlds)]
    z_needed = 2.326 + 0.253  # one-sided alpha 0.01, power 0.6
    print("| weighting | NC per seed | ratio to equal | seeds per task for power 0.6 (one look, alpha 0.01) |")
    print("|---|---|---|---|")
    for name in WEIGHTINGS:
        nc = [r[name] for r in rows]
        ratio = [r[name] / r["equal"] for r in rows]
        need = [(z_needed / x) ** 2 if x > 0 else math.inf for x in nc]
        print(f"| {name} | {spread(nc, '.3f')} | {spread(ratio, '.2f')} | {spread(need, '.0f')} |")
    print(f"\n{len(rows)} worlds, tasks prone to the target per world {spread([r['tasks'] for r in rows], '.0f')}, "
          f"{args.seeds} rollouts per task and side, independent draws; {time.perf_counter() - t0:.1f}s "
          f"({load_note()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
