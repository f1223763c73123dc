"""Gates: small pluggable accept rules, each returning a `GateResult` with the numbers behind it.

A candidate is accepted only when every gate in its list passes. Behaviour-aware verification uses
behaviour + gain + no_regression + attribution + guard; the split baselines use the aggregate gate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from evoharness.harness_repo.models import GateResult
from evoharness.verification.evidence import Evidence
from evoharness.verification.observations import Observation
from evoharness.verification.selection import SelectionStrategy, make_strategy
from evoharness.verification.stats import (
    SEQUENTIAL_TESTS,
    mcnemar_exact,
    paired_mean_test,
    paired_test,
    pairs_needed,
    sequential_bounds,
    sequential_sign_flip,
)


class Gate(Protocol):
    """Contract: ``check`` reads the evidence only (no I/O, no randomness beyond a fixed seed) and
    returns a `GateResult` named ``name`` whose ``numbers`` let a reader redo the decision."""

    name: str

    def check(self, ev: Evidence) -> GateResult: ...


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class BehaviourGate:
    """The targeted signal fires in fewer candidate rollouts than baseline rollouts (targeted tasks)."""

    name = "behaviour"

    def check(self, ev: Evidence) -> GateResult:
        tasks = ev.selection.targeted
        before, after = ev.incidence("baseline", tasks), ev.incidence("candidate", tasks)
        pairs = ev.pairs(tasks)
        stopped = sum(ev.target in b.fired and ev.target not in c.fired for b, c in pairs)
        started = sum(ev.target not in b.fired and ev.target in c.fired for b, c in pairs)
        ok = before is not None and after is not None and after < before
        reason = (
            "no targeted rollouts"
            if before is None or after is None
            else f"{ev.target} incidence {before:.3f} -> {after:.3f}"
        )
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=reason,
            numbers={
                "incidence_baseline": _r(before),
                "incidence_candidate": _r(after),
                "stopped": stopped,
                "started": started,
                "mcnemar_p": _r(mcnemar_exact(stopped, started)),
            },
        )


class GainGate:
    """Targeted mean improves by at least the resolvable difference zσ/√k."""

    name = "gain"

    def __init__(self, bootstrap_samples: int = 2000) -> None:
        self.bootstrap_samples = bootstrap_samples

    def check(self, ev: Evidence) -> GateResult:
        tasks = ev.selection.targeted
        base, cand = ev.mean("baseline", tasks), ev.mean("candidate", tasks)
        sigma, bar = ev.sigma(tasks), ev.resolvable(tasks)
        pairs = ev.pairs(tasks)
        test = paired_test([b.score for b, _ in pairs], [c.score for _, c in pairs], self.bootstrap_samples)
        gain = None if base is None or cand is None else cand - base
        ok = gain is not None and gain > 0 and gain >= bar
        reason = "no targeted rollouts" if gain is None else f"gain {gain:+.4f} vs resolvable {bar:.4f}"
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=reason,
            numbers={
                "baseline": _r(base),
                "candidate": _r(cand),
                "gain": _r(gain),
                "sigma": _r(sigma),
                "k": ev.k,
                "tasks": len(tasks),
                "resolvable": _r(bar),
                "test": test.kind,
                "p_value": _r(test.p_value),
            },
        )


class NoRegressionGate:
    """Control mean does not fall by more than the resolvable difference (passes with no control).

    Read on (baseline, candidate) pairs of control tasks where the targeted behaviour fired on neither
    side: a control task can still be prone to the target (it was healthy in the anchor by chance), and
    the edit's gain there would otherwise pay for harm done elsewhere -- exactly what this gate is for.
    Without pairs (seeds not shared) it compares the two sides' means.

    With ``alpha`` (config ``no_regression_alpha``; off by default) it is a non-inferiority test
    over tasks: the control tasks are a sample of the untargeted dev tasks, and an edit's harm lands
    on some tasks and not others, so the sample's mean difference can miss it. Each control task's
    mean paired difference ``d_t`` is one observation; the gate passes when the one-sided
    ``1 - alpha`` lower confidence bound of their mean (Student t, ``n - 1`` degrees of freedom, the
    SD of the ``d_t`` across tasks, floored at ``sd_floor``) is at least ``-resolvable``. The burden
    of proof is on the candidate: few or disagreeing control tasks cannot show "no regression".
    ``alpha=None`` is the point rule (the mean difference alone against ``-resolvable``), which lets
    a harmful edit through when its harm misses most of the sampled control tasks (2 of 600 harmful
    edits in the simulation, docs/verification.md).
    """

    name = "no_regression"

    def __init__(self, alpha: float | None = None, sd_floor: float = 0.005) -> None:
        self.alpha, self.sd_floor = alpha, sd_floor

    def check(self, ev: Evidence) -> GateResult:
        tasks = ev.selection.control
        base, cand = ev.mean("baseline", tasks), ev.mean("candidate", tasks)
        if base is None or cand is None:
            return GateResult(gate=self.name, passed=True, reason="no control tasks", numbers={"tasks": 0})
        pairs = ev.pairs(tasks)
        clean = [(b, c) for b, c in pairs if ev.target not in b.fired and ev.target not in c.fired]
        by_task: dict[str, list[float]] = {}
        for b, c in clean:
            by_task.setdefault(b.task_id, []).append(c.score - b.score)
        if clean:
            delta = sum(c.score - b.score for b, c in clean) / len(clean)
        else:
            delta = cand - base
        bar = ev.resolvable(tasks)
        lower, spread = self._lower_bound([sum(d) / len(d) for d in by_task.values()])
        ok = delta >= -bar if lower is None else lower >= -bar
        unshown = self.alpha is not None and lower is None
        if unshown:  # the bound over tasks needs two tasks: one cannot show "no regression"
            ok = False
        left_out = (f" ({len(pairs) - len(clean)} of {len(pairs)} pairs left out: the target fired)"
                    if len(clean) < len(pairs) and clean else "")
        reason = (f"control {delta:+.4f} on {len(by_task)} task(s) with clean pairs: a {1 - self.alpha:.0%} "
                  "lower bound over tasks needs at least 2" if unshown else
                  f"control {delta:+.4f} vs allowed -{bar:.4f}" if lower is None else
                  f"control {delta:+.4f}, {1 - self.alpha:.0%} lower bound over {len(by_task)} tasks "
                  f"{lower:+.4f} vs allowed -{bar:.4f}") + left_out
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=reason,
            numbers={
                "baseline": _r(base),
                "candidate": _r(cand),
                "delta": _r(delta),
                "sigma": _r(ev.sigma(tasks)),
                "tasks": len(tasks),
                "pairs": len(clean),
                "left_out": len(pairs) - len(clean),
                "resolvable": _r(bar),
                "alpha": self.alpha,
                "task_sd": _r(spread),
                "lower_bound": _r(lower),
            },
        )

    def _lower_bound(self, task_means: list[float]) -> tuple[float | None, float | None]:
        """The one-sided lower confidence bound of the mean over tasks, and the SD across tasks (None with
        ``alpha`` unset, where the point rule applies, or with fewer than two tasks with clean pairs, where
        ``check`` refuses: one task cannot show "no regression")."""
        n = len(task_means)
        if self.alpha is None or n < 2:
            return None, None
        from scipy.stats import t as student_t

        mean = sum(task_means) / n
        sd = max(math.sqrt(sum((x - mean) ** 2 for x in task_means) / (n - 1)), self.sd_floor)
        return mean - float(student_t.ppf(1 - self.alpha, n - 1)) * sd / math.sqrt(n), sd


class AttributionGate:
    """The targeted gain comes from rollouts where the behaviour stopped firing.

    On (baseline, candidate) pairs of targeted tasks, the gain the behaviour explains is
    ``(stopped - started) / pairs * cost``: the net share of rollouts where it stopped firing times
    what one firing costs. It must be positive and at least ``min_share`` of the measured gain.
    Counting only the stopped pairs would credit noise (a null edit has as many pairs that start
    firing); netting them out does not, and a gain that comes from elsewhere (e.g. task-specific
    hints) is left unexplained.

    The cost of one firing is read on the pairs where the behaviour changed (same task, same seed):
    the silent side's score minus the firing side's. Pooling every firing and every non-firing
    rollout instead (the earlier estimate) mixed tasks of different quality and rollouts failing for
    other reasons, and with imperfect detectors (missed firings count as silent, spurious ones as
    firing) shrank the cost so far that a real fix explained under half its gain.
    """

    name = "attribution"

    def __init__(self, min_share: float = 0.4) -> None:
        self.min_share = min_share

    def check(self, ev: Evidence) -> GateResult:
        pairs = ev.pairs(ev.selection.targeted)
        if not pairs:
            return GateResult(gate=self.name, passed=False, reason="no paired targeted rollouts")
        total = sum(c.score - b.score for b, c in pairs) / len(pairs)
        stopped = sum(ev.target in b.fired and ev.target not in c.fired for b, c in pairs)
        started = sum(ev.target not in b.fired and ev.target in c.fired for b, c in pairs)
        costs = [c.score - b.score if ev.target in b.fired else b.score - c.score  # silent minus firing
                 for b, c in pairs if (ev.target in b.fired) != (ev.target in c.fired)]
        cost = sum(costs) / len(costs) if costs else 0.0
        explained = (stopped - started) / len(pairs) * cost
        share = explained / total if total > 0 else None
        ok = total > 0 and explained > 0 and explained >= self.min_share * total
        reason = (
            f"{explained:+.4f} of {total:+.4f} explained by {stopped - started:+d} net rollouts that stopped"
            if total > 0
            else f"no targeted gain ({total:+.4f})"
        )
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=reason,
            numbers={
                "gain": _r(total),
                "explained": _r(explained),
                "share": _r(share),
                "min_share": self.min_share,
                "cost_per_firing": _r(cost),
                "stopped": stopped,
                "started": started,
                "pairs": len(pairs),
            },
        )


class AggregateGate:
    """Baseline: the mean over every selected task improves by at least the resolvable difference."""

    name = "aggregate"

    def check(self, ev: Evidence) -> GateResult:
        tasks = [*ev.selection.targeted, *ev.selection.control]
        base, cand = ev.mean("baseline", tasks), ev.mean("candidate", tasks)
        if base is None or cand is None:
            return GateResult(gate=self.name, passed=False, reason="no rollouts")
        bar = ev.resolvable(tasks)
        gain = cand - base
        return GateResult(
            gate=self.name,
            passed=gain > 0 and gain >= bar,
            reason=f"aggregate {gain:+.4f} vs resolvable {bar:.4f}",
            numbers={
                "baseline": _r(base),
                "candidate": _r(cand),
                "gain": _r(gain),
                "sigma": _r(ev.sigma(tasks)),
                "k": ev.k,
                "tasks": len(tasks),
                "resolvable": _r(bar),
            },
        )


class PairedGate:
    """Optional: the paired test (McNemar exact / paired bootstrap) on targeted tasks has p <= alpha."""

    name = "paired"

    def __init__(self, alpha: float = 0.05, bootstrap_samples: int = 2000) -> None:
        self.alpha, self.bootstrap_samples = alpha, bootstrap_samples

    def check(self, ev: Evidence) -> GateResult:
        pairs = ev.pairs(ev.selection.targeted)
        test = paired_test([b.score for b, _ in pairs], [c.score for _, c in pairs], self.bootstrap_samples)
        ok = test.n > 0 and test.mean_diff > 0 and test.p_value <= self.alpha
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=f"{test.kind} p={test.p_value:.4f}",
            numbers={
                "test": test.kind,
                "n": test.n,
                "mean_diff": _r(test.mean_diff),
                "p_value": _r(test.p_value),
                "alpha": self.alpha,
                "improved": test.improved,
                "worsened": test.worsened,
            },
        )


class PairedGainGate:
    """The targeted gain, judged by the paired differences' own per-task variance (common seeds).

    Passes when the mean (candidate - baseline) difference over targeted pairs is positive and its
    one-sided p-value (``stats.paired_mean_test``) is at most ``alpha``: the stated false-accept rate
    of this gate for an edit that changes nothing. Replaces ``gain``'s bar of z pooled sigmas when
    the rollouts are paired by seed.
    """

    name = "paired_gain"

    def __init__(self, alpha: float = 0.01, sd_floor: float = 0.005) -> None:
        self.alpha, self.sd_floor = alpha, sd_floor

    def check(self, ev: Evidence) -> GateResult:
        test = paired_mean_test(targeted_differences(ev), self.sd_floor)
        ok = test.n > 0 and test.mean_diff > 0 and test.p_value <= self.alpha
        reason = ("no paired targeted rollouts" if not test.n else
                  f"paired gain {test.mean_diff:+.4f} (se {test.se:.4f}, p={test.p_value:.4f} vs alpha {self.alpha})")
        return GateResult(
            gate=self.name,
            passed=ok,
            reason=reason,
            numbers={
                "pairs": test.n,
                "tasks": test.tasks,
                "mean_diff": _r(test.mean_diff),
                "se": _r(test.se),
                "z": _r(test.z),
                "p_value": _r(test.p_value),
                "alpha": self.alpha,
            },
        )


class SequentialGainGate:
    """The targeted gain at look ``look`` of a group-sequential test on the paired differences.

    ``test = "sign_flip"`` (opt-in: ``verification.sequential_test``): the running sum of the candidate -
    baseline differences over the targeted pairs against thresholds set on its joint sign-flip distribution over
    the looks so far (`stats.sequential_sign_flip`): exact under an edit that changes nothing at any number of
    pairs, so such an edit crosses some look with probability at most ``alpha``. ``"normal"`` (the default):
    ``stats.paired_mean_test``'s z (each task its own variance) against the looks' normal boundaries
    (``stats.sequential_bounds``), a little liberal on two or three pairs a task. Either way ``decided`` in the
    numbers says whether the verifier may stop at this look: crossed (accept the gain), the paired z at or below
    ``futility_z`` before the last look (stop: no gain worth more rollouts; non-binding, so it cannot raise the
    false-accept rate), or the last look.

    The sign-flip test reads which look added each pair from ``cuts`` (seeds per task after each look, by task:
    `Plan.look_cuts`; a pair's look is the first whose cut is above its rollout index); without it the pairs a
    task has so far are taken as added evenly over the looks so far.

    A last look that did not cross but shows a positive trend (z above 0 and ``futility_z``) is
    *undecided*, not a shown absence of gain: ``needs_rollouts`` in the numbers is how many more
    rollouts (both sides, on the targeted tasks) would give the test ``power`` at the gain and
    per-pair variance observed (`stats.pairs_needed`, a normal planning figure); the verifier's verdict then
    says so.
    """

    name = "sequential_gain"

    def __init__(self, look: int = 1, looks: int = 1, alpha: float = 0.01, spending: str = "obrien_fleming",
                 futility_z: float = 0.0, sd_floor: float = 0.005, power: float = 0.8, test: str = "normal",
                 cuts: Mapping[str, Sequence[int]] | None = None) -> None:
        if not 1 <= look <= looks:
            raise ValueError(f"look {look} of {looks}")
        if test not in SEQUENTIAL_TESTS:
            raise ValueError(f"unknown sequential test {test!r} (choose from {', '.join(SEQUENTIAL_TESTS)})")
        self.look, self.looks, self.alpha, self.spending = look, looks, alpha, spending
        self.futility_z, self.sd_floor, self.power, self.test, self.cuts = futility_z, sd_floor, power, test, cuts

    def check(self, ev: Evidence) -> GateResult:
        diffs = targeted_differences(ev)
        test = paired_mean_test(diffs, self.sd_floor)
        bound = sequential_bounds(self.looks, self.alpha, self.spending)[self.look - 1]
        z = test.z if test.z is not None else (math.inf if test.mean_diff > 0 else -math.inf if test.n else None)
        flip = sequential_sign_flip(
            values_by_look(ev.pairs(ev.selection.targeted), lambda b, c: c.score - b.score, self.cuts, self.look),
            self.looks, self.alpha, self.spending) if self.test == "sign_flip" else None
        crossed = z is not None and test.mean_diff > 0 and (flip.crossed if flip is not None else z >= bound)
        futile = z is None or z <= self.futility_z
        last = self.look == self.looks
        decided = crossed or futile or last
        # the last look with a positive trend: no verdict on the gain either way, only "needs more"
        undecided = last and not crossed and not futile and test.mean_diff > 0 and z is not None and z > 0
        pairs = None
        if undecided:  # the normal boundary plans for either test; z past it but no sign-flip crossing: a seed more
            pairs = pairs_needed(test.n, z, bound, self.power) if z < bound else test.n + test.tasks
        more = 2 * (pairs - test.n) if undecided else None  # both sides: a fresh baseline pairs each seed
        if not test.n:
            reason = "no paired targeted rollouts"
        else:
            state = "crossed" if crossed else "futile: stop" if futile and not last else \
                (f"undecided: about {more} more rollouts on the targeted tasks for {self.power:.0%} power at "
                 "this gain" if undecided else "no gain at the last look") if last else "undecided: continue"
            against = f"z={_fmt(z)} vs boundary {bound:.3f}" if flip is None else \
                f"z={_fmt(z)}, sign-flip p={flip.p_value:.2g} vs level {flip.level:.2g}"
            reason = (f"look {self.look}/{self.looks}: paired gain {test.mean_diff:+.4f} (se {test.se:.4f}), "
                      f"{against} ({state})")
        return GateResult(
            gate=self.name,
            passed=crossed,
            reason=reason,
            numbers={
                "test": self.test,
                "p_value": None if flip is None else _r(flip.p_value),
                "level": None if flip is None else flip.level,
                "exact": None if flip is None else flip.exact,
                "look": self.look,
                "looks": self.looks,
                "pairs": test.n,
                "tasks": test.tasks,
                "mean_diff": _r(test.mean_diff),
                "se": _r(test.se),
                "z": _r(z) if z is None or math.isfinite(z) else None,
                "boundary": _r(bound),
                "alpha": self.alpha,
                "spending": self.spending,
                "futility_z": self.futility_z,
                "decided": decided,
                "undecided": undecided,
                "needs_pairs": pairs,
                "needs_rollouts": more,
            },
        )


def values_by_look(pairs: Sequence[tuple[Observation, Observation]],
                   value: Callable[[Observation, Observation], float], cuts: Mapping[str, Sequence[int]] | None,
                   look: int) -> list[list[float]]:
    """Per look (look 1 first, up to ``look``), ``value(baseline, candidate)`` of each seed-paired rollout the look
    added -- the score difference for `SequentialGainGate`, the cost saving for `cost.CostGate`. A pair's look is
    the first whose cut (seeds per task after each look, by task: `Plan.look_cuts`) is above its rollout index,
    or, without cuts for the task, its rank within the task spread evenly over the looks so far."""
    rows: dict[str, list[tuple[int, float]]] = {}
    for b, c in pairs:
        rows.setdefault(b.task_id, []).append((b.rollout, value(b, c)))
    out: list[list[float]] = [[] for _ in range(look)]
    for task, task_rows in rows.items():
        task_cuts = (cuts or {}).get(task)
        for i, (rollout, d) in enumerate(task_rows):
            j = next((j for j, n in enumerate(task_cuts) if rollout < n), look - 1) if task_cuts else \
                i * look // len(task_rows)
            out[min(j, look - 1)].append(d)
    return out


def targeted_differences(ev: Evidence) -> dict[str, list[float]]:
    """Candidate - baseline score of each seed-paired rollout on the targeted tasks, by task."""
    by_task: dict[str, list[float]] = {}
    for b, c in ev.pairs(ev.selection.targeted):
        by_task.setdefault(b.task_id, []).append(c.score - b.score)
    return by_task


def _fmt(z: float | None) -> str:
    return "-" if z is None else f"{z:.3f}"


class GuardGate:
    """Pinned regression tasks: veto only when a guard task fails every candidate rollout."""

    name = "guard"

    def check(self, ev: Evidence) -> GateResult:
        guards = ev.selection.guard
        broken = [t for t in guards if (obs := ev.side("candidate", [t])) and not any(o.healthy for o in obs)]
        reason = f"broken: {', '.join(broken)}" if broken else f"{len(guards)} guard task(s) hold"
        return GateResult(
            gate=self.name,
            passed=not broken,
            reason=reason,
            numbers={"guards": len(guards), "broken": len(broken)},
        )


GATES = {
    g.name: g
    for g in (
        BehaviourGate,
        GainGate,
        NoRegressionGate,
        AttributionGate,
        AggregateGate,
        PairedGate,
        PairedGainGate,
        SequentialGainGate,
        GuardGate,
    )
}


def make_gates(
    names: list[str] | tuple[str, ...],
    min_share: float = 0.4,
    alpha: float = 0.05,
    bootstrap_samples: int = 2000,
    no_regression_alpha: float | None = None,
) -> list[Gate]:
    out: list[Gate] = []
    for n in names:
        if n == "no_regression":
            out.append(NoRegressionGate(no_regression_alpha or None))
        elif n == "attribution":
            out.append(AttributionGate(min_share))
        elif n == "gain":
            out.append(GainGate(bootstrap_samples))
        elif n == "paired":
            out.append(PairedGate(alpha, bootstrap_samples))
        elif n in GATES:
            out.append(GATES[n]())
        else:
            from evoharness.errors import InputError

            raise InputError("gates", f"unknown gate {n!r} (choose from {', '.join(GATES)})")
    return out


def default_gates(strategy: SelectionStrategy | str, min_share: float = 0.4,
                  bootstrap_samples: int = 2000, no_regression_alpha: float | None = None) -> list[Gate]:
    """The gates ``strategy`` declares (a registered name or a strategy object)."""
    if isinstance(strategy, str):
        strategy = make_strategy(strategy)
    return make_gates(strategy.gates, min_share=min_share, bootstrap_samples=bootstrap_samples,
                      no_regression_alpha=no_regression_alpha)
