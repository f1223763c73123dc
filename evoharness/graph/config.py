"""Settings section `[run]`: what one self-improving run does."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


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
    rollouts: int = Field(2, ge=1, description="k: rollouts per task for anchors and candidates.")
    max_rounds: int = Field(3, ge=1, le=10_000, description="Stop after this many rounds (at most 10,000).")
    budget: float = Field(2000, gt=0, description="Budget ledger units for the whole run (1 unit per rollout).")
    max_candidates: int = Field(2, ge=1, description="Candidates per round (the roles propose up to this many).")
    patience: int = Field(2, ge=1, description="Ceiling: end after this many rounds in a row with nothing "
                          "accepted, recommending weight training. (The other ceiling, the process-failure share "
                          "of the anchor, is `diagnosis.ceiling_process_share`.)")
    review: bool = Field(False, description="Interrupt before each merge for `evoharness approve|reject`.")
    checkpointer: str = Field("sqlite", description="'sqlite' (file under the run dir), 'memory', or a "
                              "postgresql:// URL.")
    seed: int = Field(0, description="Base seed for rollouts (rollout r of a task uses seed + r).")
    evidence: list[Path] = Field(
        default_factory=list,
        description="Trace files or directories (any format `evoharness import` reads) whose process failures "
        "(F2/F3) the analyst uses as evidence beside the anchor's rollouts, e.g. production traces. Imported "
        "once when the run starts into <run dir>/evidence.jsonl (a resumed run reads that snapshot). "
        "Evidence only: candidates are still verified on the environment's dev tasks.")
