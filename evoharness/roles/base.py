"""The three role Protocols the graph calls. Playbook and LLM implementations both satisfy them."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evoharness.diagnosis.models import Label
from evoharness.harness_repo.models import Edit
from evoharness.roles.models import HarnessView, Pattern, Review
from evoharness.traces.models import Trajectory


@runtime_checkable
class Analyst(Protocol):
    """Finds recurring *process* failure patterns and attributes each to a harness surface.

    ``trajectories`` and ``labels`` are parallel lists (labels[i] belongs to trajectories[i]; a label
    is matched by ``trajectory_id``). Only labels whose class is F2/F3 count: content failures
    (F1/F4) and healthy runs are ignored, so they never reach the engineer. Returns at most
    ``max_patterns`` patterns, most common first, each with evidence from the given trajectories.
    ``feedback`` holds the critic's notes on patterns it sent back: {pattern id: notes}, or a list of
    review dicts (``pattern_id`` + ``notes``); the analyst should re-attribute those patterns.
    Returns [] when nothing is worth an edit. Raises `RoleError` when a model failed after retries.
    """

    def analyse(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
                max_patterns: int, feedback: Any = None) -> list[Pattern]: ...


@runtime_checkable
class Critic(Protocol):
    """Challenges a pattern before any edit is written.

    Checks the attribution against the labels (does the evidence really show the signal?), flags an
    edit that would merely accommodate the current model (``accommodation``), predicts which tasks
    should flip, and may ask to ``send_back`` the pattern for re-attribution. ``approved`` is False
    whenever attribution fails or the fix is an accommodation. Never raises for a weak pattern (that
    is a verdict); raises `RoleError` when a model failed after retries.
    """

    def review(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> Review: ...


@runtime_checkable
class Engineer(Protocol):
    """Writes the harness `Edit` (with its commit message) for an approved pattern.

    Returns None when there is nothing to change (the fix is already in the harness). The edit only
    touches editable, unprotected paths and carries no instruction taken from trace text; otherwise
    `EditRejected` (playbook) or `RoleError` (LLM, after retries) is raised with the reason.
    """

    def propose(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None: ...
