from __future__ import annotations

import pytest

from evoharness.envs import get_environment
from evoharness.envs.base import ToolError
from evoharness.errors import InputError


def test_synthetic_split_is_fixed_and_disjoint():
    env = get_environment("synthetic")
    dev, held = env.list_tasks("dev"), env.list_tasks("heldout")
    assert len(dev) + len(held) == len(env.list_tasks("all")) == 20
    assert 10 <= len(dev) <= 17 and held
    assert {t.id for t in dev}.isdisjoint({t.id for t in held})
    assert [t.id for t in env.list_tasks("dev")] == [t.id for t in dev]


def test_ground_truth_solves_every_task_and_state_is_fresh():
    env = get_environment("synthetic")
    for task in env.list_tasks("all"):
        state = env.reset(task)
        outs = [env.call_tool(state, c.name, c.args) for c in env.ground_truth_calls(task)]
        assert env.score(task, state, "\n".join(outs), []) == 1.0, task.id
        assert env.score(task, env.reset(task), None, []) == 0.0, task.id


def test_tool_errors_have_kinds():
    env = get_environment("synthetic")
    state = env.reset(env.list_tasks("all")[0])
    with pytest.raises(ToolError) as e:
        env.call_tool(state, "nope", {})
    assert e.value.kind == "unknown_tool"
    with pytest.raises(ToolError) as e:
        env.call_tool(state, "get_order", {"orderId": "A-100"})
    assert e.value.kind == "invalid_arguments"


def test_unknown_env_and_split_are_input_errors():
    with pytest.raises(InputError):
        get_environment("nonesuch")
    with pytest.raises(InputError):
        get_environment("synthetic").list_tasks("train")
