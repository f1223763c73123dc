"""LangGraph state of a run. Every list field declares its reducer.

Large data (trajectories) never lives in the state: the state holds ids and
summaries, the trajectories live in the run's JSONL store (idempotent by id).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel

from evoharness.verification.anchors import Anchor


def replace(_old: Any, new: Any) -> Any:
    return new


class AnchorEntry(BaseModel):
    """The state's ``anchor`` (and each of ``anchors``): main's measurement, the bar of the next round.

    Stored as its JSON dump; nodes read it back through `AnchorEntry.of` (one typed boundary).
    """

    commit: str
    round: int
    k: int
    tasks: list[str]
    trajectory_ids: list[str]
    mean: float
    sigma: float
    composition: dict[str, Any]
    anchor: dict[str, Any]  # the verifier's `Anchor`, serialised

    @classmethod
    def of(cls, state: dict[str, Any]) -> AnchorEntry:
        return cls.model_validate(state["anchor"])

    def measured(self) -> Anchor:
        return Anchor.model_validate(self.anchor)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class RunInput(TypedDict, total=False):
    run_id: str


class RunState(TypedDict, total=False):
    run_id: str
    round: int
    status: str  # running | done
    stop_reason: str
    recommendation: str
    # the anchor of main's current head: {"commit", "mean", "sigma", "k", "per_task", ...}
    anchor: dict[str, Any]
    anchors: Annotated[list[dict[str, Any]], operator.add]  # every anchor measured, in order
    before: dict[str, Any]  # composition of the seed harness (dev, heldout)
    after: dict[str, Any]
    composition: dict[str, Any]  # composition of the current anchor's trajectories
    ledger: dict[str, Any]  # the budget ledger, serialised
    # this round's work (replaced each round)
    patterns: Annotated[list[dict[str, Any]], replace]
    reviews: Annotated[list[dict[str, Any]], replace]
    candidates: Annotated[list[dict[str, Any]], replace]
    verdicts: Annotated[list[dict[str, Any]], replace]
    dropped: Annotated[list[dict[str, Any]], operator.add]  # candidates dropped with a reason
    decisions: dict[str, str]  # human review: branch -> approve | reject
    # history
    rounds: Annotated[list[dict[str, Any]], operator.add]
    merged: Annotated[list[dict[str, Any]], operator.add]
    rejected: Annotated[list[dict[str, Any]], operator.add]
    queued: Annotated[list[str], operator.add]  # trajectory ids sent to the training queue
    no_accept_streak: int
    guards: dict[str, Any]  # GuardBook: pinned regression tasks
