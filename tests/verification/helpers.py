"""Builders for verification tests: observations, anchors and evidence by hand."""

from __future__ import annotations

from collections.abc import Iterable

from evoharness.harness_repo.models import Candidate
from evoharness.verification.anchors import Anchor
from evoharness.verification.evidence import Evidence
from evoharness.verification.observations import Observation
from evoharness.verification.selection import Selection

T = "F3.repeated_action"


def ob(task: str, seed: int, score: float, fired: Iterable[str] = (), healthy: bool | None = None,
       split: str = "dev") -> Observation:
    fired = frozenset(fired)
    if healthy is None:
        healthy = not fired and score >= 0.5
    return Observation(task_id=task, rollout=seed, seed=seed, score=score, fired=fired, healthy=healthy,
                       split=split)


def cell(task: str, scores: list[float], fired: list[bool] | None = None, seed0: int = 0,
         signal: str = T, split: str = "dev") -> list[Observation]:
    """One task's rollouts: scores, and whether ``signal`` fired in each."""
    fired = fired or [False] * len(scores)
    return [ob(task, seed0 + i, s, [signal] if f else [], split=split)
            for i, (s, f) in enumerate(zip(scores, fired, strict=True))]


def anchor_of(observations: list[Observation], k: int = 4, commit: str = "a" * 40) -> Anchor:
    return Anchor.from_observations(commit, observations, k)


def evidence(baseline: list[Observation], candidate: list[Observation], targeted: list[str],
             control: list[str] | None = None, guard: list[str] | None = None,
             anchor: Anchor | None = None, k: int = 4, target: str = T) -> Evidence:
    sel = Selection(strategy="test", targeted=targeted, control=control or [], guard=guard or [])
    return Evidence(target=target, k=k, selection=sel, anchor=anchor or anchor_of(baseline, k),
                    baseline=baseline, candidate=candidate)


def candidate(commit: str = "c" * 40, targets: str = T, round: int = 1, **kw) -> Candidate:
    return Candidate(branch=f"candidate/r{round}-test", commit=commit, base="a" * 40, round=round,
                     targets=targets, **kw)
