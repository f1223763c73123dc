"""The LLM roles against the real llama.cpp server (SmolLM2-135M-Instruct, 2,048-token context).

What must hold with a model this small: each role returns a schema-valid, checked object -- a pattern,
a review, an edit -- within its deadline, through the grammar-constrained ``json_object_schema``
method after the server refuses ``json_schema``. Validity, not quality: the model mostly copies the
prompt's worked example (see docs/roles.md). Skipped when llama-cpp-python is not installed
(``scripts/install-endpoint.sh``), unless EVOHARNESS_TEST_ENDPOINT=1, which makes that a failure.
"""

from __future__ import annotations

import time

import pytest

from evoharness.harness_repo.models import Edit
from evoharness.roles import make_roles
from evoharness.roles.config import RolesConfig
from evoharness.roles.models import Pattern, Review
from evoharness.roles.playbook import PlaybookAnalyst
from tests.conftest import LLAMA_MODEL, REAL_ENDPOINT_MARKS
from tests.roles.scenario import scenario, seed_view

pytestmark = REAL_ENDPOINT_MARKS


@pytest.fixture(scope="module")
def roles(llama_server):
    cfg = RolesConfig(kind="llm", model=f"openai:{LLAMA_MODEL}", base_url=llama_server, max_tokens=256,
                      context_tokens=2048, deadline_s=240, max_retries=2)
    return make_roles("llm", cfg)


def _timed(label: str, model, fn):
    calls, start = model.calls, time.monotonic()
    out = fn()
    print(f"\n{label}: {time.monotonic() - start:.1f}s, {model.calls - calls} request(s): {out!r}"[:600])
    return out


def test_analyst_returns_a_valid_pattern(roles):
    analyst = roles[0]
    trajs, labels = scenario()
    patterns = _timed("analyst", analyst.model, lambda: analyst.analyse(trajs, labels, seed_view(), 2))
    assert patterns and all(isinstance(p, Pattern) for p in patterns)
    fired = {lab.first_signal.id for lab in labels if lab.first_signal}
    assert {p.signal for p in patterns} <= fired and all(p.evidence and p.root_cause for p in patterns)


def test_critic_returns_a_valid_review(roles):
    critic = roles[1]
    trajs, labels = scenario()
    [pattern, *_] = PlaybookAnalyst().analyse(trajs, labels, seed_view(), 2)
    review = _timed("critic", critic.model, lambda: critic.review(pattern, seed_view(), trajs, labels))
    assert isinstance(review, Review) and review.pattern_id == pattern.id
    assert set(review.predicted_flips) <= set(pattern.task_ids)


def test_engineer_returns_a_valid_edit(roles):
    engineer = roles[2]
    trajs, labels = scenario()
    [pattern, *_] = PlaybookAnalyst().analyse(trajs, labels, seed_view(), 2)
    approved = Review(pattern_id=pattern.id, approved=True, notes="approved for the test")
    edit = _timed("engineer", engineer.model, lambda: engineer.propose(pattern, approved, seed_view()))
    assert isinstance(edit, Edit) and edit.targets == pattern.signal and edit.changes  # checked by the guard
    assert all(seed_view().editable(c.path) for c in edit.changes)
