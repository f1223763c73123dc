"""Paired per-task statistics: the same tasks and seeds for baseline and candidate.

Pass-fail scores (all 0 or 1) get an exact McNemar test on the discordant pairs; graded scores
get a paired bootstrap of the mean difference. Both are one-sided: "the candidate is better".

``paired_mean_test`` judges the mean paired difference by the differences' own variance, task by
task (each task its own variance), not by two pooled per-side sigmas: when the same seed makes the
baseline and the candidate behave alike except where the edit acts, most of the run-to-run noise
cancels in the difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel


class PairedResult(BaseModel):
    kind: str  # "mcnemar_exact" | "paired_bootstrap" | "none"
    n: int
    mean_diff: float
    p_value: float
    improved: int = 0
    worsened: int = 0


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def mcnemar_exact(improved: int, worsened: int) -> float:
    """One-sided exact p: P(X >= improved) for X ~ Binomial(improved + worsened, 1/2)."""
    n = improved + worsened
    if n == 0:
        return 1.0
    return min(1.0, sum(math.comb(n, i) for i in range(improved, n + 1)) / 2**n)


def paired_bootstrap(diffs: Sequence[float], samples: int = 2000, seed: int = 0) -> float:
    """One-sided p: share of bootstrap means of the paired differences that are <= 0."""
    n = len(diffs)
    if n == 0:
        return 1.0
    if all(d == diffs[0] for d in diffs):
        return 0.0 if diffs[0] > 0 else 1.0
    import numpy as np

    rng = np.random.default_rng(seed)
    arr = np.asarray(diffs, dtype=float)
    means = arr[rng.integers(0, n, size=(samples, n))].mean(axis=1)
    return (int((means <= 0).sum()) + 1) / (samples + 1)


def paired_test(
    base: Sequence[float], cand: Sequence[float], samples: int = 2000, seed: int = 0
) -> PairedResult:
    """The paired test suited to the scores: McNemar for pass-fail, bootstrap for graded."""
    if len(base) != len(cand):
        raise ValueError("paired samples differ in length")
    n = len(base)
    if n == 0:
        return PairedResult(kind="none", n=0, mean_diff=0.0, p_value=1.0)
    diffs = [c - b for b, c in zip(base, cand, strict=True)]
    up = sum(d > 0 for d in diffs)
    down = sum(d < 0 for d in diffs)
    mean = sum(diffs) / n
    if is_binary(base) and is_binary(cand):
        return PairedResult(
            kind="mcnemar_exact",
            n=n,
            mean_diff=mean,
            p_value=mcnemar_exact(up, down),
            improved=up,
            worsened=down,
        )
    return PairedResult(
        kind="paired_bootstrap",
        n=n,
        mean_diff=mean,
        p_value=paired_bootstrap(diffs, samples, seed),
        improved=up,
        worsened=down,
    )


class PairedMean(BaseModel):
    """The mean of paired differences over tasks, its standard error and a one-sided p-value."""

    n: int  # pairs
    tasks: int
    mean_diff: float
    se: float
    z: float | None
    p_value: float


def paired_mean_test(diffs_by_task: Mapping[str, Sequence[float]], sd_floor: float = 0.0) -> PairedMean:
    """One-sided test of "mean paired difference > 0" with per-task variance.

    The mean is over all pairs; its variance is ``sum_t n_t * s_t^2 / N^2`` with ``s_t^2`` task t's
    own sample variance of differences. A task with a single pair borrows the pooled within-task
    variance of the others; ``sd_floor`` bounds every task's SD from below (an estimate of 0 from a
    handful of identical pairs is not a proof of no noise). Normal approximation for the p-value.
    """
    groups = {t: list(d) for t, d in diffs_by_task.items() if len(d)}
    n = sum(len(d) for d in groups.values())
    if n == 0:
        return PairedMean(n=0, tasks=0, mean_diff=0.0, se=0.0, z=None, p_value=1.0)
    mean = sum(sum(d) for d in groups.values()) / n
    ss = df = 0.0
    task_var: dict[str, float] = {}
    for t, d in groups.items():
        if len(d) >= 2:
            m = sum(d) / len(d)
            v = sum((x - m) ** 2 for x in d) / (len(d) - 1)
            task_var[t] = v
            ss += v * (len(d) - 1)
            df += len(d) - 1
    pooled = ss / df if df else 0.0
    var = sum(len(d) * max(task_var.get(t, pooled), sd_floor**2) for t, d in groups.items()) / n**2
    se = math.sqrt(var)
    if se == 0.0:
        z = None
        p = 0.0 if mean > 0 else 1.0
    else:
        z = mean / se
        p = 0.5 * math.erfc(z / math.sqrt(2))
    return PairedMean(n=n, tasks=len(groups), mean_diff=mean, se=se, z=z, p_value=p)
