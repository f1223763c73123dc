"""Power of the cost verdict's test (the exact sign-flip test of paired step savings) against how many seeds it
spends on the targeted tasks: fixed designs, and a sequential one that adds seeds until the test decides.

Usage: python benchmarks/cost_power.py [--trials N] [--tasks T] [--alpha A] [--coupling C] [--seed S] [--json]

A world per trial, as `tests/verification/test_verification_cost.py` draws them: T targeted tasks, each with a
baseline of 3-7 steps; each rollout adds -1/0/0/+1/+2 steps of noise. A candidate and its baseline on the same seed
share that noise with probability ``--coupling`` (the stand-in is seeded: an edit that changes nothing reproduces its
base's steps, coupling 1; a model sampling at temperature: 0). The edits:

- ``null``: changes nothing (the false-accept rate; must stay <= alpha);
- ``save1``: one step fewer in every rollout; ``save1_half``: one step fewer in half the rollouts.

Designs: ``fixed kK`` -- K seeds per task at once, `CostGate` (the product's gate) on all of them; ``sequential
K0 xL`` -- looks at K0, 2 K0, 4 K0, ... seeds per task (L looks), at each look the sign-flip test on every pair so
far at alpha / L (Bonferroni: the chance that a null edit crosses at any look is at most alpha, whatever the
looks' dependence), stopping at the first crossing, or when the mean saving so far is <= 0 (futility, which can
only turn a later accept into a rejection). Rollouts are counted per candidate, both sides.

Only the cost test is modelled: the behaviour and non-inferiority gates pass here by construction (no score in
this world), so the rates are upper bounds for the whole cost verdict's.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evoharness.verification.stats import sign_flip_test  # noqa: E402

EDITS = {"null": (0.0, 1.0), "save1": (1.0, 1.0), "save1_half": (1.0, 0.5)}  # name -> (steps saved, share)


def draw(rng: random.Random, tasks: int, seeds: int, edit: str, coupling: float) -> list[list[float]]:
    """Per task, the paired savings (baseline - candidate steps) on seeds 0..seeds-1."""
    saved, share = EDITS[edit]
    out = []
    for _ in range(tasks):
        base = rng.randint(3, 7)
        row = []
        for _ in range(seeds):
            noise_b = rng.choice((-1, 0, 0, 1, 2))
            noise_c = noise_b if rng.random() < coupling else rng.choice((-1, 0, 0, 1, 2))
            cut = saved if rng.random() < share else 0.0
            row.append(float((base + noise_b) - (base + noise_c - cut)))
        out.append(row)
    return out


def fixed(rows: list[list[float]], k: int, alpha: float) -> tuple[bool, int]:
    diffs = [d for row in rows for d in row[:k]]
    accepted = sum(diffs) > 0 and sign_flip_test(diffs) <= alpha
    return accepted, 2 * len(diffs)


def sequential(rows: list[list[float]], k0: int, looks: int, alpha: float) -> tuple[bool, int]:
    for look in range(looks):
        k = k0 * 2**look
        diffs = [d for row in rows for d in row[:k]]
        if sum(diffs) <= 0:
            return False, 2 * len(diffs)
        if sign_flip_test(diffs) <= alpha / looks:
            return True, 2 * len(diffs)
    return False, 2 * len(diffs)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--trials", type=int, default=500, help="worlds per edit (the same worlds for every design)")
    ap.add_argument("--tasks", type=int, default=4, help="targeted tasks")
    ap.add_argument("--alpha", type=float, default=0.01, help="the cost test's alpha (cost_alpha)")
    ap.add_argument("--coupling", type=float, default=0.0, help="share of rollouts whose noise both sides share")
    ap.add_argument("--seed", type=int, default=0, help="the first world's seed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    designs = [(f"fixed k{k}", lambda r, k=k: fixed(r, k, args.alpha)) for k in (2, 4, 8, 16, 32)]
    designs += [(f"sequential k{k0} x{n}", lambda r, k0=k0, n=n: sequential(r, k0, n, args.alpha))
                for k0, n in ((2, 3), (2, 4), (2, 5), (4, 3), (4, 4))]
    start = time.process_time()
    rows_out = []
    for edit in EDITS:
        rng = random.Random(args.seed)
        worlds = [draw(rng, args.tasks, 32, edit, args.coupling) for _ in range(args.trials)]
        for name, design in designs:
            got = [design(w) for w in worlds]
            acc = sum(a for a, _ in got)
            lo, hi = wilson(acc, args.trials)
            rows_out.append({"edit": edit, "design": name, "accepted": acc, "trials": args.trials,
                             "rate": acc / args.trials, "low": lo, "high": hi,
                             "rollouts": sum(n for _, n in got) / args.trials})
    if args.json:
        print(json.dumps(rows_out, indent=1))
        return
    print(f"{args.tasks} targeted tasks, alpha {args.alpha}, coupling {args.coupling}, {args.trials} worlds per "
          f"edit, seed {args.seed}; {time.process_time() - start:.0f} CPU-s")
    print("| edit | design | accepted | rate [95%] | rollouts/candidate |")
    print("|---|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['edit']} | {r['design']} | {r['accepted']}/{r['trials']} | {r['rate']:.3f} "
              f"[{r['low']:.3f}, {r['high']:.3f}] | {r['rollouts']:.0f} |")


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    main()
