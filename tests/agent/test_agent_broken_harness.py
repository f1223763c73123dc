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


class _Failing:
    """A chat model whose every call raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def invoke(self, messages, tools=None):
        raise self.error


class RateLimitError(Exception):
    """Named as the OpenAI client's and LiteLLM's (the runner reads the name: it imports neither)."""


class GatewayError(RuntimeError):
    """Named as ``agent.models.GatewayError``."""


@pytest.mark.parametrize(("error", "infra"), [
    (RateLimitError("Error code: 429 - rate limit reached"), True),   # the provider
    (ConnectionError("gateway: the reply was cut short"), True),      # the connection to the gateway
    (TimeoutError("timed out"), True),
    (GatewayError("gateway HTTP 502: upstream unreachable after 4 attempts"), True),  # the gateway: upstream failed
    (GatewayError("gateway HTTP 429: upstream HTTP 429 after 4 attempts"), True),
    (GatewayError("gateway HTTP 413: request body over 16 MB"), False),  # the request the harness built
    (ValueError("unknown message role 'robot'"), False),
])
def test_a_rollout_ended_by_the_infrastructure_is_class_e_not_the_harness(harness, error, infra):
    """A model call that fails because the provider, the connection or the gateway's upstream failed ends the rollout
    with a model_error event and an infra_error event: class E, neither lever (it was F3.no_delivery, harness). A
    failure the request earned (413) or any other exception keeps only model_error: F3.no_delivery."""
    from evoharness.diagnosis.labeller import Labeller

    traj = run_rollout(harness(), "synthetic", "status_A-100", "scripted:test", seed=1, model=_Failing(error))
    assert traj.termination == Termination.error and traj.score == 0.0
    assert any(e.type == "model_error" for e in traj.events)
    label = Labeller().label(traj)
    assert (label.failure_class, label.lever) == (("E", "none") if infra else ("F3", "harness"))
    assert any(e.type == "infra_error" for e in traj.events) == infra


def test_a_failing_simulated_customer_is_class_e():
    """tau2's simulated customer whose model failed: the environment broke the rollout (``UserSimulatorError``)."""
    from evoharness.agent.runner import infrastructure_fault
    from evoharness.envs.tau2_env import UserSimulatorError

    assert infrastructure_fault(UserSimulatorError("tau2 user simulator failed: ConnectionError: down"))
    assert not infrastructure_fault(RuntimeError("tau2 user simulator failed"))  # the class says so, not the words
