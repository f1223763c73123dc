"""The noise model: per-rollout sigma and the resolvable difference zσ/√k.

Why 3σ/√k: a cell's mean over k rollouts has standard error σ/√k; two independent cells differ
with standard deviation σ·√(2/k). A gap of 3σ/√k is 3/√2 ≈ 2.1 of those, so a null edit clears it
about 1.7% of the time (one-sided, normal noise) -- a bar strict enough that repeated rounds of
candidates do not pile up false accepts, and loose enough that a real +0.05 is resolvable with a
handful of rollouts. The papers' table (σ = 0.023) is this value rounded *up* to the next 0.005:
0.069 → 0.07, 0.049 → 0.05, 0.0345 → 0.035, 0.0244 → 0.025, 0.0173 → 0.02. Rounding up is also the
conservative direction for a threshold, so `table_value` does that.

σ is the per-rollout standard deviation of the *composite* score of a task set (its mean over the
tasks), estimated from the anchor's own repeated rollouts: the pooled within-task variance divided
by the number of tasks (independent tasks). Pooling is far steadier than the SD of k composites.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from evoharness.verification.observations import Observation


def resolvable_difference(sigma: float, k: int, z: float = 3.0) -> float:
    """The smallest difference between two k-rollout cells that beats run-to-run noise."""
    if k < 1:
        raise ValueError("k must be >= 1")
    return z * sigma / math.sqrt(k)


def table_value(x: float, step: float = 0.005) -> float:
    """``x`` rounded up to the next multiple of ``step`` (the papers' table rounding)."""
    return round(math.ceil(x / step - 1e-9) * step, 10)


def noise_table(sigma: float, ks: Sequence[int], z: float = 3.0) -> list[dict[str, float]]:
    return [
        {
            "k": k,
            "resolvable": resolvable_difference(sigma, k, z),
            "table": table_value(resolvable_difference(sigma, k, z)),
        }
        for k in ks
    ]


def pooled_within_sd(groups: Iterable[Sequence[float]]) -> tuple[float, int]:
    """Pooled within-group SD and its degrees of freedom (groups of one add nothing)."""
    ss, df = 0.0, 0
    for g in groups:
        n = len(g)
        if n < 2:
            continue
        m = sum(g) / n
        ss += sum((x - m) ** 2 for x in g)
        df += n - 1
    return (math.sqrt(ss / df) if df else 0.0), df


def composite_sigma(
    obs_by_task: Mapping[str, Sequence[Observation]],
    tasks: Sequence[str],
    floor: float = 0.0,
    fallback_tasks: Sequence[str] | None = None,
) -> float:
    """Per-rollout σ of the mean score over ``tasks``, from the anchor's repeated rollouts.

    When ``tasks`` give fewer than 2 degrees of freedom, the within-task SD is pooled over
    ``fallback_tasks`` instead (e.g. all anchor dev tasks).
    """
    if not tasks:
        return floor
    sd, df = pooled_within_sd([o.score for o in obs_by_task.get(t, [])] for t in tasks)
    if df < 2 and fallback_tasks:
        sd, df = pooled_within_sd([o.score for o in obs_by_task.get(t, [])] for t in fallback_tasks)
    return max(sd / math.sqrt(len(tasks)), floor)


def rollouts_needed(effect: float, sigma: float, z: float = 3.0) -> int:
    """The k at which ``effect`` becomes resolvable (zσ/√k <= effect)."""
    if effect <= 0:
        raise ValueError("effect must be positive")
    return max(1, math.ceil((z * sigma / effect) ** 2 - 1e-9))
