"""The records a run writes into its graph state (stored as JSON, read back through `graph.state.Typed`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Entry(BaseModel):
    """A state record the run writes itself: stored with exactly the keys it was given (and any extra
    keys an older version wrote), so a dump round-trips what the checkpoint holds."""

    model_config = ConfigDict(extra="allow")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class CompositionEntry(Entry):
    """`Composition.to_dict()`: shares by class (``composition``), counts, delivery, scores, top signals."""

    n: int = 0
    composition: dict[str, float] = {}
    counts: dict[str, int] = {}
    delivery_rate: float | None = None
    mean_score: float | None = None
    lever: dict[str, float] = {}
    top_signals: list[dict[str, Any]] = []


class Splits(Entry):
    """``before`` / ``after``: the composition of the seed (or final) harness on dev and held-out."""

    dev: CompositionEntry | None = None
    heldout: CompositionEntry | None = None


class Dropped(Entry):
    """A pattern or candidate dropped before verification, with the reason (``signal``: planning's)."""

    pattern: str | None
    round: int
    reason: str
    branch: str | None = None
    signal: str | None = None


class Merged(Entry):
    branch: str
    commit: str
    merge_commit: str
    round: int
    reading: float
    targets: str
    approval: str | None = None  # a person's approval and its reason (`approve --reason`); set only when approved


class Rejected(Entry):
    branch: str
    commit: str
    round: int
    reason: str
    base: str | None = None
    tree: str | None = None
    superseded_by: str | None = None


class RoundSummary(Entry):
    """One finished round: the anchor before (and the fresh one after a merge), candidates with verdicts."""

    round: int
    anchor_before: float
    fresh_anchor: float | None = None
    anchor_commit: str
    selection_optimism: float | None = None
    composition: CompositionEntry | None = None
    candidates: list[dict[str, Any]] = []  # Candidate dumps, each with its ``verdict`` (or None)
    accommodation_flags: int = 0
    reviews: int = 0
    merged: list[str] = []
    budget_left: float
