"""Importers that hand their messages over to the trajectory (``Trajectory.with_messages(..., checked=True)``) instead
of having validation copy each: what they give must be what validation would have given -- every message a plain
dict of its own with a string role, and the trajectory equal to the one validated from its own fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HANDED_OVER = ["traces/tau2", "traces/atif", "traces/autogen", "traces/langsmith", "traces/ag2", "magentic_synthetic",
               "traces/tau_retail"]


@pytest.mark.parametrize("where", HANDED_OVER)
def test_handed_over_messages_are_what_validation_would_make(where):
    trajectories = list(load_paths([FIXTURES / where]))
    assert trajectories
    for t in trajectories:
        assert t.messages
        assert all(type(m) is dict and type(m["role"]) is str for m in t.messages)
        assert len({id(m) for m in t.messages}) == len(t.messages), "a message dict held twice: validation copies each"
        validated = Trajectory(**{name: getattr(t, name) for name in Trajectory.model_fields})
        assert validated == t and validated.messages is not t.messages
