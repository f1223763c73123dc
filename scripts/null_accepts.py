"""Null edits through the verifier's sequential score verdict: how often an edit that changes nothing crosses the gain
test's boundary, and how often it is accepted, at each k asked.

Usage: python scripts/null_accepts.py [--k 2 3 8] [--worlds N] [--seed S] [--jobs J] [--set KEY=VALUE ...]

A world per trial (`evoharness.verification.sim.null_world`, which
`tests/verification/test_verification_sequential.py` draws too): 10 dev tasks
prone to the target, 14 healthy, detectors at recall 0.8 and false fires 0.05, every harness drawing afresh (an API
model at temperature), so the baseline's and the candidate's rollouts on a seed are exchangeable. Each world
measures an anchor at 4 rollouts a task and verifies the null edit with `Verifier.verify` (behaviour-aware, control
ratio 2, ``targeted_rank = alone``, the default sequential settings) at each k. The stated rate of the gain test is
``sequential_alpha`` (0.01); the figures come with Wilson 95% intervals.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evoharness.harness_repo.models import Candidate  # noqa: E402
from evoharness.logging import configure_logging  # noqa: E402
from evoharness.verification.budget import BudgetLedger  # noqa: E402
from evoharness.verification.config import VerificationConfig  # noqa: E402
from evoharness.verification.selection import BehaviourAware  # noqa: E402
from evoharness.verification.sim import SimSource, null_world  # noqa: E402
from evoharness.verification.verifier import Verifier  # noqa: E402

TARGET = "F3.repeated_action"


def one(args: tuple[int, int, dict]) -> tuple[int, int]:
    """(gain test crossed, accepted) for the null edit of world ``seed`` at ``k``."""
    seed, k, settings = args
    configure_logging("warning", "console")
    w = null_world(seed)
    verifier = Verifier(SimSource(w), VerificationConfig(rollouts=k, **settings))
    anchor = verifier.measure_anchor("main", list(w.tasks), 4)
    cand = Candidate(branch="candidate/r1-null", commit="null", base="main", round=1, targets=TARGET)
    v = verifier.verify(cand, anchor, BehaviourAware(2.0, "alone"), ledger=BudgetLedger(total=10**4))
    gain = next(g for g in v.gates if g.gate in ("sequential_gain", "gain", "paired_gain"))
    return int(gain.passed), int(v.accepted)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--k", type=int, nargs="+", default=[2, 3, 8], help="k asked (default: 2 3 8)")
    ap.add_argument("--worlds", type=int, default=400, help="null worlds per k (default: 400)")
    ap.add_argument("--seed", type=int, default=0, help="the first world's seed (default: 0)")
    ap.add_argument("--jobs", type=int, default=1, help="worlds verified at a time in worker processes (default: 1)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="verification settings, e.g. sequential_focus=3 (default: none)")
    args = ap.parse_args(argv)
    if args.worlds < 1 or any(k < 1 for k in args.k) or args.jobs < 1:
        ap.error("--worlds, --k and --jobs must be >= 1")
    settings = {}
    for pair in args.set:
        key, _, value = pair.partition("=")
        field = VerificationConfig.model_fields.get(key)
        if field is None or not value:
            ap.error(f"--set {pair}: not a verification setting KEY=VALUE")
        settings[key] = value
    VerificationConfig(**settings)  # a bad value: pydantic's error before any work
    last = args.seed + args.worlds - 1
    print(f"null edits, independent draws, worlds {args.seed}-{last}, settings {settings or '-'}")
    print("| k | gain test crossed | accepted | CPU-s |")
    print("|---|---|---|---|")
    for k in args.k:
        jobs = [(args.seed + i, k, settings) for i in range(args.worlds)]
        start = time.process_time()
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                out = list(pool.map(one, jobs, chunksize=8))
        else:
            out = [one(j) for j in jobs]
        crossed, accepted = (sum(x[i] for x in out) for i in (0, 1))
        cells = [f"{c}/{args.worlds} ({c / args.worlds:.2%} [{lo:.2%}, {hi:.2%}])"
                 for c in (crossed, accepted) for lo, hi in [wilson(c, args.worlds)]]
        print(f"| {k} | {cells[0]} | {cells[1]} | {time.process_time() - start:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
