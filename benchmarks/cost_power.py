"""Power of the cost verdict's test (the exact sign-flip test of paired step savings) against how many seeds it
spends on the targeted tasks: fixed designs, and a sequential one that adds seeds until the test decides.

Usage: python benchmarks/cost_power.py [--trials N] [--tasks T] [--alpha A] [--coupling C] [--seed S] [--verdict]
    [--control K] [--edits E ...] [--designs D ...] [--json]

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

``--verdict`` runs the product's whole cost verdict instead (`Verifier.verify`, the cost gates, a ledger counting
the rollouts it spends) on worlds that also carry scores, blocks and ``--control`` anchor-healthy control tasks:
a rollout of a targeted task is blocked with chance 0.8 and scores 0.5, 0.75 or 1.0; a control task scores 1.0,
unblocked. A rollout an edit cuts is unblocked and a step shorter. A coupled pair shares its steps' noise, score and
block. Edits: ``null``, ``save1``, ``save1_half`` as above, and ``harmful``: a step saved in every rollout but the
score 0.10 lower on the targeted tasks, twice the non-inferiority margin (must be refused). Designs: ``fixed k4``
(`verification.sequential = false`), ``fixed k8`` (the same at k = 8: what a run at the default k = 4 ran before
the sequential cost verdict, every seed of every selected task at once), ``sequential`` (the default settings at
k = 4: four looks up to 2 x k, at 2/4/6/8 seeds a task, the cost test on the looks' joint sign-flip boundary,
O'Brien-Fleming), ``sequential 4 looks`` (the same settings named), ``sequential 8 looks`` (eight looks up to 3 x k, at
2/3/4/6/8/9/10/12: the default for part of the twenty-seventh session, reverted), ``sequential pocock`` (those four
looks, `sequential_spending = pocock`) and ``sequential to 16`` (four looks, `sequential_max_factor = 4`: at
4/8/12/16). Rollouts are the ledger's: both sides, control tasks included.
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


VERDICT_EDITS = {"null": (0.0, 1.0, 0.0), "save1": (1.0, 1.0, 0.0), "save1_half": (1.0, 0.5, 0.0),
                 "harmful": (1.0, 1.0, 0.10)}  # name -> (steps saved, share of rollouts, score lost)


class World:
    """One world of ``--verdict``: an observation source answering each request by commit, task and rollout index
    (the base commit, or the candidate's edit), and the anchor it was selected from."""

    BASE, CAND = "a" * 40, "c" * 40

    def __init__(self, rng: random.Random, tasks: int, control: int, seeds: int, edit: str, coupling: float) -> None:
        from evoharness.traces.cost import BLOCKED

        saved, share, lost = VERDICT_EDITS[edit]
        self.table: dict[tuple[str, str, int], tuple[float, int, bool]] = {}
        for t in range(tasks):
            base = rng.randint(3, 7)
            for i in range(seeds):
                nb, sb, bb = rng.choice((-1, 0, 0, 1, 2)), rng.choice((0.5, 0.75, 1.0)), rng.random() < 0.8
                nc, sc, bc = (nb, sb, bb) if rng.random() < coupling else (
                    rng.choice((-1, 0, 0, 1, 2)), rng.choice((0.5, 0.75, 1.0)), rng.random() < 0.8)
                cut = rng.random() < share and saved > 0
                self.table[self.BASE, f"t{t}", i] = (sb, base + nb, bb)
                self.table[self.CAND, f"t{t}", i] = (max(0.0, sc - lost), base + nc - (1 if cut else 0),
                                                     bc and not cut)
        for t in range(control):
            base = rng.randint(3, 7)
            for i in range(seeds):
                self.table[self.BASE, f"c{t}", i] = self.table[self.CAND, f"c{t}", i] = (1.0, base, False)
        self.blocked = BLOCKED

    def _obs(self, commit: str, task: str, i: int, seed: int, split: str = "dev"):
        from evoharness.verification.observations import Observation

        score, steps, blocked = self.table[commit, task, i]
        return Observation(task_id=task, rollout=i, seed=seed, score=score, steps=steps, split=split,
                           fired=frozenset({self.blocked} if blocked else ()), healthy=task.startswith("c"))

    def anchor(self):
        from evoharness.verification.anchors import Anchor

        tasks = sorted({t for _, t, _ in self.table})
        obs = [self._obs(self.BASE, t, i, i) for t in tasks for i in range(4)]
        return Anchor.from_observations(self.BASE, obs, 4)

    def pending(self, requests, ledger) -> int:
        return len(requests)

    def observe(self, requests, ledger):
        return [self._obs(r.harness_commit, r.task_id, r.rollout, r.seed, r.split) for r in requests], len(requests)


VERDICT_DESIGNS = {  # name -> settings beside k = 4 (the default run.rollouts)
    "fixed k4": {"sequential": False},
    "fixed k8": {"sequential": False, "rollouts": 8},
    "sequential": {},
    "sequential 4 looks": {"sequential_looks": 4, "sequential_max_factor": 2.0},  # the defaults, named
    "sequential 8 looks": {"sequential_looks": 8, "sequential_max_factor": 3.0},  # default for a day, reverted
    "sequential pocock": {"sequential_spending": "pocock", "sequential_looks": 4, "sequential_max_factor": 2.0},
    "sequential to 16": {"sequential_looks": 4, "sequential_max_factor": 4.0},
}


def verdicts(worlds: list[World], design: str, alpha: float) -> list[tuple[bool, bool, int]]:
    """The product's cost verdict on each world under ``design``: (accepted, its cost test passed, rollouts the
    ledger paid)."""
    from evoharness.harness_repo.models import Candidate
    from evoharness.logging import configure_logging
    from evoharness.verification.budget import BudgetLedger
    from evoharness.verification.config import VerificationConfig
    from evoharness.verification.verifier import Verifier

    configure_logging("WARNING")
    cfg = VerificationConfig(**{"rollouts": 4, "cost_alpha": alpha, **VERDICT_DESIGNS[design]})
    out = []
    for w in worlds:
        cand = Candidate(branch="candidate/r1-cost", commit=World.CAND, base=World.BASE, round=0,
                         targets=w.blocked)
        ledger = BudgetLedger(total=10**6)
        v = Verifier(w, cfg).verify(cand, w.anchor(), ledger=ledger)
        out.append((v.accepted, any(g.gate == "cost" and g.passed for g in v.gates), ledger.rollouts))
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def exact_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson: the two-sided exact ``level`` interval of a binomial rate, k of n."""
    from scipy.special import betaincinv

    tail = (1 - level) / 2
    low = float(betaincinv(k, n - k + 1, tail)) if k else 0.0
    high = float(betaincinv(k + 1, n - k, 1 - tail)) if k < n else 1.0
    return low, high


def main() -> None:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--trials", type=int, default=500, help="worlds per edit (the same worlds for every design)")
    ap.add_argument("--tasks", type=int, default=4, help="targeted tasks")
    ap.add_argument("--alpha", type=float, default=0.01, help="the cost test's alpha (cost_alpha)")
    ap.add_argument("--coupling", type=float, default=0.0, help="share of rollouts whose noise both sides share")
    ap.add_argument("--seed", type=int, default=0, help="the first world's seed")
    ap.add_argument("--verdict", action="store_true", help="the product's whole cost verdict (Verifier) per world: "
                    "fixed k8 against the sequential designs, with scores, blocks and control tasks")
    ap.add_argument("--control", type=int, default=8, help="--verdict: anchor-healthy control tasks per world")
    ap.add_argument("--edits", nargs="+", metavar="EDIT", help="--verdict: only these edits (default: all of "
                    f"{', '.join(VERDICT_EDITS)})")
    ap.add_argument("--designs", nargs="+", metavar="DESIGN", help="--verdict: only these designs (default: all of "
                    f"{', '.join(repr(d) for d in VERDICT_DESIGNS)})")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for name, given, known in (("--edits", args.edits, VERDICT_EDITS), ("--designs", args.designs, VERDICT_DESIGNS)):
        unknown = [x for x in given or () if x not in known]
        if unknown:
            ap.error(f"{name}: unknown {', '.join(map(repr, unknown))} (choose from {', '.join(map(repr, known))})")
    if args.trials < 1 or args.tasks < 1 or args.control < 0:
        ap.error("--trials and --tasks must be >= 1, --control >= 0")
    if args.verdict:
        return verdict_table(args)
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


def verdict_table(args) -> None:
    start = time.process_time()
    rows_out = []
    for edit in args.edits or VERDICT_EDITS:
        rng = random.Random(args.seed)
        worlds = [World(rng, args.tasks, args.control, 32, edit, args.coupling) for _ in range(args.trials)]
        for design in args.designs or VERDICT_DESIGNS:
            got = verdicts(worlds, design, args.alpha)
            acc, cost = sum(a for a, _, _ in got), sum(c for _, c, _ in got)
            lo, hi = wilson(acc, args.trials)
            elo, ehi = exact_interval(acc, args.trials)
            spent = [n for _, _, n in got]
            mean = sum(spent) / len(spent)
            sd = math.sqrt(sum((n - mean) ** 2 for n in spent) / max(1, len(spent) - 1))
            half = 1.96 * sd / math.sqrt(len(spent))
            rows_out.append({"edit": edit, "design": design, "accepted": acc, "trials": args.trials,
                             "rate": acc / args.trials, "low": lo, "high": hi, "exact_low": elo, "exact_high": ehi,
                             "cost_passed": cost, "rollouts": mean,
                             "rollouts_low": mean - half, "rollouts_high": mean + half})
    if args.json:
        print(json.dumps(rows_out, indent=1))
        return
    print(f"the whole cost verdict: {args.tasks} targeted + {args.control} control tasks, alpha {args.alpha} "
          f"(cost_alpha), coupling {args.coupling}, {args.trials} worlds per edit, seed {args.seed}; "
          f"{time.process_time() - start:.0f} CPU-s")
    print("| edit | design | accepted | rate [Wilson 95%] | exact 95% (Clopper-Pearson) | cost test passed | "
          "rollouts/candidate [95%] |")
    print("|---|---|---|---|---|---|---|")
    for r in rows_out:
        print(f"| {r['edit']} | {r['design']} | {r['accepted']}/{r['trials']} | {r['rate']:.4f} "
              f"[{r['low']:.4f}, {r['high']:.4f}] | [{r['exact_low']:.4f}, {r['exact_high']:.4f}] | "
              f"{r['cost_passed']}/{r['trials']} | {r['rollouts']:.1f} [{r['rollouts_low']:.1f}, "
              f"{r['rollouts_high']:.1f}] |")


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    main()
