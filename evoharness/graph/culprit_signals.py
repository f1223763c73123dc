"""Which of an anchor's signals the culprit search bisects, and which rollouts a culprit's evidence quotes: counted
among the anchor's failed rollouts (`evoharness.graph.harness_evidence` explains why)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evoharness.diagnosis.models import FailureClass

MIN_SHARE = 0.15  # of the anchor's failed rollouts, in which a signal must have fired to be bisected
MAX_SIGNALS = 3


def bisect_signals(labels: list[Any], min_support: int) -> list[str]:
    """The signals the culprit search bisects, at most ``MAX_SIGNALS``: each fired in at least ``max(min_support, 2)``
    of the failed (not Healthy) rollouts ``labels`` and in a ``MIN_SHARE`` of them; the most failed rollouts first,
    ties by id (a set's order changes from process to process)."""
    failed = [lab for lab in labels if lab.failure_class != FailureClass.healthy]
    fired: Counter[str] = Counter()
    for lab in failed:
        fired.update({s.id for s in lab.signals})
    floor = max(min_support, 2, MIN_SHARE * len(failed))
    return sorted((sig for sig, c in fired.items() if c >= floor), key=lambda sig: (-fired[sig], sig))[:MAX_SIGNALS]


def culprit_hits(labels: list[Any], sig: str, limit: int = 3) -> list[tuple[Any, Any]]:
    """The first ``limit`` (label, signal) pairs where ``sig`` fired, failed rollouts first (the bisect counted it
    among them, ``bisect_signals``): a culprit's evidence quotes a run that went wrong, not a healthy run on which
    the signal also fired."""
    hits = [(lab, s) for lab in labels for s in lab.signals if s.id == sig]
    return sorted(hits, key=lambda hit: hit[0].failure_class == FailureClass.healthy)[:limit]
