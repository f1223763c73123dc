"""tau2's LLM customer inside a sandbox, reached through the model gateway (fake OpenAI upstream on loopback).

The agent's model and the customer's model are both ``openai:`` specs served by one ``FakeUpstream``, which
answers requests in the order they come (one rollout's requests are sequential): agent, customer, agent, ...
The gateway pins each account to its lane's model, so the upstream tells them apart by ``model``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.envs import get_environment, user_model_spec, with_user_model
from evoharness.envs.tau2_user import ChatModelUser, check_user_spec, make_user
from evoharness.errors import InfraError, InputError
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination
from tests.sandbox.gateway_fakes import (
    closed_port,
    completion,
    plain_harness,
    tool_call,
)

pytest.importorskip("tau2")

FAST = GatewayConfig(retries=1, backoff_s=0.01, backoff_max_s=0.02, timeout_s=10, connect_timeout_s=2)
LIMITS = Limits(wall_seconds=60, memory_mb=2048, pids=32)
SECRET, CUSTOMER_SECRET = "sk-host-secret-7f3a", "sk-customer-secret-91bc"
GREETING = "Hi! How can I help you today?"
CLOSING = "Is there anything else I can help you with?"
AGENT_USAGE = {"prompt_tokens": 11, "completion_tokens": 7}


def customer_usage(n: int) -> dict[str, int]:
    return {"prompt_tokens": 100 * n, "completion_tokens": 10 * n}


def conversation(wants: str, n: int = 1) -> list[tuple[int, dict]]:
    """One rollout's upstream replies, in request order: the agent greets, the customer states ``wants``,
    the agent offers more help, the customer leaves, the agent closes."""
    return [(200, completion(None, [tool_call("ask_user", {"message": GREETING}, "c1")], usage=AGENT_USAGE)),
            (200, completion(wants, usage=customer_usage(n))),
            (200, completion(None, [tool_call("ask_user", {"message": CLOSING}, "c2")], usage=AGENT_USAGE)),
            (200, completion("No, that's all. Thank you! ###STOP###", usage=customer_usage(n))),
            (200, completion("Goodbye and have a nice day.", usage=AGENT_USAGE))]


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    return plain_harness(tmp_path)


def _executor(harness: Path, upstream_url: str, model: str, **kw) -> LocalExecutor:
    return LocalExecutor(harness, f"tau2:retail?user=openai:{upstream_url}#cust", model, sandbox=BwrapSandbox(),
                         limits=LIMITS, gateway=kw.pop("gateway", FAST), **kw)


def _scenario(task_id: str) -> str:
    env = get_environment("tau2:retail")
    return env._task(env.get_task(task_id)).user_scenario.instructions.known_info


def test_the_customer_talks_through_the_gateway_on_its_own_account(harness, upstream, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CUSTOMER_KEY", CUSTOMER_SECRET)
    upstream.queue(*conversation("I want to exchange my keyboard."))
    env_spec = f"tau2:retail?user=openai:{upstream.url}#cust"
    cfg = FAST.model_copy(update={"user_api_key_env": "CUSTOMER_KEY"})
    with _executor(harness, upstream.url, f"openai:{upstream.url}#agent-model", gateway=cfg) as ex:
        [traj] = ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])

    assert traj.termination == Termination.delivered, traj.events
    assert traj.final_answer == "Goodbye and have a nice day."
    replies = [m["content"] for m in traj.messages if m["role"] == "tool"]
    assert replies == ["I want to exchange my keyboard.",
                       "No, that's all. Thank you! ###STOP###\n(The customer has left the conversation.)"]
    # each account reaches only its own pinned model, each with its own host key
    models = [r["body"]["model"] for r in upstream.requests]
    assert models == ["agent-model", "cust", "agent-model", "cust", "agent-model"]
    keys = {r["body"]["model"]: r["headers"]["Authorization"] for r in upstream.requests}
    assert keys == {"agent-model": f"Bearer {SECRET}", "cust": f"Bearer {CUSTOMER_SECRET}"}
    # the customer got tau2's user-simulator prompt with this task's scenario, and the agent's words as "user"
    first, second = (r["body"]["messages"] for r in upstream.requests if r["body"]["model"] == "cust")
    assert first[0]["role"] == "system" and "User Simulation Guidelines" in first[0]["content"]
    assert _scenario("retail_43") in first[0]["content"]
    assert first[1:] == [{"role": "user", "content": GREETING}]
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "user"] and second[-1]["content"] == CLOSING
    # the agent's usage is the agent's account alone; the customer's is counted apart
    gw = traj.meta["gateway"]
    assert (gw["requests"], traj.usage.prompt_tokens, traj.usage.completion_tokens) == (3, 33, 21)
    user = gw["user"]
    assert (user["requests"], user["prompt_tokens"], user["completion_tokens"], user["errors"]) == (2, 200, 20, 0)
    # the trajectory names the env as given, not the per-rollout plumbing; no key anywhere in it
    assert traj.meta["env"] == env_spec
    dumped = traj.model_dump_json()
    assert SECRET not in dumped and CUSTOMER_SECRET not in dumped and "rollout=" not in dumped


def test_batched_rollouts_each_get_their_own_customer_account(harness, upstream):
    upstream.queue(*conversation("Exchange, please.", n=1), *conversation("Return, please.", n=3))
    reqs = [RolloutRequest(task_id="retail_43", harness_commit="HEAD"),
            RolloutRequest(task_id="retail_52", harness_commit="HEAD")]
    with _executor(harness, upstream.url, f"openai:{upstream.url}#agent-model", batch_size=2) as ex:
        first, second = ex.run(reqs)
    assert first.termination == second.termination == Termination.delivered
    assert [m["content"] for m in first.messages if m["role"] == "tool"][0] == "Exchange, please."
    assert [m["content"] for m in second.messages if m["role"] == "tool"][0] == "Return, please."
    assert (first.meta["gateway"]["user"]["prompt_tokens"], second.meta["gateway"]["user"]["prompt_tokens"]) == (
        200, 600)
    assert first.usage.prompt_tokens == second.usage.prompt_tokens == 33
    prompts = [r["body"]["messages"][0]["content"] for r in upstream.requests if r["body"]["model"] == "cust"]
    assert _scenario("retail_43") in prompts[0] and _scenario("retail_52") in prompts[2]  # one session each


def test_customer_upstream_down_is_an_infrastructure_error_with_the_reason(harness, upstream):
    down = f"http://127.0.0.1:{closed_port()}/v1"
    upstream.queue(*conversation("never heard")[:1])
    with LocalExecutor(harness, f"tau2:retail?user=openai:{down}#cust", f"openai:{upstream.url}#agent-model",
                       sandbox=BwrapSandbox(), limits=LIMITS, gateway=FAST) as ex:
        with pytest.raises(InfraError, match="model endpoint down.*unreachable after 2 attempts"):
            ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])
    assert len([r for r in upstream.requests if r["body"]["model"] == "agent-model"]) == 1  # the agent's lane worked


def test_a_scripted_agent_gets_a_gateway_for_the_customer_alone(harness, upstream):
    """scripted:oracle follows the task's expected actions and never calls ask_user: no customer request,
    but the rollout still runs with a customer account. The scripted agent itself is served host-side on the
    agent lane (its task reference never enters the sandbox), by no upstream: nothing reaches the endpoint."""
    with _executor(harness, upstream.url, "scripted:oracle") as ex:
        [traj] = ex.run([RolloutRequest(task_id="retail_52", harness_commit="HEAD")])
        gw = ex.gateway()
        assert list(gw.lanes) == ["agent", "user"]
        assert gw.lanes["agent"].upstream.name == "standin"
    assert traj.termination == Termination.delivered and traj.score == 1.0
    assert traj.meta["gateway"]["user"]["requests"] == 0
    assert upstream.requests == []


PROBE = r'''
import json, os, socket, sys, http.client
req = json.load(open(sys.argv[1]))
_, _, user = req["env_via"].partition("?user=")
sock, _, rest = user.removeprefix("gateway:").partition("?rollout=")
token, _, model = rest.partition("#")
report = {"request": req, "env": dict(os.environ), "proc_environ": open("/proc/self/environ", "rb").read().decode()}
port = int(req["env_spec"].split("127.0.0.1:")[1].split("/")[0])
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    report["direct"] = "connected"
except OSError as e:
    report["direct"] = f"{type(e).__name__}: {e}"

class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)

conn = UnixConnection("gateway")
body = json.dumps({"model": "gpt-expensive", "messages": [{"role": "user", "content": "hello"}]})
conn.request("POST", f"/r/{token}/v1/chat/completions", body, {"Content-Type": "application/json"})
report["status"] = conn.getresponse().status
traj = {"id": "probe", "task_id": req["task_id"], "final_answer": "probed", "score": 1.0, "meta": {"probe": report}}
open(sys.argv[2], "w").write(json.dumps(traj))
'''


def test_the_sandbox_gets_a_gateway_spec_for_the_customer_and_never_the_key(harness, upstream, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with _executor(harness, upstream.url, "scripted:oracle", worker=[sys.executable, "-c", PROBE]) as ex:
        [traj] = ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])
    report = traj.meta["probe"]
    assert report["request"]["env_spec"] == f"tau2:retail?user=openai:{upstream.url}#cust"
    assert report["request"]["env_via"].startswith("tau2:retail?user=gateway:/")
    # a scripted agent is served host-side behind the gateway (no upstream account, no key)
    assert report["request"]["gateway"].startswith("gateway:/") and report["request"]["gateway"].endswith(
        "#scripted:oracle")
    assert "connected" != report["direct"]  # no network in the sandbox
    assert report["status"] == 200 and upstream.requests[0]["body"]["model"] == "cust"  # pinned
    assert upstream.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"  # added outside
    assert SECRET not in json.dumps(report)
    assert traj.meta["gateway"]["user"]["requests"] == 1


def test_user_specs_and_bad_input(harness):
    check_user_spec("gateway:/tmp/gw/gw.sock?rollout=abc#cust")
    for bad in ("gateway:relative.sock?rollout=abc#cust", "gateway:/tmp/gw.sock?token=abc#cust",
                "gateway:/tmp/gw.sock?rollout=abc"):
        with pytest.raises(InputError):
            check_user_spec(bad)
    user = make_user("gateway:/nonexistent/gw.sock?rollout=abc#cust")  # no connection is made
    assert isinstance(user, ChatModelUser) and user.name == "gateway#cust"

    assert user_model_spec("tau2:retail?user=openai:http://h:1/v1#m") == "openai:http://h:1/v1#m"
    assert user_model_spec("tau2:retail") is None and user_model_spec("synthetic") is None
    spec = with_user_model("tau2:airline?user=openai:http://h:1/v1#m", "gateway:/s/gw.sock?rollout=t#m")
    assert spec == "tau2:airline?user=gateway:/s/gw.sock?rollout=t#m"
    env = get_environment(spec)
    assert env.user_spec == "gateway:/s/gw.sock?rollout=t#m"
    assert env._data is get_environment("tau2:airline")._data  # a new customer does not reload the domain

    for bad in ("tau2:retail?user=nonesuch", "tau2:retail?user=openai:http://h:1/v1",
                "tau2:retail?user=gateway:/tmp/gw.sock?rollout=abc#cust"):  # gateway: is the executor's to write
        ex = LocalExecutor(harness, bad, "scripted:oracle", sandbox=BwrapSandbox(), limits=LIMITS)
        with pytest.raises(InputError), ex:
            ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])


@pytest.mark.docker
@pytest.mark.skipif(not os.environ.get("EVOHARNESS_TEST_DOCKER"),
                    reason="EVOHARNESS_TEST_DOCKER not set (scripts/services.sh starts dockerd)")
def test_the_customer_talks_through_the_gateway_from_docker(harness, upstream):
    from evoharness.sandbox.docker import DockerSandbox

    upstream.queue(*conversation("I want to exchange my keyboard."))
    box = DockerSandbox()
    box.check()
    with LocalExecutor(harness, f"tau2:retail?user=openai:{upstream.url}#cust", f"openai:{upstream.url}#agent-model",
                       sandbox=box, limits=LIMITS, gateway=FAST) as ex:
        [traj] = ex.run([RolloutRequest(task_id="retail_43", harness_commit="HEAD")])
    assert traj.meta["sandbox"]["backend"] == "docker"
    assert traj.termination == Termination.delivered, traj.events
    assert [m["content"] for m in traj.messages if m["role"] == "tool"][0] == "I want to exchange my keyboard."
    assert traj.meta["gateway"]["user"]["requests"] == 2 and traj.meta["gateway"]["requests"] == 3


RAY_RUN = r"""
import json, sys
import ray
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.config import GatewayConfig, SandboxConfig
from evoharness.sandbox.models import Limits
from evoharness.sandbox.ray_executor import RayExecutor

path, url = sys.argv[1], sys.argv[2]
repo = init_harness(path)
reqs = [RolloutRequest(task_id=t, harness_commit=repo.main_head()) for t in ("retail_43", "retail_52")]
cfg = SandboxConfig(backend="bwrap", limits=Limits(wall_seconds=60, memory_mb=2048, pids=32),
                    gateway=GatewayConfig(retries=1, backoff_s=0.01, timeout_s=10, connect_timeout_s=2))
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False, _node_ip_address="127.0.0.1")
try:
    with RayExecutor(repo.path, f"tau2:retail?user=openai:{url}#cust", f"openai:{url}#agent-model", cfg=cfg,
                     batch_size=2) as ex:
        print(json.dumps([t.model_dump(mode="json") for t in ex.run(reqs)]))
finally:
    ray.shutdown()
"""


@pytest.mark.slow
def test_the_customer_talks_through_the_gateway_on_ray(tmp_path, upstream):
    """The Ray executor reuses LocalExecutor on the node: the node's gateway serves the customer too.
    In a fresh interpreter: Ray cannot be started again in a process that shut it down (test_sandbox_ray's)."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'evoharness[ray]')")
    upstream.queue(*conversation("Exchange, please.", n=1), *conversation("Return, please.", n=3))
    out = subprocess.run([sys.executable, "-c", RAY_RUN, str(tmp_path / "h"), upstream.url], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = json.loads(out.stdout.strip().splitlines()[-1])
    for traj, said, tokens in ((first, "Exchange, please.", 200), (second, "Return, please.", 600)):
        assert traj["meta"]["executor"]["kind"] == "ray"
        assert traj["termination"] == "delivered", traj["events"]
        assert [m["content"] for m in traj["messages"] if m["role"] == "tool"][0] == said
        assert traj["meta"]["gateway"]["user"]["prompt_tokens"] == tokens and traj["usage"]["prompt_tokens"] == 33
