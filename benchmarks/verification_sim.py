"""Decision-quality simulation for verification strategies, with known ground truth.

World: dev and held-out tasks x behaviours (signal ids); a behaviour that fires fails the rollout.
Each round the "engineer" proposes one candidate of each kind, all targeting a behaviour that fired
in the current anchor:

- true:     cuts the targeted behaviour's firing so the expected gain on its prone dev tasks is +0.05;
- null:     changes nothing;
- harmful:  the same cut as `true`, but -0.08 on half of the tasks not prone to the target;
- noisefit: +0.1 only on the dev tasks the anchor saw failing (fits what was seen; nothing on
            held-out, targeted behaviour unchanged).

Every strategy gets the same per-candidate budget (fixed_split_24x gets 24x) and the same seeds
(worlds, edits, noise): ``--runs`` for every strategy. The sequential strategies (the verifier's
default, ``sequential = true``) may spend up to 3x the budget on one candidate but stop once the
verdict is decided; the column ``rollouts/candidate`` (verification only, anchors excluded) is what
equal budget is judged by. ``behaviour_aware_sequential`` uses the config defaults (control_ratio
2.0, max_tasks 27); every behaviour-aware strategy reads ``targeted_rank`` and
``attribution_min_share`` from the config (its defaults, ``alone`` and 0.4 since 2026-12-04, or
``--set``); ``_r1`` control_ratio 1.0 and 32 tasks; ``_narrow`` the fixed design's selection (0.5, 24); ``_looks4`` the
defaults named (four looks up to 2 x k seeds a task); ``_looks8`` eight looks up to 3 x k (the default for part of
the twenty-seventh session, reverted: harmful false accepts 10/600 at coupling 0.9, docs/verification.md); ``_focus``
the defaults with ``sequential_focus = 3`` (later looks on the 3 targeted tasks ranked first).
The best accepted candidate of a round is merged and re-anchored. Reported per
strategy: false-accept rates, power for the true +0.05 edit,
the true held-out gain of the final harness after the rounds (expected score, no noise), and
rollouts spent (candidates, baselines and anchors), each with a 95% interval: Wilson for rates,
mean +- 1.96 standard errors over runs for the others.

Not idealised in behaviour-aware selection's favour (``--ideal`` restores the old world): the
detectors report a behaviour that fired with probability ``RECALL`` and report a prone behaviour
that did not fire with probability ``FALSE_FIRE``; and every edit but the null one has side effects
on tasks it does not target (each with probability ``SIDE_SHARE``, a score shift drawn from
N(0, ``SIDE_SD``), on dev and held-out tasks alike).

``--common-seeds`` couples rollouts of different harnesses on the same seed; ``--coupling C`` keeps
the common draws in a share C of rollouts only (the others diverge, as a deterministic agent's
trajectory does after any change to its prompt). At C = 1 a null edit reproduces its base's rollouts
exactly, so no test on paired differences can accept it: its false-accept rate is 0 by construction
there, and ``--coupling 0.7`` is the world that tests it.

Rates are printed as accepted/proposed, the rate and its 95% Wilson interval; under the table, the
exact (Clopper-Pearson) 95% upper bounds of the null and harmful false-accept rates, one- and
two-sided. ``--seed S`` is the first world's seed (runs use S, S+1, ...; repeat r adds 1000 r);
``--jobs N`` runs N worlds at a time in worker processes (the figures do not depend on it); progress
goes to stderr.

``--scale S`` multiplies every strategy's per-candidate budget and rollouts per task by S (the anchors
keep theirs): the power curve against rollouts per candidate. Under the table, the verdicts that were
"undecided, needs N more" (a positive targeted gain that did not cross its boundary) per strategy.

``--why`` prints, per strategy and kind of edit, how its verdicts went: accepted, or the gates that
failed (the sequential gain test with its state: futile at look L, stopped by a stop gate, undecided at the
last look, or no gain), and the rollouts one candidate of that kind cost (the JSON has them always).

``--repeat N`` runs the whole simulation N times on disjoint seeds and prints, under the table (the
pooled runs), min / median / max over the repeats of power and held-out gain per strategy.

    .venv/bin/python benchmarks/verification_sim.py [--runs 12] [--rounds 10] [--repeat 1] [--json]
        [--only NAME ...] [--common-seeds [--coupling C]] [--seed S] [--jobs N] [--scale S] [--why]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.errors import BudgetExhausted
from evoharness.harness_repo.models import Candidate
from evoharness.logging import configure_logging
from evoharness.verification.anchors import AnchorBook
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.gates import make_gates
from evoharness.verification.selection import BehaviourAware, Coreset, FixedSplit, RandomSplit
from evoharness.verification.sim import SimHarness, SimSource, SimWorld
from evoharness.verification.verifier import Verifier

BEHAVIOURS = ("F3.repeated_action", "F2.format_rejected", "F3.no_delivery")
KINDS = ("true", "null", "harmful", "noisefit")
K = 8  # rollouts per cell for every strategy
BUDGET = 320  # rollouts per candidate
MIN_DEV_TASKS = 10  # fewer leave no room for targeted, control and guard tasks
RECALL, FALSE_FIRE = 0.8, 0.05  # partial observation of behaviours
SIDE_SHARE, SIDE_SD = 0.3, 0.03  # side effects of an edit on the tasks it does not target
WORLD = f"recall {RECALL}, false fire {FALSE_FIRE}, side effects: {SIDE_SHARE:.0%} of other tasks N(0, {SIDE_SD})"
WORLD_IDEAL = "idealised world (exact observation, no side effects)"


class _FreshFixedSplit(FixedSplit):
    name = "fixed_split"
    fresh_baseline = True  # the 24x split re-measures its baseline with as many rollouts as the candidate


def strategies(n_dev: int) -> dict[str, tuple]:
    """name -> (strategy, gate names or None for its defaults, per-candidate budget, max_tasks, k)."""
    return {
        "behaviour_aware": (BehaviourAware(0.5), None, BUDGET, 24, K),
        "behaviour_aware_paired": (
            BehaviourAware(0.5), ("behaviour", "paired_gain", "no_regression", "attribution", "guard"), BUDGET, 24, K),
        # the defaults: sequential, control_ratio 2.0, max_tasks 27; at most 3x the budget, spending ~1x on average
        "behaviour_aware_sequential": (BehaviourAware(2.0), None, 3 * BUDGET, 27, K, {"sequential": True}),
        # the same with no_regression's bound over tasks (no_regression_alpha 0.05) instead of its point rule
        "behaviour_aware_sequential_nr": (BehaviourAware(2.0), None, 3 * BUDGET, 27, K,
                                          {"sequential": True, "no_regression_alpha": 0.05}),
        "behaviour_aware_sequential_r1": (BehaviourAware(1.0), None, 3 * BUDGET, 32, K, {"sequential": True}),
        "behaviour_aware_sequential_narrow": (BehaviourAware(0.5), None, 3 * BUDGET, 24, K, {"sequential": True}),
        # the defaults named: four looks up to 2 x k seeds a task
        "behaviour_aware_sequential_looks4": (
            BehaviourAware(2.0), None, 3 * BUDGET, 27, K,
            {"sequential": True, "sequential_looks": 4, "sequential_max_factor": 2.0}),
        # eight looks up to 3 x k: the default for part of the twenty-seventh session, reverted (harmful false
        # accepts 10/600 at coupling 0.9 against the defaults' 0/600; docs/verification.md, "Eight looks up to 3 x k")
        "behaviour_aware_sequential_looks8": (
            BehaviourAware(2.0), None, 3 * BUDGET, 27, K,
            {"sequential": True, "sequential_looks": 8, "sequential_max_factor": 3.0}),
        # the defaults with later looks on the 3 targeted tasks the anchor ranks first (sequential_focus = 3)
        "behaviour_aware_sequential_focus": (BehaviourAware(2.0), None, 3 * BUDGET, 27, K,
                                             {"sequential": True, "sequential_focus": 3}),
        "behaviour_aware_no_attribution": (
            BehaviourAware(0.5), ("behaviour", "gain", "no_regression", "guard"), BUDGET, 24, K),
        "fixed_split": (FixedSplit(), None, BUDGET, BUDGET // K, K),
        "random_split": (RandomSplit(), None, BUDGET, BUDGET // K, K),
        "coreset": (Coreset(), None, BUDGET, BUDGET // K, K),
        "fixed_split_24x": (_FreshFixedSplit(), None, 24 * BUDGET, n_dev, 24 * BUDGET // (2 * n_dev)),
    }


def _true_factor(world: SimWorld, commit: str, target: str, gain: float = 0.05) -> float:
    prone = [t for t, task in world.tasks.items() if task.split == "dev" and target in task.prone]
    base = world.harnesses[commit]

    def gain_at(r: float) -> float:
        world.add("_probe", base.child(factor={target: r}))
        return sum(world.expected("_probe", t) - world.expected(commit, t) for t in prone) / len(prone)

    lo, hi = 0.0, 1.0
    if gain_at(0.0) <= gain:
        return 0.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain_at(mid) > gain else (lo, mid)
    return (lo + hi) / 2


def _side_effects(world: SimWorld, target: str, rng: random.Random, ideal: bool) -> dict[str, float]:
    """Score shifts on tasks not prone to ``target``: what an edit does beyond what it aims at."""
    if ideal:
        return {}
    return {t: rng.gauss(0.0, SIDE_SD) for t, task in world.tasks.items()
            if target not in task.prone and rng.random() < SIDE_SHARE}


def _edit(world: SimWorld, kind: str, commit: str, target: str, anchor, rng: random.Random,
          ideal: bool = False) -> SimHarness:
    h = world.harnesses[commit]
    if kind == "null":
        return h.child()
    side = _side_effects(world, target, rng, ideal)
    if kind == "noisefit":
        seen = {t for t, obs in anchor.per_task().items() if sum(o.score for o in obs) / len(obs) < 0.5}
        return h.child(offset={**side, **{t: side.get(t, 0.0) + 0.1 for t in seen}})
    factor = {target: _true_factor(world, commit, target)}
    if kind == "true":
        return h.child(factor=factor, offset=side)
    others = [t for t, task in world.tasks.items() if target not in task.prone]
    harm = {t: -0.08 for t in others if rng.random() < 0.5}
    return h.child(factor=factor, offset={t: side.get(t, 0.0) + harm.get(t, 0.0) for t in {*side, *harm}})


def run_one(name: str, spec: tuple, seed: int, rounds: int, n_dev: int, ideal: bool = False,
            common_seeds: bool = False, coupling: float = 1.0, settings: dict | None = None,
            scale: float = 1.0) -> dict:
    strategy, gate_names, budget, max_tasks, k, *extra = spec
    budget, k = budget * scale, max(1, round(k * scale))  # --scale: verification rollouts, not anchors
    world = SimWorld.generate(seed, n_dev=n_dev, n_heldout=n_dev, behaviours=BEHAVIOURS,
                              recall=1.0 if ideal else RECALL, false_fire=0.0 if ideal else FALSE_FIRE,
                              common_seeds=common_seeds, coupling=coupling)
    world.add("h0", SimHarness())
    cfg = VerificationConfig(**{"rollouts": k, "anchor_rollouts": K, "max_tasks": max_tasks, "bootstrap_samples": 200,
                                "sequential": False, **(extra[0] if extra else {}), **(settings or {})})
    if isinstance(strategy, BehaviourAware):  # the config's targeted_rank (its default, or --set), as a run's
        strategy = BehaviourAware(strategy.control_ratio, cfg.targeted_rank)
    verifier = Verifier(SimSource(world), cfg, seed=seed)
    gates = make_gates(gate_names, min_share=cfg.attribution_min_share, bootstrap_samples=200,
                       no_regression_alpha=cfg.no_regression_alpha) \
        if gate_names else None  # None: the verifier's own defaults, from cfg (the real path)
    dev = [t for t, task in world.tasks.items() if task.split == "dev"]
    run_ledger = BudgetLedger(total=float("inf"))
    book = AnchorBook()
    book.start(verifier.measure_anchor("h0", dev, K, round=0, ledger=run_ledger))
    rng = random.Random(f"edits:{seed}")
    main, accepted, proposed = "h0", {k_: 0 for k_ in KINDS}, {k_: 0 for k_ in KINDS}
    undecided, asked = {k_: 0 for k_ in KINDS}, []  # verdicts "undecided, needs N more" (true edits: the Ns)
    why = {k_: Counter() for k_ in KINDS}  # per kind: accepted, or which gates turned it away (reject_reason)
    spent = {k_: 0 for k_ in KINDS}  # verification rollouts per kind
    verify_spent = 0
    for rnd in range(1, rounds + 1):
        anchor = book.current
        fired = [b for b in BEHAVIOURS if any(b in o.fired for o in anchor.observations)]
        if not fired:
            break
        outcomes = []
        for kind in KINDS:
            target = rng.choice(fired)
            commit = f"r{rnd}-{kind}"
            world.add(commit, _edit(world, kind, main, target, anchor, rng, ideal))
            cand = Candidate(branch=f"candidate/{commit}", commit=commit, base=main, round=rnd,
                             targets=target)
            ledger = BudgetLedger(total=budget)
            proposed[kind] += 1
            try:
                out = verifier.evaluate(cand, anchor, strategy, gates, ledger, rnd)
            except BudgetExhausted:  # the plan does not fit the budget: not verified, as the graph records it
                why[kind]["not verified (budget)"] += 1
                continue
            run_ledger.spends.extend(ledger.spends)
            verify_spent += ledger.rollouts
            needs = out.verdict.measurements.get("needs_rollouts")
            if needs:
                undecided[kind] += 1
                if kind == "true":
                    asked.append(needs)
            why[kind][reject_reason(out.verdict)] += 1
            spent[kind] += ledger.rollouts
            if out.verdict.accepted:
                accepted[kind] += 1
                outcomes.append(out)
        if outcomes:
            best = max(outcomes, key=lambda o: o.reading - (o.verdict.measurements["baseline_mean"] or 0.0))
            main = best.verdict.commit
            verifier.reanchor(book, best, main, dev, rnd, K, ledger=run_ledger)
    return {"accepted": accepted, "proposed": proposed, "undecided": undecided, "asked": asked,
            "why": {k_: dict(c) for k_, c in why.items()}, "spent": spent,
            "rollouts": run_ledger.rollouts,
            "per_candidate": verify_spent / max(1, sum(proposed.values())),
            "heldout_gain": world.expected_mean(main, "heldout") - world.expected_mean("h0", "heldout"),
            "optimism": [r.optimism for r in book.optimism]}


def reject_reason(verdict) -> str:
    """One label for why a verdict went as it did: ``accepted``, or the gates that failed joined by ``+``,
    the sequential gain test's state in brackets: ``futile@L`` (stopped at look L, z at or below
    futility_z), ``stopped@L`` (stopped at look L by a failed `sequential_stop_gates` gate),
    ``undecided`` (the last look, positive but short of its boundary) or ``none`` (the last
    look, no positive gain)."""
    if verdict.accepted:
        return "accepted"
    parts = []
    for g in verdict.gates:
        if g.passed:
            continue
        if g.gate == "sequential_gain":
            n = g.numbers
            state = "undecided" if n.get("undecided") else f"stopped@{n.get('look')}" if n.get("stopped_by") else \
                f"futile@{n.get('look')}" if n.get("look") != n.get("looks") else "none"
            parts.append(f"gain({state})")
        else:
            parts.append(g.gate)
    return "+".join(parts) or "rejected"


def _run_named(args: tuple) -> dict:
    """`run_one` by strategy name (what a worker process is sent)."""
    name, seed, rounds, n_dev, ideal, common_seeds, coupling, settings, scale = args
    return run_one(name, strategies(n_dev)[name], seed, rounds, n_dev, ideal, common_seeds, coupling, settings,
                   scale)


def simulate(runs: int, rounds: int, n_dev: int, only: list[str] | None = None,
             runs_24x: int | None = None, first_seed: int = 0, ideal: bool = False,
             common_seeds: bool = False, coupling: float = 1.0, jobs: int = 1,
             progress: bool = False, settings: dict | None = None, scale: float = 1.0) -> dict[str, dict]:
    out = {}
    pool = ProcessPoolExecutor(jobs) if jobs > 1 else None
    try:
        for name in strategies(n_dev):
            if only and name not in only:
                continue
            n = runs_24x if name.endswith("_24x") and runs_24x else runs
            work = [(name, seed, rounds, n_dev, ideal, common_seeds, coupling, settings, scale)
                    for seed in range(first_seed, first_seed + n)]
            results = pool.map(_run_named, work) if pool else map(_run_named, work)
            res, t0, shown = [], time.perf_counter(), 0.0
            for r in results:
                res.append(r)
                now = time.perf_counter() - t0
                if progress and (now - shown >= 10.0 or len(res) == n):
                    shown = now
                    print(f"  {name}: {len(res)}/{n} worlds ({now:.0f}s)", file=sys.stderr, flush=True)
            out[name] = _summarise(res, n)
    finally:
        if pool:
            pool.shutdown()
    return out


def _summarise(res: list[dict], n: int) -> dict:
    """One strategy's row: rates over all proposals, means over the worlds, each with its interval."""
    row: dict = {"runs": n}
    for key, kind in (("null_false_accept", "null"), ("harmful_false_accept", "harmful"),
                      ("noisefit_false_accept", "noisefit"), ("power", "true")):
        acc, prop = sum(r["accepted"][kind] for r in res), sum(r["proposed"][kind] for r in res)
        row[key] = acc / max(1, prop)
        row[f"{key}_ci"] = wilson(acc, prop)
        row[f"{key}_n"] = prop
        row[f"{key}_k"] = acc
        row[f"{key}_cp_upper"] = clopper_pearson_upper(acc, prop)
        row[f"{key}_cp_upper_1s"] = clopper_pearson_upper(acc, prop, one_sided=True)
    for key, values in (("heldout_gain", [r["heldout_gain"] for r in res]),
                        ("rollouts", [r["rollouts"] for r in res]),
                        ("per_candidate", [r["per_candidate"] for r in res])):
        row[key] = sum(values) / n
        row[f"{key}_ci"] = mean_ci(values)
    for kind in ("true", "null"):
        row[f"undecided_{kind}_k"] = sum(r["undecided"][kind] for r in res)
        row[f"undecided_{kind}_n"] = sum(r["proposed"][kind] for r in res)
    row["why"] = {kind: dict(sum((Counter(r["why"][kind]) for r in res), Counter())) for kind in KINDS}
    row["spent_by_kind"] = {kind: sum(r["spent"][kind] for r in res) / max(1, sum(r["proposed"][kind] for r in res))
                            for kind in KINDS}
    row["asked"] = sorted(x for r in res for x in r["asked"])  # kept, so repeats pool the values themselves
    row["asked_median"] = statistics.median(row["asked"]) if row["asked"] else None
    opt = [x for r in res for x in r["optimism"]]
    row["selection_optimism"] = sum(opt) / len(opt) if opt else None
    row["selection_optimism_ci"] = mean_ci(opt) if opt else None
    row["selection_optimism_count"] = len(opt)
    return row


def wilson(successes: int, n: int, z: float = 1.96) -> list[float] | None:
    """95% Wilson interval of a proportion."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def clopper_pearson_upper(successes: int, n: int, one_sided: bool = False) -> float | None:
    """Exact (Clopper-Pearson) 95% upper bound of a proportion: two-sided (the 97.5% beta quantile) or
    one-sided (95%); for 0 successes the one-sided bound is 1 - 0.05^(1/n), about 3/n."""
    if n == 0:
        return None
    if successes >= n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(0.95 if one_sided else 0.975, successes + 1, n - successes))


def mean_ci(values: list[float], z: float = 1.96) -> list[float] | None:
    """Mean +- z standard errors (None for fewer than two values)."""
    if len(values) < 2:
        return None
    m, sd = statistics.fmean(values), statistics.stdev(values)
    return [m - z * sd / math.sqrt(len(values)), m + z * sd / math.sqrt(len(values))]


def pooled(reps: list[dict[str, dict]]) -> dict[str, dict]:
    """The repeats' figures pooled: rates over all proposals (with their intervals), means over all
    runs (intervals dropped: the per-repeat spread is printed instead), the median of every "more
    rollouts asked" value of all repeats (not a mean of the repeats' medians), and the optimism as the
    mean of every re-anchoring's reading (weighted by re-anchorings, not by runs)."""
    if len(reps) == 1:
        return reps[0]
    out = {}
    for name in reps[0]:
        rows = [r[name] for r in reps]
        runs = sum(row["runs"] for row in rows)
        merged: dict = {"runs": runs}
        for key in rows[0]:
            if key in ("runs", "asked", "asked_median", "selection_optimism", "selection_optimism_count", "why",
                       "spent_by_kind") \
                    or key.endswith(("_ci", "_n", "_k", "_cp_upper", "_cp_upper_1s")):
                continue
            if f"{key}_k" in rows[0]:  # a rate: recount
                acc, prop = sum(row[f"{key}_k"] for row in rows), sum(row[f"{key}_n"] for row in rows)
                merged.update({key: acc / max(1, prop), f"{key}_ci": wilson(acc, prop), f"{key}_n": prop,
                               f"{key}_k": acc, f"{key}_cp_upper": clopper_pearson_upper(acc, prop),
                               f"{key}_cp_upper_1s": clopper_pearson_upper(acc, prop, one_sided=True)})
                continue
            vals = [(row[key], row["runs"]) for row in rows if row[key] is not None]
            total = sum(w for _, w in vals)
            merged[key] = sum(v * w for v, w in vals) / total if vals and total else None
        for key in ("undecided_true_k", "undecided_true_n", "undecided_null_k", "undecided_null_n"):
            merged[key] = sum(row[key] for row in rows)
        merged["asked"] = sorted(x for row in rows for x in row["asked"])
        merged["why"] = {kind: dict(sum((Counter(row["why"][kind]) for row in rows), Counter())) for kind in KINDS}
        merged["spent_by_kind"] = {  # weighted by the candidates of that kind each repeat proposed
            kind: sum(row["spent_by_kind"][kind] * row[f"{_KEY[kind]}_n"] for row in rows)
            / max(1, sum(row[f"{_KEY[kind]}_n"] for row in rows)) for kind in KINDS}
        merged["asked_median"] = statistics.median(merged["asked"]) if merged["asked"] else None
        opt = [(row["selection_optimism"], row["selection_optimism_count"]) for row in rows
               if row["selection_optimism"] is not None]
        merged["selection_optimism_count"] = sum(n for _, n in opt)
        merged["selection_optimism"] = (sum(v * n for v, n in opt) / merged["selection_optimism_count"]
                                        if merged["selection_optimism_count"] else None)
        out[name] = merged
    return out


_KEY = {"true": "power", "null": "null_false_accept", "harmful": "harmful_false_accept",
        "noisefit": "noisefit_false_accept"}


def why_table(results: dict[str, dict]) -> str:
    """Per strategy and kind of edit: how its verdicts went (`reject_reason`), most frequent first, and the
    verification rollouts one candidate of that kind cost on average."""
    out = ["why candidates were turned away (gates that failed; gain(futile@L | undecided | none) is the "
           "sequential gain test's state):"]
    for name, r in results.items():
        if "why" not in r:
            continue
        out.append(f"  {name}")
        for kind in KINDS:
            counts = sorted(r["why"][kind].items(), key=lambda kv: (-kv[1], kv[0]))
            n = sum(c for _, c in counts)
            out.append(f"    {kind:<8} ({r['spent_by_kind'][kind]:.0f} rollouts/candidate) "
                       + ", ".join(f"{label} {c}/{n}" for label, c in counts))
    return "\n".join(out)


def table(results: dict[str, dict]) -> str:
    cols = ["null_false_accept", "harmful_false_accept", "noisefit_false_accept", "power", "heldout_gain",
            "per_candidate", "rollouts", "selection_optimism"]
    heads = ["strategy", "null FA", "harmful FA", "noisefit FA", "power", "held-out gain", "rollouts/candidate",
             "rollouts/run", "optimism"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, r in results.items():
        cells = [name] + [_cell(c, r.get(c), r.get(f"{c}_ci"), r.get(f"{c}_k"), r.get(f"{c}_n")) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def exact_bounds(results: dict[str, dict]) -> str:
    """The exact 95% upper bounds of the false-accept rates, one line per strategy."""
    out = ["exact (Clopper-Pearson) 95% upper bounds, two-sided / one-sided:"]
    for name, r in results.items():
        parts = [f"{kind} {r[f'{key}_k']}/{r[f'{key}_n']} <= {r[f'{key}_cp_upper']:.4f} / "
                 f"{r[f'{key}_cp_upper_1s']:.4f}"
                 for kind, key in (("null", "null_false_accept"), ("harmful", "harmful_false_accept"))
                 if r.get(f"{key}_n")]
        out.append(f"  {name:<34} " + "; ".join(parts))
    return "\n".join(out)


def undecided(results: dict[str, dict]) -> str:
    """Per strategy that has them: verdicts 'undecided, needs N more' (a positive gain that did not cross)."""
    out = []
    for name, r in results.items():
        if r.get("undecided_true_k") or r.get("undecided_null_k"):
            asked = r.get("asked_median")
            out.append(f"  {name:<34} true {r['undecided_true_k']}/{r['undecided_true_n']}, null "
                       f"{r['undecided_null_k']}/{r['undecided_null_n']}"
                       + (f"; median more rollouts asked for a true edit {asked:.0f}" if asked else ""))
    return "\n".join(["undecided verdicts (a positive targeted gain that did not cross its boundary):", *out]) \
        if out else ""


def _cell(col: str, value: float | None, ci: list[float] | None, k: int | None = None,
          n: int | None = None) -> str:
    if value is None:
        return "-"
    if n is not None:  # a rate: the counts first (none proposed: no rate)
        return f"{k}/{n} " + (_cell(col, value, ci) if n else "-")
    signed = col in ("heldout_gain", "selection_optimism")
    fmt = ".0f" if col in ("rollouts", "per_candidate") else "+.4f" if signed else ".3f"
    text = f"{value:{fmt}}"
    return f"{text} [{ci[0]:{fmt}}, {ci[1]:{fmt}}]" if ci else text


def _settings(ap: argparse.ArgumentParser, pairs: list[str]) -> dict:
    """``--set KEY=VALUE`` pairs, checked against `VerificationConfig` (a bad one exits 2)."""
    out: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in VerificationConfig.model_fields:
            ap.error(f"--set {pair!r}: expected KEY=VALUE with KEY a verification setting")
        out[key] = value
    try:
        VerificationConfig(**out)
    except ValueError as e:
        ap.error(f"--set: {str(e).splitlines()[0]} ({'; '.join(pairs)})")
    return VerificationConfig(**out).model_dump(include=set(out))


def _cpu() -> float:
    """CPU seconds of this process and of its finished worker processes (user + system); until
    2026-12-04 the summary counted this process only, which with --jobs 2 left out nearly all the work."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _world_seeds(common_seeds: bool, coupling: float) -> str:
    if not common_seeds:
        return "independent draws per harness"
    return "common seeds" if coupling == 1.0 else f"common seeds, coupling {coupling}"


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--runs-24x", type=int, default=None,
                    help="runs for the 24x split (default: --runs, the same seeds as every strategy)")
    ap.add_argument("--common-seeds", action="store_true", help="rollouts on the same seed share their random "
                    "draws across harnesses (a deterministic agent at a fixed seed; SimWorld.common_seeds)")
    ap.add_argument("--coupling", type=float, default=None, metavar="C", help="with --common-seeds: the share "
                    "of rollouts that keep the common draws (default 1.0: a null edit reproduces its base exactly)")
    ap.add_argument("--seed", type=int, default=0, help="the first world's seed (runs use seed, seed+1, ...)")
    ap.add_argument("--jobs", type=int, default=1, help="worlds simulated at a time in worker processes")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="verification settings for every "
                    "strategy run, over its own (e.g. sequential_alpha=0.05 sequential_futility_z=-1)")
    ap.add_argument("--scale", type=float, default=1.0, metavar="S", help="multiply every strategy's "
                    "verification budget and rollouts per task by S (anchors unchanged): the power curve against "
                    "rollouts per candidate")
    ap.add_argument("--ideal", action="store_true", help="the old idealised world: exact observation of "
                    "behaviours, no side effects of edits")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--dev-tasks", type=int, default=80)
    ap.add_argument("--only", nargs="*", help="strategy names to run")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--why", action="store_true", help="under the table, per strategy and kind of edit: how many "
                    "were accepted and which gates turned the others away (in the JSON always, as \"why\")")
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.runs < 1 or (args.runs_24x is not None and args.runs_24x < 1):
        ap.error("--runs and --runs-24x must be at least 1")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    if not (math.isfinite(args.scale) and 0.25 <= args.scale <= 8):
        ap.error("--scale must be between 0.25 and 8")
    if args.rounds < 1 or args.dev_tasks < MIN_DEV_TASKS:
        ap.error(f"--rounds must be at least 1 and --dev-tasks at least {MIN_DEV_TASKS} (targeted, control and "
                 "guard tasks come from them)")
    if args.coupling is not None and not (args.common_seeds and 0.0 <= args.coupling <= 1.0):
        ap.error("--coupling needs --common-seeds and a value in [0, 1]")
    unknown = sorted(set(args.only or ()) - set(strategies(args.dev_tasks)))
    if unknown:
        ap.error(f"unknown strategy {', '.join(unknown)} (choose from {', '.join(strategies(args.dev_tasks))})")
    coupling = 1.0 if args.coupling is None else args.coupling
    settings = _settings(ap, args.set)
    configure_logging("warning", "console")
    t0, c0 = time.perf_counter(), _cpu()
    reps = [simulate(args.runs, args.rounds, args.dev_tasks, args.only, args.runs_24x,
                     first_seed=args.seed + r * 1000, ideal=args.ideal, common_seeds=args.common_seeds,
                     coupling=coupling, jobs=args.jobs, progress=True, settings=settings, scale=args.scale)
            for r in range(args.repeat)]
    results = pooled(reps)
    if args.json:
        print(json.dumps(results if args.repeat == 1 else {**results, "_repeats": reps}, indent=2))
    else:
        print(table(results))
        print("\n" + exact_bounds(results))
        if undecided(results):
            print("\n" + undecided(results))
        if args.why:
            print("\n" + why_table(results))
        if args.repeat > 1:
            print(f"\nover {args.repeat} repeats (disjoint seeds):")
            for name in results:
                print(f"  {name:<32} power {spread([r[name]['power'] for r in reps], '.3f')}; held-out gain "
                      f"{spread([r[name]['heldout_gain'] for r in reps], '+.4f')}")
        print(f"\n{args.runs} runs ({args.runs_24x or args.runs} for the 24x split) x {args.rounds} rounds, "
              f"{WORLD_IDEAL if args.ideal else WORLD}, "
              f"{_world_seeds(args.common_seeds, coupling)}, seeds from {args.seed}, "
              f"{'settings ' + str(settings) + ', ' if settings else ''}"
              f"{args.dev_tasks} dev tasks, k={round(K * args.scale)} (anchors {K}), "
              f"{BUDGET * args.scale:g} rollouts per candidate, {args.repeat} repeat(s); "
              f"{time.perf_counter() - t0:.1f}s wall, "
              f"{_cpu() - c0:.1f} CPU-s (this process and its --jobs {args.jobs} workers) "
              f"({load_note()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
