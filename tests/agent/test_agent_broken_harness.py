"""A broken harness is a failed trajectory with the reason, never an exception."""

from __future__ import annotations

import pytest

from evoharness.agent.runner import run_rollout
from evoharness.agent.scripted import ScriptedModel
from evoharness.traces.models import Termination


def call(name: str, args: str) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]}


@pytest.mark.parametrize(("files", "policies", "prompt", "reason"), [
    ({"middleware/bad.py": "def before_model(:\n"}, None, "x {{ task }}", "SyntaxError"),
    ({"middleware/boom.py": "raise RuntimeError('import boom')\n"}, None, "x", "import boom"),
    ({"middleware/crash.py": "def before_tool(call, ctx):\n    return 1 / 0\n"}, None, "x", "ZeroDivisionError"),
    ({"tools/t.py": "TOOLS = [42]\n"}, None, "x", "TOOLS entries"),
    ({"middleware/ex.py": "import sys\nsys.exit(3)\n"}, None, "x", "SystemExit"),
    ({}, None, "{{ nonesuch }}", "UndefinedError"),
    ({}, "max_steps: [", "x", "invalid YAML"),
])
def test_broken_harness_yields_failed_trajectory(harness, files, policies, prompt, reason):
    h = harness(files=files, prompt=prompt)
    if policies is not None:
        (h / "policies.yaml").write_text(policies)
    model = ScriptedModel([call("get_order", '{"order_id": "A-100"}'), "shipped"])
    traj = run_rollout(h, "synthetic", "status_A-100", "scripted:test", seed=1, model=model)
    assert traj.termination == Termination.error
    assert traj.final_answer is None and traj.score == 0.0
    errors = [e for e in traj.events if e.type == "harness_error"]
    assert errors and reason in errors[0].detail


def test_model_failure_is_a_failed_trajectory(harness):
    traj = run_rollout(harness(), "synthetic", "status_A-100", "scripted:test", seed=1, model=ScriptedModel([]))
    assert traj.termination == Termination.error
    assert any(e.type == "model_error" and "exhausted" in e.detail for e in traj.events)
