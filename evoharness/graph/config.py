"""Settings section `[run]`: what one self-improving run does."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from evoharness.cli_support import MAX_ROLLOUTS_PER_TASK, MAX_SEED

# The largest run.seed: held-out evaluation and `evaluate/ablate --run -k K` use seeds run.seed .. run.seed+K-1
# with K up to MAX_ROLLOUTS_PER_TASK, and every one of them must stay a seed an endpoint takes (0..MAX_SEED).
MAX_RUN_SEED = MAX_SEED - MAX_ROLLOUTS_PER_TASK + 1
# The most rounds a run takes: the dev anchor measured after a merge in round r uses seeds 1,000,000 x r + i
# (verification/verifier.py, ANCHOR_SEED_BASE), within 0..MAX_SEED up to round 2,146; 10,000 rounds went past it.
MAX_RUN_ROUNDS = 2_000


class RunConfig(BaseModel):
    """One run: which harness, environment, model, how many rounds and how much budget."""

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
                          f"candidates (1 to {MAX_ROLLOUTS_PER_TASK:,}).")
    max_rounds: int = Field(3, ge=1, le=MAX_RUN_ROUNDS, description=f"Stop after this many rounds (at most "
                            f"{MAX_RUN_ROUNDS:,}: round r's anchor seeds are 1,000,000 x r + i, within "
                            f"0..{MAX_SEED:,}).")
    budget: float = Field(2000, gt=0, description="Budget ledger units for the whole run (1 unit per rollout).")
    max_candidates: int = Field(2, ge=1, description="Candidates per round (the roles propose up to this many).")
    patience: int = Field(2, ge=1, description="Ceiling: end after this many rounds in a row with nothing "
                          "accepted, recommending weight training. (The other ceiling, the process-failure share "
                          "of the anchor, is `diagnosis.ceiling_process_share`.)")
    review: bool = Field(False, description="Interrupt before each merge for `evoharness approve|reject`.")
    checkpointer: str = Field("sqlite", description="'sqlite' (file under the run dir), 'memory', or a "
                              "postgresql:// URL.")
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
