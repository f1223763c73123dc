"""Snapshots of the exact prompt each LLM role sends for a fixed scenario.

Update them after an intended prompt change with ``EVOHARNESS_UPDATE_SNAPSHOTS=1 pytest tests/roles``
(read at import: the test fixtures clear EVOHARNESS_* variables), then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoharness.roles.llm import LLMAnalyst, LLMCritic, LLMEngineer
from evoharness.roles.models import Review
from evoharness.roles.scripted import ScriptedChatModel, render_messages
from tests.roles import replies as R
from tests.roles.scenario import scenario, seed_view

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("EVOHARNESS_UPDATE_SNAPSHOTS") == "1"


def _check(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path}; run with EVOHARNESS_UPDATE_SNAPSHOTS=1 to create it")
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} prompt changed; review, then EVOHARNESS_UPDATE_SNAPSHOTS=1 to update"


def _run_all() -> dict[str, str]:
    trajs, labels = scenario()
    view = seed_view()
    model = ScriptedChatModel(replies=[R.ANALYST_OK, R.CRITIC_OK, R.ENGINEER_OK])
    pattern = LLMAnalyst(model).analyse(trajs, labels, view, 2)[0]
    review = LLMCritic(model).review(pattern, view, trajs, labels)
    assert isinstance(review, Review) and review.approved
    edit = LLMEngineer(model).propose(pattern, review, view)
    assert edit is not None
    assert len(model.calls) == 3
    return {role: render_messages(call) for role, call in zip(("analyst", "critic", "engineer"), model.calls,
                                                                strict=True)}


@pytest.mark.parametrize("role", ["analyst", "critic", "engineer"])
def test_role_prompt_matches_snapshot(role):
    _check(role, _run_all()[role])


def test_prompts_are_deterministic():
    assert _run_all() == _run_all()
