"""A model role that fails is said on the run's progress output, as the analyst's failure is."""

from __future__ import annotations

import io

import pytest

from evoharness.graph.desk import Desk
from evoharness.graph.progress import Progress
from evoharness.roles import RoleError
from evoharness.roles.errors import EndpointDown
from evoharness.roles.models import Pattern, Review


class _Book:
    def load(self, ids):
        return []

    def labels(self, trajs):
        return []


PATTERN = Pattern(id="p-F3.repeated_action", signal="F3.repeated_action", failure_class="F3", count=3, share=0.6,
                  task_ids=["task-a", "task-b"], root_cause="no guard", surface="policies.yaml")


def _desk(tmp_path, critic, engineer, out: io.StringIO, model: str | None = None) -> Desk:
    """A desk over no trajectories, no harness view and no candidate made before, with these two roles."""
    desk = Desk(_Book(), None, (None, critic, engineer), Progress(out), run_dir=tmp_path, max_candidates=1,
                evidence_paths=[], heldout_tasks=[], model=model)
    desk.harness_view = lambda: None
    desk.evidence = lambda: []
    desk._existing_candidate = lambda round, p: None
    return desk


class _Failing:
    def review(self, *a, **kw):
        raise RoleError("critic", "model call failed: HTTP 429: slow down", 3, [])

    def propose(self, *a, **kw):
        raise RoleError("engineer", "no complete reply within the 90s deadline", 1, [])


def test_a_critic_and_an_engineer_that_fail_are_said_on_the_progress_output(tmp_path):
    """`evoharness run` with LLM roles on a slow or refusing endpoint printed 'analyst failed: ...' when the
    analyst failed, but nothing for the critic or the engineer: after 'analyst found 1 pattern(s)' a
    minute of silence, then '0 candidate(s), 1 dropped', the reason only in the summary."""
    out = io.StringIO()
    desk = _desk(tmp_path, _Failing(), _Failing(), out)
    p = PATTERN
    [review] = desk.critique([p], [], {})
    assert "critic failed: critic: model call failed: HTTP 429: slow down" in out.getvalue()
    review = review.model_copy(update={"approved": True})
    candidates, dropped = desk.engineer([p], [review], 1)
    assert not candidates and "engineer failed" in dropped[0].reason
    assert "engineer failed: engineer: no complete reply within the 90s deadline" in out.getvalue()


class _Down:
    def review(self, *a, **kw):
        raise EndpointDown("critic: model call failed: HTTP 503: busy (after 3 attempts)")

    def propose(self, *a, **kw):
        raise EndpointDown("engineer: model call failed: HTTP 503: busy (after 3 attempts)")


def test_a_critic_and_an_engineer_whose_endpoint_is_down_stop_the_round_for_a_pause(tmp_path):
    """The endpoint's failure is not dropped as the role's: the node raises, and the run pauses (not a lost round)."""
    desk = _desk(tmp_path, _Down(), _Down(), io.StringIO())
    p = PATTERN
    with pytest.raises(EndpointDown, match="critic"):
        desk.critique([p], [], {})
    review = Review(pattern_id=p.id, approved=True, accommodation=False, send_back=False, notes="ok")
    with pytest.raises(EndpointDown, match="engineer"):
        desk.engineer([p], [review], 1)


class _Watching:
    """Roles that remember what the progress output said when they were called."""

    def __init__(self, out: io.StringIO) -> None:
        self.out, self.seen = out, {}

    def review(self, *a, **kw):
        self.seen["critic"] = self.out.getvalue()
        return Review(pattern_id="p-F3.repeated_action", approved=False, accommodation=False, send_back=False,
                      notes="no")


def test_a_model_role_is_said_on_the_progress_output_before_it_is_asked(tmp_path):
    """With LLM roles the progress output and the service's `last_note` said 'seed anchor: mean 0.417 ...' for the
    100 s the analyst took on SmolLM2 (159 s a role at load 18: docs/roles.md): a run that looked hung."""
    out = io.StringIO()
    roles = _Watching(out)
    desk = _desk(tmp_path, roles, None, out, model="openai:smollm2")
    desk.critique([PATTERN], [], {})
    assert "critic: asking openai:smollm2 about F3.repeated_action" in roles.seen["critic"]
