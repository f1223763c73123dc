"""Paired per-task statistics: the same tasks and seeds for baseline and candidate.

Pass-fail scores (all 0 or 1) get an exact McNemar test on the discordant pairs; graded scores
get a paired bootstrap of the mean difference. Both are one-sided: "the candidate is better".

``paired_mean_test`` judges the mean paired difference by the differences' own variance, task by
task (each task its own variance), not by two pooled per-side sigmas: when the same seed makes the
baseline and the candidate behave alike except where the edit acts, most of the run-to-run noise
cancels in the difference.
"""

from __future__ import annotations

import functools
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
    variance of the others; with no task of two pairs or more, every task borrows the variance of all the
    differences (before, that was 0 and the SD floor alone made the standard error: at one pair per task, a
    sequential verification's first look at k = 2, null edits with independent draws crossed 45% of the time);
    ``sd_floor`` bounds every task's SD from below (an estimate of 0 from a
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
    if df:
        pooled = ss / df
    else:  # one pair per task: no task's own variance, so the spread of all the differences (tasks and all)
        flat = [x for d in groups.values() for x in d]
        pooled = sum((x - mean) ** 2 for x in flat) / (n - 1) if n > 1 else 0.0
    var = sum(len(d) * max(task_var.get(t, pooled), sd_floor**2) for t, d in groups.items()) / n**2
    se = math.sqrt(var)
    if se == 0.0:
        z = None
        p = 0.0 if mean > 0 else 1.0
    else:
        z = mean / se
        p = 0.5 * math.erfc(z / math.sqrt(2))
    return PairedMean(n=n, tasks=len(groups), mean_diff=mean, se=se, z=z, p_value=p)


SIGN_FLIP_EXACT = 20  # non-zero differences enumerated exactly (2**20 sums); more are sampled
SIGN_FLIP_DRAWS = 100_000


def sign_flip_test(diffs: Sequence[float], draws: int = SIGN_FLIP_DRAWS, seed: int = 0) -> float:
    """One-sided p of "the paired differences' sum > 0" by flipping their signs (a paired permutation test).

    Under an edit that changes nothing, baseline and candidate are exchangeable within each pair (same task,
    same seed), so each difference is as likely to carry either sign whatever its distribution: the p-value is
    the share of the ``2**n`` sign assignments whose sum reaches the observed one. Exact up to
    ``SIGN_FLIP_EXACT`` non-zero differences; beyond, ``draws`` random assignments (seeded: the same data give
    the same p), counted as ``(1 + hits) / (1 + draws)``, a valid p-value however few the draws. No normal
    approximation, no variance estimate: on a few pairs, or steps with a heavy tail (a rollout looping to its
    budget), the normal test with per-task variance was liberal (1.5% to 3.7% false accepts at 0.01).
    Zero differences can carry no sign and drop out; none left gives 1.
    """
    import numpy as np

    d = np.asarray([x for x in diffs if x != 0], dtype=float)
    if d.size == 0:
        return 1.0
    observed = float(d.sum())
    tol = 1e-9 * float(np.abs(d).sum())
    if d.size <= SIGN_FLIP_EXACT:
        sums = np.zeros(1)
        for x in d:
            sums = np.concatenate((sums + x, sums - x))
        return float(np.count_nonzero(sums >= observed - tol)) / sums.size
    rng = np.random.default_rng(seed)
    hits, left = 0, draws
    while left:
        n = min(left, 10_000)
        signs = rng.integers(0, 2, size=(n, d.size), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(signs @ d >= observed - tol))
        left -= n
    return (1 + hits) / (1 + draws)


def pairs_needed(n: int, z: float, bound: float, power: float = 0.8) -> int:
    """Pairs in all for a test at ``bound`` to reach ``power`` if the true gain were the one observed.

    ``z`` was observed on ``n`` pairs; z grows with the square root of the pairs at a fixed gain and
    per-pair variance, so ``n * ((bound + z_power) / z) ** 2`` pairs put the expected z ``z_power``
    above the boundary. A planning figure, not a promise: the observed gain of an undecided test is
    itself uncertain. ``z`` must be positive.
    """
    from scipy.special import ndtri

    if z <= 0 or n < 1:
        raise ValueError("pairs_needed needs a positive z on at least one pair")
    return max(n, math.ceil(n * ((bound + float(ndtri(power))) / z) ** 2))


# -- group-sequential boundaries --------------------------------------------------------------------

SPENDING = ("obrien_fleming", "pocock")


def alpha_spent(t: float, alpha: float, spending: str = "obrien_fleming") -> float:
    """Lan-DeMets alpha-spending: the share of the one-sided ``alpha`` spent by information fraction ``t``.

    ``obrien_fleming``: ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` (spends almost nothing early: a verdict at an
    early look needs an overwhelming difference). ``pocock``: ``alpha ln(1 + (e - 1) t)`` (spends evenly).
    """
    from scipy.special import ndtr, ndtri

    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    if spending == "obrien_fleming":
        return float(2.0 - 2.0 * ndtr(ndtri(1.0 - alpha / 2.0) / math.sqrt(t)))
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"unknown alpha-spending function {spending!r} (choose from {', '.join(SPENDING)})")


@functools.lru_cache(maxsize=64)
def sequential_bounds(looks: int, alpha: float, spending: str = "obrien_fleming",
                      fractions: tuple[float, ...] | None = None, step: float = 0.02) -> tuple[float, ...]:
    """Upper z boundaries c_1..c_L of a one-sided group-sequential test with ``looks`` looks.

    Under "no difference" the z statistics at the looks behave as Brownian motion read at the
    information fractions ``fractions`` (default equal stages: 1/L, 2/L, ..., 1): Z_l = W(t_l)/sqrt(t_l).
    Each c_l is chosen so that the probability of first crossing at look l is exactly the alpha spent
    between t_{l-1} and t_l (``alpha_spent``), so the chance that a null edit ever crosses is ``alpha``.
    Computed by numerical integration of the continuation density on a grid (Armitage, McPherson
    and Rowe, 1969); deterministic, a few milliseconds.
    """
    import numpy as np
    from scipy.special import ndtr, ndtri

    if looks < 1:
        raise ValueError("looks must be >= 1")
    ts = list(fractions) if fractions is not None else [(i + 1) / looks for i in range(looks)]
    if len(ts) != looks or any(b <= a for a, b in zip([0.0, *ts], ts, strict=False)) or ts[-1] > 1.0 + 1e-12:
        raise ValueError("fractions must increase within (0, 1], one per look")
    bounds: list[float] = []
    grid = density = None  # the sub-density of W(t_{i-1}) on paths that have not crossed yet
    prev_t = 0.0
    for i, t in enumerate(ts):
        target = alpha_spent(t, alpha, spending) - alpha_spent(prev_t, alpha, spending)
        sd = math.sqrt(t - prev_t)
        if i == 0:
            b = -float(ndtri(target)) * math.sqrt(t) if target > 0 else math.inf
        elif target <= 0:
            b = math.inf
        else:  # the boundary b on the W scale whose first-crossing probability is the alpha spent here
            lo, hi = -10.0, 40.0
            for _ in range(60):
                mid = (lo + hi) / 2
                crossing = float(np.sum(density * ndtr((grid - mid) / sd)) * step)
                lo, hi = (mid, hi) if crossing > target else (lo, mid)
            b = (lo + hi) / 2
        bounds.append(b / math.sqrt(t))
        top = b if math.isfinite(b) else 8.0 * math.sqrt(t) + 8.0
        new_grid = np.arange(-8.0 * math.sqrt(t) - 8.0, top, step)
        if i == 0:
            density = _pdf(new_grid / sd) / sd
        else:
            density = _pdf((new_grid[:, None] - grid[None, :]) / sd) / sd @ density * step
        grid, prev_t = new_grid, t
    return tuple(bounds)


SEQUENTIAL_TESTS = ("sign_flip", "normal")  # `SequentialGainGate`'s tests
FLIP_EXACT = 16  # non-zero differences up to a look enumerated exactly by `joint_sign_flip` (2**16 paths)
FLIP_DRAWS = 20_000  # random sign paths per look beyond
_NEVER = 2**62  # a look's threshold that nothing crosses; -_NEVER: every path still running crosses


class SequentialFlip(BaseModel):
    """One look of `joint_sign_flip`: whether the observed sums crossed, the look's share of alpha and the
    p-value of its crossing (the chance, over sign flips, of reaching the observed sum without crossing earlier)."""

    crossed: bool
    p_value: float
    level: float
    exact: bool  # every sign assignment enumerated (else ``draws`` random ones, seeded)
    pairs: int  # non-zero differences up to the look


def sequential_sign_flip(diffs_by_look: Sequence[Sequence[float]], looks: int, alpha: float,
                         spending: str = "obrien_fleming", draws: int = FLIP_DRAWS,
                         seed: int = 0) -> SequentialFlip:
    """The score verdict's group-sequential sign-flip test of "the paired differences' sum > 0", read at look
    ``len(diffs_by_look)`` of ``looks`` (``diffs_by_look[j]``: the differences look j + 1 added): `joint_sign_flip`
    with ``spending``'s share of ``alpha`` at each look's information fraction look / looks, each look held to the
    alpha spent since the last one (``carry=False``).

    Under an edit that changes nothing each difference is as likely to carry either sign, given the
    magnitudes, whatever its distribution and however few the pairs (`sign_flip_test`), so such an edit crosses
    some look with probability at most ``alpha`` -- no normal approximation (liberal on two or three pairs a task:
    12 of 400 null edits crossed at a stated 1%) and no union bound (the per-look exact test at Bonferroni levels
    cost power: docs/verification.md, "One pair per task").
    """
    spent = tuple(alpha_spent(i / looks, alpha, spending) for i in range(1, looks + 1))
    if not 1 <= len(diffs_by_look) <= looks:
        raise ValueError(f"look {len(diffs_by_look)} of {looks}")
    return joint_sign_flip(diffs_by_look, spent, carry=False, draws=draws, seed=seed)


def joint_sign_flip(diffs_by_look: Sequence[Sequence[float]], spent: Sequence[float], carry: bool = False,
                    draws: int = FLIP_DRAWS, seed: int = 0) -> SequentialFlip:
    """The group-sequential sign-flip test of "the paired differences' sum > 0", read at look
    ``len(diffs_by_look)`` (``diffs_by_look[j]``: the differences look j + 1 added) with ``spent[j]`` of alpha spent
    by look j + 1 (cumulative). The one owner of the joint boundary: the score verdict's `sequential_sign_flip`
    and the cost verdict's `CostGate` both read it.

    Each look's threshold on the running sum is set on the joint sign-flip distribution of the sums at the looks
    so far, given each look's magnitudes (sorted: not which pair carried which sign): the sign assignments that
    reach it at this look without having crossed an earlier look's threshold are held to

    - ``carry=False`` (the score verdict): the alpha spent since the last look, ``spent[j] - spent[j - 1]``, on
      its own -- what a look's few pairs cannot use is lost, so the chance that an edit that changes nothing
      crosses some look is at most the sum of the looks' rounded-down shares;
    - ``carry=True`` (the cost verdict): the CUMULATIVE spend less the assignments that crossed before -- alpha a
      look could not use (three pairs give 8 assignments: a level under 1/8 crosses none) passes to the next, so
      that chance is ``spent[-1]`` up to the last look's rounding (``floor(alpha 2**n) / 2**n`` when every look
      is enumerated). ``level`` in the result is then the share this look could still cross.

    Exact where a look has at most `FLIP_EXACT` non-zero differences. Beyond, ``draws`` random assignments
    (seeded by ``seed`` and the look: the same magnitudes give the same thresholds) and the observed one rank
    together: a look crosses when the observed sum ranks within what the look may cross among ``draws`` + 1
    (``floor(level (D + 1)) - 1`` of the ``D`` draws above it, or with ``carry`` ``floor(spent D) - 1`` less the
    draws that crossed before), which holds the rate at any number of draws (the observed path and the draws are
    exchangeable given the earlier thresholds: Monte Carlo costs power, never validity). Where no draw count
    resolves the level (O'Brien-Fleming's first look at alpha 0.01 spends 2.6e-7), Hoeffding's bound
    ``exp(-S^2 / 2 sum d^2)`` on the sum's tail at the look's own share sets the threshold (a z of about 5.5
    there). A threshold depends on its own and earlier looks' magnitudes only, so a later look re-derives the
    thresholds the verifier met before.
    """
    import numpy as np

    signed = [[float(x) for x in d if x != 0] for d in diffs_by_look]
    # the thresholds are functions of each look's magnitudes alone (sorted: not of which pair carried which sign)
    parts = tuple(tuple(sorted(abs(x) for x in d)) for d in signed)
    look = len(parts)
    if not 1 <= look <= len(spent):
        raise ValueError(f"look {look} of {len(spent)}")
    spent = tuple(spent[:look])
    d = [x for p in signed for x in p]
    if not d:
        return SequentialFlip(crossed=False, p_value=1.0, level=_share(spent), exact=True, pairs=0)
    q = [int(_quantize(sum(x for p in signed[:i + 1] for x in p), parts[:i + 1])) for i in range(look)]
    alive_obs = all(q[i] <= _joint_threshold(parts[:i + 1], spent[:i + 1], carry, draws, seed)[0]
                    for i in range(look - 1))
    threshold, level = _joint_threshold(parts, spent, carry, draws, seed)
    sums, exact, alive = _joint_state(parts, spent, carry, draws, seed)
    reach, total = int(np.count_nonzero(alive & (sums[-1] >= q[-1]))), int(sums[0].size)
    p = reach / total if exact else (1 + reach) / (1 + total)
    return SequentialFlip(crossed=alive_obs and q[-1] > threshold, p_value=min(1.0, p), level=level, exact=exact,
                          pairs=len(d))


def _share(spent: tuple[float, ...]) -> float:
    """The alpha spent since the last look."""
    return spent[-1] - (spent[-2] if len(spent) > 1 else 0.0)


def _quantize(total, parts: tuple[tuple[float, ...], ...]):
    """A running sum on an integer grid of 1e-9 of the look's summed magnitudes: sums that float rounding alone
    tells apart compare equal."""
    import numpy as np

    scale = sum(abs(x) for p in parts for x in p) or 1.0
    return np.rint(np.asarray(total) / scale * 1e9).astype(np.int64)


def _flip_paths(parts: tuple[tuple[float, ...], ...], draws: int, seed: int):
    """(the quantized running sums of every look so far under each sign assignment, exact?): all ``2**n``
    assignments of the ``n`` differences, or ``draws`` random ones seeded by (seed, look)."""
    import numpy as np

    d = np.asarray([x for p in parts for x in p], dtype=float)
    n = d.size
    if n <= FLIP_EXACT:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    else:
        rng = np.random.default_rng([seed, len(parts)])
        signs = rng.integers(0, 2, size=(draws, n), dtype=np.int8).astype(np.float64)
    signs *= 2.0
    signs -= 1.0
    blocks = np.zeros((n, len(parts)))  # column i: the differences look i + 1 added
    ends = np.cumsum([0, *(len(p) for p in parts)])
    for i in range(len(parts)):
        blocks[ends[i]:ends[i + 1], i] = d[ends[i]:ends[i + 1]]
    running = np.cumsum(signs @ blocks, axis=1)
    sums = [_quantize(running[:, i], parts[:i + 1]) for i in range(len(parts))]
    return sums, n <= FLIP_EXACT


@functools.lru_cache(maxsize=8)
def _joint_state(parts: tuple[tuple[float, ...], ...], spent: tuple[float, ...], carry: bool, draws: int,
                 seed: int):
    """(each look's quantized running sums under each assignment, exact?, which assignments crossed no earlier
    look)."""
    import numpy as np

    sums, exact = _flip_paths(parts, draws, seed)
    alive = np.ones(sums[0].shape, dtype=bool)
    for i in range(len(parts) - 1):
        alive &= sums[i] <= _joint_threshold(parts[:i + 1], spent[:i + 1], carry, draws, seed)[0]
    return sums, exact, alive


@functools.lru_cache(maxsize=4096)
def _joint_threshold(parts: tuple[tuple[float, ...], ...], spent: tuple[float, ...], carry: bool, draws: int,
                     seed: int) -> tuple[int, float]:
    """(the last look's threshold on the quantized running sum: crossed when above it, the share it may cross)."""
    import numpy as np

    share = _share(spent)
    if share <= 0 and not carry:
        return _NEVER, share
    sums, exact, alive = _joint_state(parts, spent, carry, draws, seed)
    total = sums[0].size
    if carry:  # the k-th largest alive sum: above it, the cumulative spend less what crossed before
        k = math.floor(spent[-1] * total + 1e-9) - int(total - alive.sum()) - (0 if exact else 1)
    else:
        k = math.floor(share * total + 1e-9) if exact else math.floor(share * (total + 1) + 1e-9) - 1
    if k < 0:  # no assignment is rare enough: Hoeffding's bound on the sum's tail at the look's own share
        if share <= 0:
            return _NEVER, share
        squares = sum(x * x for p in parts for x in p)
        return int(_quantize(math.sqrt(2.0 * squares * math.log(1.0 / share)), parts)), share
    running = np.sort(sums[-1][alive])[::-1]
    threshold = int(running[k]) if k < running.size else -_NEVER
    return threshold, (k + (0 if exact else 1)) / total if carry else share


def _pdf(x):
    import numpy as np

    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
