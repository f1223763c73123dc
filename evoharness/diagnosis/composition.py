"""Failure composition of a set of labelled trajectories (the papers' tables 6, 7 and 9)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from evoharness.diagnosis.models import FailureClass, Label

CLASSES = [c.value for c in FailureClass if c is not FailureClass.unknown]  # the papers' columns, always shown


def classes(counts: dict[str, int]) -> list[str]:
    """The classes a composition shows: ``CLASSES``, and ``unknown`` (unscored, no failure signal: neither healthy
    nor a failure) only when a run is."""
    return [*CLASSES, FailureClass.unknown.value] if counts.get(FailureClass.unknown.value) else CLASSES


class SignalCount(BaseModel):
    id: str
    count: int
    share: float
    examples: list[str] = Field(default_factory=list)


class Composition(BaseModel):
    n: int
    shares: dict[str, float]
    counts: dict[str, int]
    delivery_rate: float | None
    mean_score: float | None = Field(description="mean over scored trajectories")
    score_among_delivered: float | None
    n_scored: int
    n_unscored: int
    lever: dict[str, float]
    top_signals: list[SignalCount] = Field(default_factory=list)

    @classmethod
    def from_labels(cls, labels: Iterable[Label], top: int = 8, examples: int = 3) -> Composition:
        tally = Tally(examples=examples)
        for lab in labels:
            tally.add(lab)
        return tally.composition(top)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "composition": {c: round(self.shares[c], 4) for c in classes(self.counts)},
            "counts": self.counts,
            "delivery_rate": _r(self.delivery_rate),
            "mean_score": _r(self.mean_score),
            "score_among_delivered": _r(self.score_among_delivered),
            "n_scored": self.n_scored,
            "n_unscored": self.n_unscored,
            "lever": {k: round(v, 4) for k, v in self.lever.items()},
            "top_signals": [s.model_dump() for s in self.top_signals],
        }

    def table(self) -> str:
        """The composition as one row of the papers' table (plain text)."""
        shown = classes(self.counts)
        head = ["n", "Healthy", "F1", "F2", "F3", "F4", "E", *(["Unknown"] if len(shown) > len(CLASSES) else []),
                "Delivery", "Mean score", "Score|delivered"]
        row = [str(self.n), *(_pct(self.shares[c]) for c in shown),
               _pct(self.delivery_rate), _num(self.mean_score), _num(self.score_among_delivered)]
        widths = [max(len(h), len(r)) for h, r in zip(head, row, strict=True)]
        line = "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))
        vals = "  ".join(r.rjust(w) for r, w in zip(row, widths, strict=True))
        return f"{line}\n{vals}"


class Tally:
    """A composition built one label at a time: counts and sums, never the labels.

    Memory is bounded by the number of distinct first-signal ids (each keeps its count and its
    first ``examples`` trajectory ids), whatever the number of labels added.
    """

    def __init__(self, examples: int = 3) -> None:
        self.examples = examples
        self.n = 0
        self.counts: Counter[str] = Counter()
        self.lever: Counter[str] = Counter()
        self.delivered = 0
        self.n_scored = 0
        self.score_sum = 0.0
        self.n_delivered_scored = 0
        self.delivered_score_sum = 0.0
        self.firsts: Counter[str] = Counter()
        self.firsts_examples: dict[str, list[str]] = defaultdict(list)

    def add(self, lab: Label) -> None:
        self.n += 1
        self.counts[lab.failure_class.value] += 1
        self.lever[lab.lever.value] += 1
        self.delivered += lab.delivered
        if lab.score is not None:
            self.n_scored += 1
            self.score_sum += lab.score
            if lab.delivered:
                self.n_delivered_scored += 1
                self.delivered_score_sum += lab.score
        if lab.first_signal is not None and lab.failure_class != FailureClass.healthy:
            sid = lab.first_signal.id
            self.firsts[sid] += 1
            if len(self.firsts_examples[sid]) < self.examples:
                self.firsts_examples[sid].append(lab.trajectory_id)

    def composition(self, top: int = 8) -> Composition:
        n = self.n
        ranked = sorted(self.firsts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        return Composition(
            n=n,
            shares={c: (self.counts[c] / n if n else 0.0) for c in classes(self.counts)},
            counts={c: self.counts[c] for c in classes(self.counts)},
            delivery_rate=(self.delivered / n) if n else None,
            mean_score=(self.score_sum / self.n_scored) if self.n_scored else None,
            score_among_delivered=(self.delivered_score_sum / self.n_delivered_scored
                                   if self.n_delivered_scored else None),
            n_scored=self.n_scored,
            n_unscored=n - self.n_scored,
            lever={k: (self.lever[k] / n if n else 0.0) for k in ("harness", "weights", "none")},
            top_signals=[SignalCount(id=k, count=c, share=c / n, examples=self.firsts_examples[k])
                         for k, c in ranked],
        )


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
