"""`Evidence`: what every gate reads -- paired baseline and candidate rollouts on the selection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evoharness.verification.anchors import Anchor
from evoharness.verification.noise import composite_sigma, resolvable_difference
from evoharness.verification.observations import Observation, by_task, incidence, mean_score
from evoharness.verification.selection import Selection


@dataclass
class Evidence:
    """Baseline and candidate observations on the same tasks and seeds.

    ``baseline`` is the anchor commit's rollouts on the selected tasks (the anchor's own, or a fresh
    re-measure); σ always comes from the anchor's repeated rollouts (``anchor``).
    """

    target: str
    k: int
    selection: Selection
    anchor: Anchor
    baseline: list[Observation]
    candidate: list[Observation]
    z: float = 3.0
    sigma_floor: float = 0.0
    _base: dict[str, list[Observation]] = field(init=False, repr=False)
    _cand: dict[str, list[Observation]] = field(init=False, repr=False)
    _anchor_tasks: dict[str, list[Observation]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._base = by_task(self.baseline)
        self._cand = by_task(self.candidate)
        self._anchor_tasks = self.anchor.per_task()

    def side(self, which: str, tasks: Sequence[str]) -> list[Observation]:
        groups = self._base if which == "baseline" else self._cand
        return [o for t in tasks for o in groups.get(t, [])]

    def mean(self, which: str, tasks: Sequence[str]) -> float | None:
        return mean_score(self.side(which, tasks))

    def incidence(self, which: str, tasks: Sequence[str], signal: str | None = None) -> float | None:
        return incidence(self.side(which, tasks), signal or self.target)

    def pairs(self, tasks: Sequence[str]) -> list[tuple[Observation, Observation]]:
        """(baseline, candidate) rollouts matched by task and seed (unmatched ones are left out)."""
        out = []
        for t in tasks:
            cand = {o.seed: o for o in self._cand.get(t, [])}
            out.extend((b, cand[b.seed]) for b in self._base.get(t, []) if b.seed in cand)
        return out

    def sigma(self, tasks: Sequence[str]) -> float:
        return composite_sigma(
            self._anchor_tasks, list(tasks), floor=self.sigma_floor, fallback_tasks=self.anchor.dev_tasks()
        )

    def k_of(self, tasks: Sequence[str]) -> int:
        """Candidate rollouts per task on ``tasks`` (the fewest; a sequential verification runs its
        control tasks on the first look's seeds only), ``k`` when none ran."""
        counts = [len(self._cand[t]) for t in tasks if self._cand.get(t)]
        return min(counts) if counts else self.k

    def resolvable(self, tasks: Sequence[str]) -> float:
        return resolvable_difference(self.sigma(tasks), self.k_of(tasks), self.z)
