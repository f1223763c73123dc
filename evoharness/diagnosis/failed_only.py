"""The shape of a claim rule that reads failed runs only: one signal, found by the rule's own ``find``."""

from __future__ import annotations

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.models import FailureClass, Signal


class FailedRunDetector:
    """A detector whose ``find(view)`` locates at most one signal, asked on runs below the healthy threshold only (a
    Healthy run's label cannot change, so ``skips_healthy``: the labeller does not call it there). Subclasses set
    ``id`` and ``find`` (the rule module's ``first_...`` function, as a ``staticmethod``)."""

    id: str
    failure_class = FailureClass.F1
    skips_healthy = True

    @staticmethod
    def find(view: TraceView) -> Signal | None:
        raise NotImplementedError

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if t.score is not None and t.score >= cfg.healthy_threshold:
            return []  # a Healthy run: its label cannot change
        found = self.find(view)
        return [found] if found else []
