"""Anchors: main's k-rollout measurement, and the book of anchors across rounds.

After an accepted edit is merged, the merged harness is measured afresh; that fresh anchor --
never the candidate's own (optimistic) reading -- is the bar for the next round. The gap between
the two is the *selection optimism*, recorded per round.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from evoharness.verification.noise import composite_sigma
from evoharness.verification.observations import Observation, by_task, mean_score


class Anchor(BaseModel):
    commit: str
    observations: list[Observation] = Field(default_factory=list)
    k: int
    round: int = 0
    mean: float = Field(description="mean score over the anchor's dev rollouts")
    sigma: float = Field(description="per-rollout SD of the dev composite score")

    @classmethod
    def from_observations(
        cls,
        commit: str,
        observations: Sequence[Observation],
        k: int,
        round: int = 0,
        sigma_floor: float = 0.0,
    ) -> Anchor:
        dev = [o for o in observations if o.split == "dev"]
        groups = by_task(dev)
        return cls(
            commit=commit,
            observations=list(observations),
            k=k,
            round=round,
            mean=mean_score(dev) or 0.0,
            sigma=composite_sigma(groups, sorted(groups), floor=sigma_floor),
        )

    def per_task(self) -> dict[str, list[Observation]]:
        return by_task(self.observations)

    def dev_tasks(self) -> list[str]:
        """Tasks the anchor measured on the dev split, sorted. Held-out tasks are never among them."""
        return sorted({o.task_id for o in self.observations if o.split == "dev"})

    def mean_on(self, tasks: Sequence[str]) -> float | None:
        wanted = set(tasks)
        return mean_score(o for o in self.observations if o.task_id in wanted)


class OptimismRecord(BaseModel):
    round: int
    candidate: str
    reading: float = Field(description="the accepted candidate's own mean on the tasks it was verified on")
    fresh: float = Field(description="the fresh anchor's mean on those same tasks")
    optimism: float = Field(description="reading - fresh")


class AnchorBook(BaseModel):
    """Every anchor measured in a run, oldest first, with the selection optimism per round."""

    anchors: list[Anchor] = Field(default_factory=list)
    optimism: list[OptimismRecord] = Field(default_factory=list)

    @property
    def current(self) -> Anchor:
        if not self.anchors:
            raise LookupError("no anchor measured yet")
        return self.anchors[-1]

    def bar(self) -> float:
        """The mean the next round must beat: the latest (fresh) anchor's measurement."""
        return self.current.mean

    def start(self, anchor: Anchor) -> None:
        self.anchors.append(anchor)

    def record_fresh(
        self, fresh: Anchor, candidate: str, reading: float, tasks: Sequence[str] | None = None
    ) -> OptimismRecord:
        """Adopt ``fresh`` as the bar and record reading minus fresh (on ``tasks`` when given)."""
        base = fresh.mean_on(tasks) if tasks else None
        base = fresh.mean if base is None else base
        rec = OptimismRecord(
            round=fresh.round, candidate=candidate, reading=reading, fresh=base, optimism=reading - base
        )
        self.anchors.append(fresh)
        self.optimism.append(rec)
        return rec
