"""AgentDojo workspace: suite data loads offline, real tools run, the real utility check scores."""

from __future__ import annotations

import pytest

from evoharness.envs import get_environment
from evoharness.envs.base import ToolError


@pytest.fixture(scope="module")
def env():
    return get_environment("agentdojo:workspace")


def test_workspace_tasks_and_fixed_split(env):
    all_tasks = env.list_tasks("all")
    assert len(all_tasks) == 40
    dev, held = env.list_tasks("dev"), env.list_tasks("heldout")
    assert len(dev) + len(held) == 40 and 20 <= len(dev) <= 32
    assert all(t.id.startswith("user_task_") for t in all_tasks)  # utility tasks only, no injections
    assert env.get_task("user_task_0").prompt.startswith("Who else is invited")


def test_real_tools_and_utility_check(env):
    task = env.get_task("user_task_0")
    state = env.reset(task)
    calls = env.ground_truth_calls(task)
    assert calls[0].name == "search_calendar_events"
    out = env.call_tool(state, calls[0].name, calls[0].args)
    assert "networking" in out.lower()
    assert env.score(task, state, out, []) == 1.0
    assert env.score(task, env.reset(task), "I don't know", []) == 0.0
    assert env.score(task, env.reset(task), None, []) == 0.0


def test_state_changes_stay_in_one_rollout(env):
    task = env.get_task("user_task_0")
    state = env.reset(task)
    env.call_tool(state, "send_email", {"recipients": ["a@b.c"], "subject": "s", "body": "b"})
    assert len(env.reset(task).env.inbox.sent) < len(state.env.inbox.sent)


def test_schema_and_bad_arguments(env):
    task = env.get_task("user_task_0")
    schemas = {t["function"]["name"]: t["function"] for t in env.tools(task)}
    assert "query" in schemas["search_calendar_events"]["parameters"]["properties"]
    with pytest.raises(ToolError) as e:
        env.call_tool(env.reset(task), "search_calendar_events", {"search_query": "x"})
    assert e.value.kind == "invalid_arguments"
