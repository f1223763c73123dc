"""Lever routing and the ceiling verdict: does the harness still have work, or the weights?

One `Router` answers both questions from one table (``diagnosis.routing``: failure class -> lever)
and one threshold (``diagnosis.ceiling_process_share``). The labeller, the graph (what is queued,
what the analyst reads, when a run stops), the training queue and the roles all ask it; no other
module names which classes are "process" or "content". A new failure class is one entry in
`DEFAULT_ROUTING` (and its `FailureClass` member).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.models import FailureClass, Lever

if TYPE_CHECKING:
    from evoharness.diagnosis.config import DiagnosisConfig

DEFAULT_ROUTING: dict[str, str] = {
    "healthy": "none",
    "F1": "weights",   # evidence: content
    "F2": "harness",   # harness friction: process
    "F3": "harness",   # execution control: process
    "F4": "weights",   # planning capacity: content
    "E": "none",       # environment: the user simulator, a tool or the infrastructure broke the task
    "unknown": "none",  # unscored with no failure signal: neither healthy nor a failure
}
DEFAULT_CEILING = 0.05  # the one that ended runs (the diagnose CLI had a second one, 0.10)


def check_routing(table: Mapping[str, str]) -> dict[str, str]:
    """``table`` over the defaults, every key a failure class and every value a lever (ValueError otherwise)."""
    classes, levers = {c.value for c in FailureClass}, {lv.value for lv in Lever}
    for cls, lever in table.items():
        if cls not in classes:
            raise ValueError(f"unknown failure class {cls!r} (classes: {', '.join(sorted(classes))})")
        if lever not in levers:
            raise ValueError(f"{cls}: unknown lever {lever!r} (levers: {', '.join(sorted(levers))})")
    return {**DEFAULT_ROUTING, **table}


class Recommendation(BaseModel):
    lever: str  # harness | weights | none
    ceiling: bool
    harness_share: float
    weights_share: float
    message: str


class Router:
    """Which lever a failure class goes to, and whether the harness has reached its ceiling."""

    def __init__(self, table: Mapping[str, str] | None = None, ceiling: float = DEFAULT_CEILING) -> None:
        self.table = check_routing(table or {})
        self.ceiling = ceiling
        self._levers: dict[str, Lever] = {}  # lever() per class asked (a label asks it once; the enum calls cost ~1 us)

    @classmethod
    def from_config(cls, cfg: DiagnosisConfig | None) -> Router:
        if cfg is None:
            return cls()
        return cls(cfg.routing, cfg.ceiling_process_share)

    # -- which lever ----------------------------------------------------------------------
    def lever(self, failure_class: FailureClass | str) -> Lever:
        """The lever of a class; a class the table does not name goes to neither lever."""
        lever = self._levers.get(failure_class)
        if lever is None:
            lever = self._levers[failure_class] = Lever(self.table.get(FailureClass(failure_class).value,
                                                                       Lever.none.value))
        return lever

    def classes(self, lever: Lever | str) -> frozenset[FailureClass]:
        return frozenset(c for c in FailureClass if self.lever(c) == Lever(lever))

    @property
    def process_classes(self) -> frozenset[FailureClass]:
        """The classes harness edits repair (routed to the harness lever)."""
        return self.classes(Lever.harness)

    @property
    def content_classes(self) -> frozenset[FailureClass]:
        """The classes that go to the training queue (routed to the weights lever)."""
        return self.classes(Lever.weights)

    def share(self, shares: Mapping[str, float], lever: Lever | str) -> float:
        """Share of the trajectories with a verdict whose class routes to ``lever`` (``shares``: class -> share).
        An ``unknown`` run (unscored, no failure signal) has none, so it is left out of the denominator, as an
        unscored run is left out of the mean score: counted in, it read as healthy and diluted the process share
        into a ceiling."""
        known = 1.0 - shares.get(FailureClass.unknown.value, 0.0)
        if known <= 1e-12:
            return 0.0
        part = sum(v for k, v in shares.items()
                   if k != FailureClass.unknown.value and k in self.table and self.lever(k) == Lever(lever))
        return part / known

    def names(self, lever: Lever | str) -> str:
        """The classes of a lever, for messages: 'F2/F3'."""
        return "/".join(sorted(c.value for c in self.classes(lever)))

    # -- the ceiling ----------------------------------------------------------------------
    def ceiling_reached(self, shares: Mapping[str, float]) -> bool:
        """True when the process (harness-lever) share is below the threshold; never for no data."""
        return bool(shares) and self.share(shares, Lever.harness) < self.ceiling

    def recommend(self, comp: Composition) -> Recommendation:
        h, w = self.share(comp.shares, Lever.harness), self.share(comp.shares, Lever.weights)
        if comp.n == 0:
            return Recommendation(lever="none", ceiling=False, harness_share=0, weights_share=0,
                                  message="no trajectories")
        if h == 0 and w == 0:
            # failures routed to neither lever (E: the environment broke the task) are failures all the same: "no
            # failures" over 100% E runs told the user all was well
            neither = {c: k for c, k in comp.counts.items() if k and c not in (FailureClass.healthy.value,
                                                                              FailureClass.unknown.value)}
            said = ", ".join(f"{k} {c}" for c, k in sorted(neither.items()))
            message = (f"no process or content failures: nothing to route ({said}: failures neither lever repairs)"
                       if neither else "no failures: nothing to route")
            return Recommendation(lever="none", ceiling=False, harness_share=h, weights_share=w, message=message)
        process, content = self.names(Lever.harness), self.names(Lever.weights)
        ceiling = self.ceiling_reached(comp.shares)
        unknown = comp.counts.get(FailureClass.unknown.value, 0)
        of = f" (shares of the {comp.n - unknown} runs with a verdict; {unknown} unknown left out)" if unknown else ""
        if ceiling:
            msg = (f"ceiling: harness share {100 * h:.1f}% is below {100 * self.ceiling:.0f}%; "
                   f"{100 * w:.1f}% are content failures: recommend weight training (export the queue)")
            lever = "weights" if w > 0 else "none"
        elif h >= w:
            msg = (f"harness: {100 * h:.1f}% of trajectories fail by process ({process}), which harness edits "
                   f"repair; {100 * w:.1f}% content failures go to the training queue")
            lever = "harness"
        else:
            msg = (f"weights lead: {100 * w:.1f}% content failures ({content}) vs {100 * h:.1f}% process; "
                   f"evolve the harness for the process share, train for the rest")
            lever = "weights"
        return Recommendation(lever=lever, ceiling=ceiling, harness_share=h, weights_share=w, message=msg + of)

    def stop_reason(self, shares: Mapping[str, float]) -> tuple[str, str] | None:
        """(reason, recommendation) when a run's anchor composition reached the ceiling, else None."""
        if not self.ceiling_reached(shares):
            return None
        process = self.share(shares, Lever.harness)
        return (f"ceiling: process-failure share {100 * process:.1f}% is below {100 * self.ceiling:.0f}%",
                self.weights_advice(shares))

    def weights_advice(self, shares: Mapping[str, float]) -> str:
        content = self.share(shares, Lever.weights)
        return (f"recommend weight training: {100 * content:.0f}% content failures ({self.names(Lever.weights)}) "
                f"are queued for export (`evoharness dataset export`)")


def recommend(comp: Composition, cfg: DiagnosisConfig | None = None) -> Recommendation:
    return Router.from_config(cfg).recommend(comp)
