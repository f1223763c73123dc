"""Settings section `[run]`: what one self-improving run does."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from evoharness.cli_support import MAX_ROLLOUTS_PER_TASK, MAX_SEED

# The largest run.seed: held-out evaluation and `evaluate/ablate --run -k K` use seeds run.seed .. run.seed+K-1
# with K up to MAX_ROLLOUTS_PER_TASK, and every one of them must stay a seed an endpoint takes (0..MAX_SEED).
MAX_RUN_SEED = MAX_SEED - MAX_ROLLOUTS_PER_TASK + 1
# The most rounds a run takes: round r's fresh-baseline seeds are 1,000 x (r + 1) + i, i < 1,000 (verification
# plan.FRESH_SEED_BASE, SEEDS_PER_ROUND), below round 1's anchor seeds 1,000,000 + i (verifier.ANCHOR_SEED_BASE)
# up to round 998; round 999's ran into them (the same commit on the same seeds: the cache answered the "fresh"
# baseline with the anchor's own rollouts). 10,000 rounds also went past MAX_SEED (anchor seeds 1,000,000 x r + i).
MAX_RUN_ROUNDS = 998
# Most candidates per round: each is a role call (an LLM engineer's reply) and a verification; a typo such as
# 1000000 asked the roles for that many.
MAX_CANDIDATES = 100


class RunConfig(BaseModel):
    """One run: which harness, environment, model, how many rounds and how much budget."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    harness: Path = Field(Path("harness"), description="The harness git repo to evolve (created if missing).")
    env: str = Field("synthetic", description="Task environment, e.g. 'agentdojo:workspace' or 'synthetic'.")
    model: str = Field("standin:weak", description="Agent model: 'standin:weak' (the offline stand-in that reads "
                       "the harness, docs/agent.md), 'standin:strong', 'scripted:weak', 'scripted:oracle', "
                       "'openai:URL#model'.")
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature of an "
                                      "'openai:URL#model' agent model, 0 to 2 (None: 0, or what the spec's "
                                      "'?temperature=T' says). Written into the model spec when the run starts.")
    dev_limit: int = Field(0, ge=0, description="How many of the environment's dev tasks to use (0 = all).")
    heldout_limit: int = Field(0, ge=0, description="How many of the environment's held-out tasks the before/after "
                               "evaluation uses (0 = all). A count; `datasets.heldout_tasks` is a list of task ids.")
    rollouts: int = Field(2, ge=1, le=MAX_ROLLOUTS_PER_TASK, description="k: rollouts per task for anchors and "
                          f"candidates (1 to {MAX_ROLLOUTS_PER_TASK:,}; a sequential verification gives a task up to "
                          "k x verification.sequential_max_factor seeds in a round, which must stay within the "
                          "1,000 a round has: at most 500 at the default factor 2).")
    max_rounds: int = Field(3, ge=1, le=MAX_RUN_ROUNDS, description=f"Stop after this many rounds (at most "
                            f"{MAX_RUN_ROUNDS:,}: round r's fresh-baseline seeds are 1,000 x (r + 1) + i, which "
                            "must stay below round 1's anchor seeds, 1,000,000 + i).")
    budget: float = Field(2000, gt=0, description="Budget ledger units for the whole run (1 unit per rollout).")
    max_candidates: int = Field(2, ge=1, le=MAX_CANDIDATES, description="Candidates per round (the roles propose "
                                f"up to this many; at most {MAX_CANDIDATES}).")
    patience: int = Field(2, ge=1, description="Ceiling: end after this many rounds in a row with nothing "
                          "accepted, recommending weight training. (The other ceiling, the process-failure share "
                          "of the anchor, is `diagnosis.ceiling_process_share`.)")
    review: bool = Field(False, description="Interrupt before each merge for `evoharness approve|reject`.")
    checkpointer: str = Field("sqlite", description="'sqlite' (<home>/runs/checkpoints.sqlite), "
                              "'sqlite:PATH' (a relative PATH is read against the run directory; an absolute one is "
                              "shared, so a copied run is refused), 'memory', or a postgresql:// URL.")
    seed: int = Field(0, ge=0, le=MAX_RUN_SEED, description=f"Base seed, 0 to {MAX_RUN_SEED:,}: held-out "
                      "evaluation and `evaluate/ablate --run` give rollout r of a task seed + r (r < k <= "
                      f"{MAX_ROLLOUTS_PER_TASK:,}), so every derived seed stays within 0..{MAX_SEED:,} (a signed "
                      "32-bit seed, what OpenAI-compatible endpoints and numpy take). Dev anchors and fresh "
                      "baselines use fixed seeds by round, not this (docs/verification.md).")
    evidence: list[Path] = Field(
        default_factory=list,
        description="Trace files or directories (any format `evoharness import` reads) whose process failures "
        "(F2/F3) the analyst uses as evidence beside the anchor's rollouts, e.g. production traces. Imported "
        "once when the run starts into <run dir>/evidence.jsonl (a resumed run reads that snapshot). "
        "Evidence only: candidates are still verified on the environment's dev tasks.")
