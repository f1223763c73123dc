"""Paired per-task statistics: the same tasks and seeds for baseline and candidate.

Pass-fail scores (all 0 or 1) get an exact McNemar test on the discordant pairs; graded scores
get a paired bootstrap of the mean difference. Both are one-sided: "the candidate is better".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
