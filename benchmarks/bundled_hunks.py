"""Bundled harmful hunks and null edits: how often does verification accept them?

Each try is a fresh simulated world (`evoharness.verification.sim`, its own seed) whose anchor is
measured on its dev tasks; one candidate of each kind targets the most common failure signal and is
verified behaviour-aware, once judging the candidate as a whole (the gates alone) and once hunk by
hunk (`evoharness.verification.hunks`, leave-one-out per hunk):

- bundle:  a real fix (the targeted behaviour fires 10x less) bundled with a harmful hunk that costs
           0.10 on the tasks that need several steps (those prone to the targeted behaviour), as a
           lesson "Do not call any tools. Answer immediately." would;
- fixnull: the real fix bundled with a hunk that changes nothing;
- null2:   two hunks that change nothing; null1: one such hunk;
- fix2:    two independent halves of a fix (each cuts the firing by 3x): both must be kept;
- fix1:    the real fix alone.

Prints accepted/tries per kind and mode, and the true held-out gain (expected score, no noise) of
what each mode accepted.

    .venv/bin/python benchmarks/bundled_hunks.py [--tries 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from evoharness.harness_repo.models import Candidate
from evoharness.logging import configure_logging
from evoharness.verification.config import VerificationConfig
from evoharness.verification.hunks import Part, StaticParts
from evoharness.verification.selection import BehaviourAware
from evoharness.verification.sim import SimHarness, SimSource, SimWorld
from evoharness.verification.verifier import Verifier

BEHAVIOURS = ("F3.repeated_action", "F2.format_rejected", "F3.no_delivery")
KINDS = ("bundle", "fixnull", "null2", "null1", "fix2", "fix1")
HARM = 0.10


Effects = tuple[dict[str, float] | None, dict[str, float] | None]  # (firing factors, score offsets)


def _kinds(world: SimWorld, target: str) -> dict[str, list[Effects]]:
    """kind -> the effects of each of the candidate's hunks."""
    harm = {t.id: -HARM for t in world.tasks.values() if target in t.prone}
    fix, half, nothing = ({target: 0.1}, None), ({target: 1 / 3}, None), (None, None)
    return {"bundle": [fix, (None, harm)], "fixnull": [fix, nothing], "null2": [nothing, nothing], "null1": [nothing],
            "fix2": [half, half], "fix1": [fix]}


def _register(world: SimWorld, name: str, hunks: list[Effects], seed: int) -> list[Part]:
    """Register the candidate ``name`` (every hunk), and per hunk the candidate without it and it alone."""
    main = world.harnesses["main"]

    def build(effects: list[Effects]) -> SimHarness:
        h = main
        for factor, offset in effects:
            h = h.child(factor, offset)
        return h

    world.add(name, build(hunks), name=f"{name}-{seed}")
    parts = []
    for i in range(len(hunks)):
        without, alone = f"{name}-without-{i + 1}", f"{name}-only-{i + 1}"
        world.add(without, build([h for j, h in enumerate(hunks) if j != i]), name=f"{without}-{seed}")
        world.add(alone, build([hunks[i]]), name=f"{alone}-{seed}")
        parts.append(Part(label=f"{name}#{i + 1}", without=without, alone=alone))
    return parts


def trial(seed: int, judge: bool, kinds: tuple[str, ...] = KINDS) -> dict[str, dict]:
    """One world: verify one candidate of each kind; {kind: {accepted, reason, heldout_gain}}."""
    world = SimWorld.generate(seed, n_dev=40, n_heldout=40, behaviours=BEHAVIOURS, prone_share=0.3)
    world.add("main", SimHarness(), name=f"main-{seed}")
    parts = StaticParts()
    verifier = Verifier(SimSource(world), VerificationConfig(rollouts=4, anchor_rollouts=4),
                        seed=seed, hunks=parts if judge else None)
    dev = [t for t, task in world.tasks.items() if task.split == "dev"]
    anchor = verifier.measure_anchor("main", dev, round=0)
    fired: dict[str, int] = {}
    for o in anchor.observations:
        for s in o.fired:
            fired[s] = fired.get(s, 0) + 1
    target = max(sorted(fired), key=lambda s: fired[s])
    out = {}
    for kind, hunks in _kinds(world, target).items():
        if kind not in kinds:
            continue
        cand = kind
        parts.by_commit[cand] = _register(world, cand, hunks, seed)
        candidate = Candidate(branch=f"candidate/r1-{kind}", commit=cand, base="main", round=1, targets=target)
        verdict = verifier.verify(candidate, anchor, BehaviourAware(0.5), round=1)
        gain = world.expected_mean(cand, "heldout") - world.expected_mean("main", "heldout")
        out[kind] = {"accepted": verdict.accepted, "reason": verdict.reason, "heldout_gain": round(gain, 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--tries", type=int, default=20, help="worlds (seeds 0..N-1)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    configure_logging("warning", "console")
    if args.tries < 1:
        print("error: --tries must be at least 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result: dict[str, dict] = {}
    for mode, judge in (("whole", False), ("per_hunk", True)):
        rows: dict[str, dict] = {k: {"accepted": 0, "tries": 0, "heldout_gain_accepted": []} for k in KINDS}
        for seed in range(args.tries):
            print(f"\r{mode}: try {seed + 1}/{args.tries}", end="", file=sys.stderr, flush=True)
            for kind, r in trial(seed, judge).items():
                row = rows[kind]
                row["tries"] += 1
                if r["accepted"]:
                    row["accepted"] += 1
                    row["heldout_gain_accepted"].append(r["heldout_gain"])
        print(file=sys.stderr)
        result[mode] = rows
    wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({"tries": args.tries, "wall_s": round(wall, 2), "modes": result}, indent=1))
        return 0
    print(f"accepted / tries ({args.tries} worlds, k=4, behaviour-aware; {wall:.1f}s)")
    print(f"{'kind':8} {'whole':>8} {'per_hunk':>9}   true held-out gain of the accepted (whole / per_hunk)")
    for kind in KINDS:
        w, h = result["whole"][kind], result["per_hunk"][kind]
        means = [f"{sum(g) / len(g):+.4f}" if (g := r["heldout_gain_accepted"]) else "-" for r in (w, h)]
        print(f"{kind:8} {w['accepted']:>4}/{w['tries']:<3} {h['accepted']:>5}/{h['tries']:<3}   "
              f"{means[0]} / {means[1]}")
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
