"""The cost verdict: gates for an edit whose target is a cost signal (`evoharness.traces.cost`), not a score signal.

A harness defect that costs steps but not score (the agent is made to repeat itself until a guard blocks the
repeat) can never pass the gain gate: there is no gain to see. An edit that targets a cost signal is accepted when,
paired on common seeds on the targeted tasks,

- ``behaviour``: the cost signal fires in fewer candidate rollouts than baseline rollouts;
- ``non_inferior``: the score is non-inferior -- the one-sided ``1 - cost_score_alpha`` lower confidence bound of the
  mean paired score difference (candidate - baseline; per-task variance, SD floored at ``sigma_floor``; Student t
  with pairs - tasks degrees of freedom) is at least ``-cost_score_margin``, and a fall of twice the margin is refuted
  by an exact sign-flip test at 1% (`NonInferiorGate`'s harm test, since the twenty-fifth session);
- ``cost``: the cost is lower -- the mean paired saving (baseline - candidate; tokens when every paired rollout
  recorded them, else steps) is positive with a one-sided p <= ``cost_alpha`` by an exact sign-flip test of the
  paired differences (`stats.sign_flip_test`: no normal approximation, which on 24 pairs, or steps with a heavy
  tail, accepted 1.5% to 3.7% of null edits at 0.01); read at sequential looks, the running saving against a joint
  sign-flip boundary over the looks (`stats.joint_sign_flip`, alpha carried);
- ``no_regression`` and ``guard`` as for a score edit.

An edit that changes nothing (a reworded sentence) reads the same steps on the same seeds, or steps that differ by
noise: the cost test refuses it at the stated rate. Score-targeted edits keep their gates (`gates.default_gates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scipy.special import stdtrit

from evoharness.harness_repo.models import GateResult
from evoharness.verification.evidence import Evidence
from evoharness.verification.gates import BehaviourGate, Gate, GuardGate, NoRegressionGate, values_by_look
from evoharness.verification.stats import alpha_spent, joint_sign_flip, paired_mean_test, sign_flip_test

OBJECTIVE_COST = "cost"


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class NonInferiorGate:
    """The targeted score did not fall by more than ``margin``, at error rate ``alpha`` (one-sided bound), and a
    fall of ``harm_factor`` x ``margin`` (a harmful edit) is refuted at ``harm_alpha``.

    The second test (twenty-fifth session): the bound alone passed an edit losing twice the margin (0.10) on noisy
    scores 2.3% (4 tasks x 2 seeds), 1.2% (4 x 4) and 0.4% (4 x 8) of the time -- a bound on few pairs is wide,
    and a sequential cost verdict reads it at the look where its cost test crossed, often the second of four -- so
    the whole verdict accepted 8 of 1,000 such edits with independent draws (exact 95% upper bound 1.57%, past
    issue 17's 1%). The refutation is the exact sign-flip test (`stats.sign_flip_test`) of the paired
    differences plus ``harm_factor`` x ``margin``: where the candidate's scores are the baseline's shifted down by
    that much, each such difference is as likely to carry either sign, so the test passes such an edit at most
    ``harm_alpha`` of the time whatever the scores' distribution and however few the pairs (the Student t bound at
    1% passed it 1.3% on 4 x 2). It needs at least 7 pairs (2**-7 < 0.01), as the cost test does. ``harm_factor``
    0 turns it off."""

    name = "non_inferior"

    def __init__(self, margin: float = 0.05, alpha: float = 0.05, sd_floor: float = 0.005, harm_factor: float = 2.0,
                 harm_alpha: float = 0.01) -> None:
        self.margin, self.alpha, self.sd_floor = margin, alpha, sd_floor
        self.harm_factor, self.harm_alpha = harm_factor, harm_alpha

    def check(self, ev: Evidence) -> GateResult:
        diffs: dict[str, list[float]] = {}
        for b, c in ev.pairs(ev.selection.targeted):
            diffs.setdefault(b.task_id, []).append(c.score - b.score)
        test = paired_mean_test(diffs, self.sd_floor)
        # Student t on the per-task variances' degrees of freedom (pairs - tasks): the normal quantile passed an
        # edit losing exactly the margin 5.9% (6 tasks x 4 seeds) to 11% (4 x 2) of the time at a stated 5%
        bound = test.mean_diff - float(stdtrit(max(test.n - test.tasks, 1), 1 - self.alpha)) * test.se
        harm = self.harm_factor * self.margin
        # rounded to 1e-9: a difference equal to -harm up to float noise is a zero (no sign), not a tiny saving
        shifted = [round(d + harm, 9) for ds in diffs.values() for d in ds]
        harm_p = sign_flip_test(shifted) if harm > 0 and sum(shifted) > 0 else 1.0 if harm > 0 else None
        refuted = harm_p is None or harm_p <= self.harm_alpha
        ok = test.n > 0 and bound >= -self.margin and refuted
        reason = ("no paired targeted rollouts" if not test.n else
                  f"score {test.mean_diff:+.4f}, {1 - self.alpha:.0%} lower bound {bound:+.4f} vs margin "
                  f"-{self.margin:g}" + ("" if harm_p is None else
                                         f", a fall of {harm:g} refuted at sign-flip p={harm_p:.4f}" if refuted else
                                         f", a fall of {harm:g} not refuted (sign-flip p={harm_p:.4f} > "
                                         f"{self.harm_alpha:g})"))
        return GateResult(gate=self.name, passed=ok, reason=reason, numbers={
            "pairs": test.n, "tasks": test.tasks, "mean_diff": _r(test.mean_diff), "se": _r(test.se),
            "lower_bound": _r(bound), "margin": self.margin, "alpha": self.alpha, "harm_p": _r(harm_p),
            "harm": harm, "harm_alpha": self.harm_alpha})


class CostGate:
    """The targeted rollouts cost less than the baseline's on the same seeds (one-sided exact sign-flip test of the
    paired savings; ``se`` is the per-task-variance standard error, reported, not tested).

    The cost is tokens (prompt + completion) when every paired rollout recorded them -- an imported trace's usage
    fields, the model gateway's counts -- else steps (the stand-in reports no tokens; a trace with usage on some
    rollouts only is judged on steps, which every rollout has). ``unit`` in the numbers says which.

    Sequential (``look`` of ``looks``): the verifier reads the test after each look of seeds, on the running sum of
    the savings against thresholds set on its JOINT sign-flip distribution over the looks so far
    (`stats.joint_sign_flip` with ``carry``; ``spending`` of ``alpha`` at each look's share of the last look's
    ``seeds``, cumulative: what a look cannot use passes to the next), so an edit that changes nothing crosses some
    look with probability alpha up to the last look's rounding. Before the twenty-fifth session each look's marginal
    test ran at its share of ``alpha`` (the shares summing to ``alpha``, the union bound): 144 of 4,096 sign
    assignments crossed where 204 (5%) were stated
    (`test_the_sequential_cost_test_spends_its_alpha_jointly_over_the_looks`). ``cuts`` (seeds per task after each
    look, by task: `Plan.look_cuts`) says which look added each pair; without it a task's pairs are taken as added
    evenly over the looks so far. ``decided`` in the numbers says whether the verifier may stop: passed, no saving
    so far (mean saving <= 0: stop and refuse; non-binding, a stop can only turn a later pass into a refusal), or
    the last look. One look (the default) is the fixed design at ``alpha`` (`stats.sign_flip_test`)."""

    name = "cost"

    def __init__(self, alpha: float = 0.01, look: int = 1, looks: int = 1, spending: str = "obrien_fleming",
                 cuts: Mapping[str, Sequence[int]] | None = None, seeds: Sequence[int] | None = None) -> None:
        if not 1 <= look <= looks:
            raise ValueError(f"look {look} of {looks}")
        self.alpha, self.look, self.looks, self.spending, self.cuts = alpha, look, looks, spending, cuts
        self.spent = cost_spent(seeds or range(1, looks + 1), alpha, spending)

    def check(self, ev: Evidence) -> GateResult:
        pairs = ev.pairs(ev.selection.targeted)
        unit = "tokens" if pairs and all(b.tokens > 0 and c.tokens > 0 for b, c in pairs) else "steps"
        saved: dict[str, list[float]] = {}
        for b, c in pairs:
            saved.setdefault(b.task_id, []).append(float(getattr(b, unit) - getattr(c, unit)))
        test = paired_mean_test(saved)
        if self.looks == 1:
            p, level = sign_flip_test([d for diffs in saved.values() for d in diffs]), self.alpha
            crossed = p <= level
        else:
            flip = joint_sign_flip(values_by_look(pairs, lambda b, c: float(getattr(b, unit) - getattr(c, unit)),
                                                  self.cuts, self.look), self.spent, carry=True)
            p, level, crossed = flip.p_value, flip.level, flip.crossed
        numbers: dict[str, float | int | str | None] = {"pairs": test.n, "tasks": test.tasks, "unit": unit}
        for u in ("steps", "tokens") if unit == "tokens" else ("steps",):
            numbers[f"{u}_baseline"] = _r(sum(getattr(b, u) for b, _ in pairs) / len(pairs)) if pairs else None
            numbers[f"{u}_candidate"] = _r(sum(getattr(c, u) for _, c in pairs) / len(pairs)) if pairs else None
        ok = test.n > 0 and test.mean_diff > 0 and crossed
        last = self.look == self.looks
        decided = ok or last or not test.mean_diff > 0
        at = f"alpha {self.alpha}" if self.looks == 1 else \
            f"level {level:.2g} at look {self.look}/{self.looks} of alpha {self.alpha}"
        if self.looks == 1 or (last and not ok):
            state = ""
        else:
            state = " (saved: stop)" if ok else " (undecided: continue)" if test.mean_diff > 0 else " (no saving: stop)"
        reason = ("no paired targeted rollouts" if not test.n else
                  f"{unit} {numbers[unit + '_baseline']:.2f} -> {numbers[unit + '_candidate']:.2f} a rollout "
                  f"(saved {test.mean_diff:+.3f}, se {test.se:.3f}, sign-flip p={p:.4f} vs {at}){state}")
        numbers.update(saved=_r(test.mean_diff), se=_r(test.se), p_value=_r(p), alpha=self.alpha)
        if self.looks > 1:
            numbers.update(look=self.look, looks=self.looks, level=level, decided=decided)
        return GateResult(gate=self.name, passed=ok, reason=reason, numbers=numbers)


def cost_spent(seeds: Sequence[int], alpha: float, spending: str = "obrien_fleming") -> tuple[float, ...]:
    """The share of ``alpha`` spent by each look of a sequential cost verdict, ``seeds`` per task after each look:
    the alpha-spending function (`stats.alpha_spent`) at the look's information fraction (seeds / the last look's
    seeds); the last is exactly ``alpha``. Cumulative (each look may spend what earlier looks left unspent)."""
    top = seeds[-1]
    return (*(alpha_spent(s / top, alpha, spending) for s in seeds[:-1]), alpha)


def cost_gates(cfg) -> list[Gate]:
    """The gates of a cost-targeted edit, from a `VerificationConfig`."""
    return [BehaviourGate(), NonInferiorGate(cfg.cost_score_margin, cfg.cost_score_alpha, max(cfg.sigma_floor, 0.005)),
            CostGate(cfg.cost_alpha), NoRegressionGate(cfg.no_regression_alpha or None),
            GuardGate()]


def cost_measurements(results: list[GateResult]) -> tuple[dict[str, float | int | None], str]:
    """The cost verdict's figures for the verdict's measurements (``cost_target`` 1 marks a cost verdict: the merge
    message says so), and its line for the verdict's reason."""
    by = {r.gate: r for r in results}
    out: dict[str, float | int | None] = {"cost_target": 1}
    c, n = by.get("cost"), by.get("non_inferior")
    if c is not None:
        out.update(steps_baseline=c.numbers.get("steps_baseline"), steps_candidate=c.numbers.get("steps_candidate"),
                   cost_p=c.numbers.get("p_value"), cost_in_tokens=int(c.numbers.get("unit") == "tokens"))
        if c.numbers.get("unit") == "tokens":
            out.update(tokens_baseline=c.numbers.get("tokens_baseline"),
                       tokens_candidate=c.numbers.get("tokens_candidate"))
    if n is not None:
        out.update(score_diff=n.numbers.get("mean_diff"), score_lower_bound=n.numbers.get("lower_bound"),
                   score_margin=n.numbers.get("margin"))
    line = f"{c.reason}; {n.reason}" if c is not None and n is not None and c.numbers.get("pairs") else ""
    return {k: v for k, v in out.items() if not isinstance(v, str)}, line
