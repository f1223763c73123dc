"""Settings section `[verification]` (`VerificationSettings`) and the `Verifier`'s config (`VerificationConfig`).

The section holds what runs, reports and `evoharness verify` all honour. The verifier's default k and
anchor k are not settings: a run uses ``run.rollouts`` and ``evoharness verify`` its ``--rollouts`` and
``--anchor-rollouts`` flags (`config.REMOVED_KEYS` names them when an old key is set).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evoharness.errors import InputError

STOP_GATES = ("no_regression", "attribution", "behaviour")  # gates a sequential verification may stop on

# The seeds one round's verification may give a task. Fresh-baseline seeds of round r are
# SEEDS_PER_ROUND x (r + 1) + i (plan.FRESH_SEED_BASE), so a task given more than this many in one round ran
# into the next round's seeds (k = 1,000 under the default sequential_max_factor 2 asked for 2,000); a round's
# k, times sequential_max_factor when verification is sequential, is held to it (`check_seed_room`).
SEEDS_PER_ROUND = 1000
# Most retries of one thing (a rollout batch, a role's reply): each may wait up to retry_max_wait_s, so a typo
# such as 1000000 retried a broken endpoint for days instead of pausing the run.
MAX_RETRIES = 100
# Most bootstrap resamples: the paired bootstrap draws a resamples x pairs index array at once (8 bytes each),
# so 10**8 resamples of 50 pairs asked for 40 GB.
MAX_BOOTSTRAP_SAMPLES = 100_000


class VerificationSettings(BaseModel):
    """Verification (noise model, strategies, gates, budget units, cache). Each field carries a description."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    z: float = Field(3.0, gt=0, description="resolvable difference = z * sigma / sqrt(k) (the papers use 3)")
    sigma_floor: float = Field(
        0.005,
        ge=0,
        description="lower bound on the estimated per-rollout sigma (an all-deterministic "
        "anchor would otherwise make any gain look resolvable)",
    )
    strategy: str = Field(
        "behaviour_aware", description="behaviour_aware | fixed_split | random_split | coreset"
    )
    max_tasks: int = Field(
        27, ge=1, description="most tasks (targeted + control) one candidate is verified on (before budget caps); "
        "27 = 9 targeted + 18 control at control_ratio 2.0, what the simulation's 320 rollouts per candidate pay for "
        "on average under sequential verification (48 spent 396)"
    )
    control_ratio: float = Field(
        2.0,
        ge=0,
        description="control tasks (anchor healthy) per targeted task for behaviour-aware selection. A harmful "
        "edit passes when its harm misses the sampled control tasks; sequential verification runs them on the "
        "first look's seeds only, so they are cheap (simulation, 96 harmful edits, max_tasks 48 before the plan "
        "reserved only what its looks run: 0.5 -> 6 passed, 1.0 -> 2, 1.5 -> 1, 2.0 -> 0; power 0.81 / 0.87 / 0.80 / "
        "0.73)",
    )
    targeted_rank: Literal["fired", "alone"] = Field(
        "alone",
        description="which targeted tasks behaviour-aware selection takes first when max_tasks caps them: alone "
        "(where it fired with no other behaviour reported beside it: an edit to the target cannot rescue a rollout "
        "that fails for another reason) | fired (where the target fired in the most anchor rollouts; the default "
        "until 2026-12-04). With attribution_min_share 0.4, simulated power at coupling 0.9 0.518 -> 0.653 on "
        "fresh worlds (docs/verification.md, \"Defaults since 2026-12-04\")",
    )
    fresh_baseline: bool = Field(
        True,
        description="re-run the anchor commit on the selected tasks with the candidate's seeds; "
        "needed when tasks were chosen from the anchor's own outcomes (regression to the mean)",
    )
    attribution_min_share: float = Field(
        0.4,
        ge=0,
        le=1,
        description="share of the targeted gain that must come from rollouts where the "
        "behaviour stopped firing (0.5 until 2026-12-04: detectors that miss firings shrink a real fix's "
        "explained share, median 0.61 at coupling 0.9; edits that fit what the anchor saw explained at most 0.35)",
    )
    no_regression_alpha: float = Field(
        0.0,
        ge=0,
        lt=0.5,
        description="the no_regression gate passes when the one-sided 1 - alpha lower confidence bound of the "
        "control tasks' mean difference (across tasks: harm lands on some tasks, not others) is within the "
        "resolvable difference; 0: the older point rule (the mean difference alone), which let harmful edits "
        "through when their harm missed the sampled control tasks",
    )
    judge_hunks: bool = Field(
        True,
        description="a candidate with several independent hunks that passed every gate is also run "
        "without each hunk in turn; a hunk whose removal costs less than the resolvable difference on "
        "the targeted tasks (or that costs the control tasks) is refused, and the candidate with it",
    )
    drop_refused_hunks: bool = Field(
        True,
        description="when some hunks of a candidate are refused and others kept, commit the candidate "
        "without the refused ones on its branch and verify that (else the candidate is rejected)",
    )
    max_hunks: int = Field(
        6, ge=2, description="most hunks judged one by one; a candidate with more is refused (split it)"
    )
    sequential: bool = Field(
        True,
        description="sequential allocation: verify in `sequential_looks` stages of fresh seeds and stop as soon "
        "as the targeted gain is decided (a group-sequential test on the paired differences replaces the "
        "`gain` / `paired_gain` gate; behaviour-aware and other fresh-baseline strategies only); a cost-targeted "
        "edit's cost test is read after each look the same way, at the look's share of cost_alpha. Off: the "
        "fixed design, k rollouts per task at once, judged by `gain` (a cost edit: by `cost` at cost_alpha)",
    )
    sequential_looks: int = Field(4, ge=1, le=20, description="stages (looks) of a sequential verification")
    sequential_max_factor: float = Field(
        2.0, ge=0.25, le=SEEDS_PER_ROUND, description="most rollouts per task of a sequential verification, as a "
        "multiple of k (split evenly over the looks); the plan reserves budget for all of them. k x this factor "
        f"(rounded) must stay within the {SEEDS_PER_ROUND:,} seeds a round has (`seeds_per_task`). 2.25 with "
        "sequential_stop_gates "
        "= no_regression paying for it gave more simulated power at equal or fewer rollouts per candidate in "
        "every world (docs/verification.md, \"Stopping on a settled gate\"); not the default yet")
    sequential_focus: int = Field(
        0, ge=0, le=1000, description="a sequential score verification's later looks add seeds on the first N "
        "targeted tasks only (the selection's order: targeted_rank), as many as they would have added on every "
        "targeted task; the others keep the first look's seeds, as control tasks do. 0 (the default): every "
        "targeted task gets every look. 3, simulated on fresh worlds: power 0.203 -> 0.317 with independent draws, "
        "0.627 -> 0.703 at coupling 0.9, null edits within 2%; not the default: it left planted_flaws' unseen "
        "policy_exit_gate_off unrepaired (the anchor ranked first tasks where the target fired on rollouts that "
        "scored 1.0; docs/verification.md, \"Later looks on the targeted tasks the anchor ranks first\")")
    sequential_test: Literal["sign_flip", "normal"] = Field(
        "normal", description="the sequential gain test: normal (the default: the paired z against normal "
        "group-sequential boundaries; null edits crossed 2.25% [1.7%, 3.0%] at k = 2 and a stated 1%, 1.35% accepted) "
        "| sign_flip (the running sum of the paired differences against thresholds on its joint sign-flip "
        "distribution over the looks: an edit that changes nothing crosses with probability at most sequential_alpha "
        "at any number of pairs, but no look-1 crossing below 22 non-zero differences: as the default it left one of "
        "planted_flaws' unseen defects unrepaired and queued its 7 failures; docs/verification.md, \"An exact "
        "group-sequential boundary\")")
    sequential_alpha: float = Field(
        0.01, gt=0, lt=0.5, description="one-sided false-accept rate of the sequential gain test for an edit that "
        "changes nothing, over all looks together")
    sequential_spending: Literal["obrien_fleming", "pocock"] = Field(
        "obrien_fleming", description="alpha-spending function: obrien_fleming (little spent early) | pocock; it "
        "also splits cost_alpha over the looks of a sequential cost verdict")
    sequential_futility_z: float = Field(
        0.0, description="stop before the last look when the paired z is at or below this (no gain worth more "
        "rollouts); non-binding, so it cannot raise the false-accept rate")
    sequential_stop_gates: str = Field(
        "no_regression", description="comma-separated gates (no_regression, attribution, behaviour) checked "
        "after every look of a sequential verification before the last: when one fails, stop there and reject (it "
        "can only turn accepts into rejections, so no false-accept rate rises; it saves the later looks' "
        "rollouts). no_regression (the default since 2026-12-04) reads the control tasks, which only the first "
        "look runs, so it is settled there: same verdicts, 320 -> 276 simulated rollouts per candidate with "
        "independent draws. Empty: only the gain test decides when to stop")
    bootstrap_samples: int = Field(2000, ge=100, le=MAX_BOOTSTRAP_SAMPLES, description="resamples for the paired "
                                   f"bootstrap (at most {MAX_BOOTSTRAP_SAMPLES:,}: it holds resamples x pairs "
                                   "indices in memory at once)")
    predicted_effect: float = Field(
        0.05, gt=0, description="targeted gain assumed for the power estimate when a candidate predicts none"
    )
    cost_alpha: float = Field(
        0.01, gt=0, lt=0.5, description="an edit that targets a cost signal (`evoharness.traces.cost`, e.g. "
        "cost.blocked_call) is accepted only when its targeted rollouts take fewer steps than the baseline's on "
        "common seeds: one-sided exact sign-flip test of the paired differences, p <= this (the false-accept "
        "rate of the cost test for an edit that changes nothing, whatever the steps' distribution; under sequential "
        "verification over all looks together: the running saving against a joint sign-flip boundary over the looks, "
        "`stats.joint_sign_flip`)")
    cost_score_margin: float = Field(
        0.05, ge=0, le=1, description="a cost-targeted edit must be non-inferior on score: the one-sided lower "
        "confidence bound of its targeted tasks' mean paired score difference must be at least minus this margin "
        "(0.05: the resolvable difference at k = 2 in the papers' noise table), and a fall of twice the margin must be "
        "refuted by an exact sign-flip test at 1% (at most 1% of edits losing that much pass)")
    cost_score_alpha: float = Field(
        0.05, gt=0, lt=0.5, description="error rate of the non-inferiority bound: the chance that an edit whose true "
        "score loss is the margin passes it")
    units_per_rollout: float = Field(1.0, gt=0, description="budget units one rollout costs (runs and `verify`)")
    retry_attempts: int = Field(4, ge=1, le=MAX_RETRIES, description="tries per rollout batch on a retryable "
                                f"InfraError (at most {MAX_RETRIES})")
    retry_wait_s: float = Field(1.0, ge=0, description="first backoff wait; doubles per retry")
    retry_max_wait_s: float = Field(30.0, ge=0, description="longest backoff wait")
    cache_path: str | None = Field(
        None, description="SQLite rollout cache file shared by runs, reports and `verify` "
        "(default: <home>/rollout-cache.sqlite)"
    )

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, v: str) -> str:
        # a name no strategy is registered under was said only when the first candidate was verified: `run` had
        # paid the seed anchor and the held-out evaluation by then (`evoharness verify --strategy` checks its flag)
        from evoharness.verification.selection import STRATEGIES

        if v not in STRATEGIES:
            raise ValueError(f"unknown strategy {v!r} (valid: {', '.join(STRATEGIES.names())})")
        return v

    @field_validator("sequential_stop_gates")
    @classmethod
    def _stop_gates(cls, v: str) -> str:
        names = [n.strip() for n in v.split(",") if n.strip()]
        bad = [n for n in names if n not in STOP_GATES]
        if bad:
            raise ValueError(f"sequential_stop_gates: unknown gate {', '.join(bad)} (choose from "
                             f"{', '.join(STOP_GATES)})")
        return ",".join(dict.fromkeys(names))

    def stop_gates(self) -> tuple[str, ...]:
        """`sequential_stop_gates` as names."""
        return tuple(n for n in self.sequential_stop_gates.split(",") if n)


class VerificationConfig(VerificationSettings):
    """The `Verifier`'s config: the section plus the k it uses when a call names none (library default;
    a run passes ``run.rollouts``, `evoharness verify` its flags)."""

    rollouts: int = Field(4, ge=1, description="k, rollouts per task for a candidate (and its baseline)")
    anchor_rollouts: int = Field(4, ge=1, description="rollouts per dev task when measuring an anchor")

    @classmethod
    def of(cls, section: VerificationSettings, **k: int) -> VerificationConfig:
        return cls(**section.model_dump(), **k)


def sequential_looks(cfg: VerificationSettings, k: int) -> list[int]:
    """Seeds per task after each look: ``sequential_looks`` even stages up to ``k * sequential_max_factor``."""
    n = cfg.sequential_looks
    top = max(n, round(k * cfg.sequential_max_factor))
    return sorted({max(1, round(top * (i + 1) / n)) for i in range(n)})


def control_seeds(cfg: VerificationSettings, k: int) -> int:
    """Seeds a control task runs in a sequential verification at ``k`` (all at the first look): the first look of
    four looks up to 2 x k, about k / 2, or the first look when that is more. The harm check (`no_regression`)
    reads only these, so its sample does not shrink when more, smaller looks are asked for the gain test: eight
    looks up to 3 x k ran control tasks on 3 seeds at k = 8 (4 before) and let harmful edits through at coupling
    0.9 (docs/verification.md, "Why eight looks let harmful edits through"). Never more than the last look (a
    factor under 0.5): a task has no more seeds in a round."""
    looks = sequential_looks(cfg, k)
    return min(looks[-1], max(looks[0], max(1, round(k / 2))))


def seeds_per_task(cfg: VerificationSettings, k: int) -> int:
    """The most seeds one round's verification at ``k`` gives a task: the last look's when verification is
    sequential (what the plan reserves), else ``k``."""
    return sequential_looks(cfg, k)[-1] if cfg.sequential else k


def check_seed_room(cfg: VerificationSettings, k: int, key: str) -> None:
    """Refuse (`InputError` naming ``key``) a ``k`` whose round would give a task more than `SEEDS_PER_ROUND` seeds."""
    need = seeds_per_task(cfg, k)
    if need <= SEEDS_PER_ROUND:
        return
    most = next((j for j in range(min(k, SEEDS_PER_ROUND), 0, -1) if seeds_per_task(cfg, j) <= SEEDS_PER_ROUND), 0)
    at = f"at verification.sequential_max_factor {cfg.sequential_max_factor:g}"
    raise InputError(key, f"{k:,} rollouts per task {at} is {need:,} seeds per task in one round, past the "
                     f"{SEEDS_PER_ROUND:,} a round has (round r's fresh seeds are {SEEDS_PER_ROUND:,} x (r + 1) + i): "
                     + (f"at most {most:,} {at}" if most else "lower the factor")
                     + " (or verification.sequential = false)")
