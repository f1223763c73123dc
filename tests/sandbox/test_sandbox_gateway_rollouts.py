"""Rollouts in bubblewrap that reach their model only through the gateway (fake upstream on loopback)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import git
import pytest

from evoharness.agent.scripted import ScriptedModel
from evoharness.errors import InfraError
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.base import ProcessSandbox
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.executor import LocalExecutor, endpoint_down
from evoharness.sandbox.gateway_upstream import ModelUpstream
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination, Trajectory
from tests.sandbox.gateway_fakes import (
    closed_port,
    completion,
    plain_harness,
    tool_call,
)

FAST = GatewayConfig(retries=1, backoff_s=0.01, backoff_max_s=0.02, timeout_s=10, connect_timeout_s=2)
LIMITS = Limits(wall_seconds=60, memory_mb=2048, pids=32)
SECRET = "sk-host-secret-7f3a"

# A worker that probes the sandbox instead of running the agent: it tries the upstream's loopback
# port directly, then the gateway's socket by hand, and reports what it saw (and its whole env).
PROBE = r'''
import json, os, socket, sys, http.client
req = json.load(open(sys.argv[1]))
port = int(open(os.path.join(req["harness_dir"], "port.txt")).read())
report = {"request": req}
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    report["direct"] = "connected"
except OSError as e:
    report["direct"] = f"{type(e).__name__}: {e}"
sock, _, rest = req["gateway"].removeprefix("gateway:").partition("?rollout=")
token, _, model = rest.partition("#")

class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)

conn = UnixConnection("gateway")
body = json.dumps({"model": "anything", "messages": [{"role": "user", "content": "ping"}]})
conn.request("POST", f"/r/{token}/v1/chat/completions", body, {"Content-Type": "application/json"})
resp = conn.getresponse()
report["gateway"] = {"status": resp.status, "body": json.loads(resp.read())}
report["env"] = dict(os.environ)
report["proc_environ"] = open("/proc/self/environ", "rb").read().decode(errors="replace")
report["socket_dir_listing"] = sorted(os.listdir(os.path.dirname(sock)))
traj = {"id": "probe", "task_id": req["task_id"], "final_answer": "probed", "score": 1.0, "meta": {"probe": report}}
open(sys.argv[2], "w").write(json.dumps(traj))
'''


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    """A plain (non-git) harness directory: the seed prompt, nothing else."""
    return plain_harness(tmp_path)


def _answer_ada() -> list[tuple[int, dict]]:
    return [(200, completion(None, [tool_call("lookup_contact", {"name": "Ada Lovelace"})])),
            (200, completion("Ada's email is ada@example.org"))]


@pytest.mark.parametrize("sandbox", [BwrapSandbox, ProcessSandbox])
def test_real_agent_in_a_sandbox_reaches_the_model_through_the_gateway(harness, upstream, monkeypatch, sandbox):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    upstream.queue(*_answer_ada())
    with LocalExecutor(harness, "synthetic", f"openai:{upstream.url}#fake-model", sandbox=sandbox(),
                       limits=LIMITS, gateway=FAST) as ex:
        [traj] = ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
        sock = ex.gateway().socket
    assert not sock.exists()  # closed with the executor
    assert traj.termination == Termination.delivered, traj.events
    assert traj.score == 1.0 and "ada@example.org" in traj.final_answer
    assert traj.model == f"openai:{upstream.url}#fake-model"  # the run's model, not the gateway plumbing
    assert [m["role"] for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (traj.usage.prompt_tokens, traj.usage.completion_tokens) == (22, 14)
    gw = traj.meta["gateway"]
    assert (gw["requests"], gw["errors"], gw["retries"]) == (2, 0, 0)
    assert gw["agent_reported"] == {"prompt_tokens": 22, "completion_tokens": 14}
    assert [r["body"]["model"] for r in upstream.requests] == ["fake-model", "fake-model"]
    assert all(r["headers"]["Authorization"] == f"Bearer {SECRET}" for r in upstream.requests)
    assert upstream.requests[1]["body"]["messages"][-1]["role"] == "tool"  # the tool result went back


def test_batched_rollouts_get_their_own_gateway_accounts(harness, upstream):
    upstream.queue(*_answer_ada(), (200, completion("no idea", usage={"prompt_tokens": 5, "completion_tokens": 3})))
    reqs = [RolloutRequest(task_id="contact_0", harness_commit="HEAD", seed=0),
            RolloutRequest(task_id="contact_1", harness_commit="HEAD", seed=1)]
    with LocalExecutor(harness, "synthetic", f"openai:{upstream.url}#m", sandbox=BwrapSandbox(), limits=LIMITS,
                       gateway=FAST, batch_size=2) as ex:
        first, second = ex.run(reqs)
    assert first.meta["gateway"]["requests"] == 2 and first.usage.prompt_tokens == 22
    assert second.meta["gateway"]["requests"] == 1 and second.usage.prompt_tokens == 5
    assert second.score == 0.0 and first.score == 1.0


def test_an_endpoint_down_for_every_rollout_is_an_infrastructure_error(harness):
    """Not N zero scores that would poison an anchor: the caller retries, then pauses the run."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with LocalExecutor(harness, "synthetic", f"openai:{url}#m", sandbox=BwrapSandbox(), limits=LIMITS,
                       gateway=FAST) as ex:
        with pytest.raises(InfraError, match="model endpoint down for all 1 rollouts.*unreachable after 2") as e:
            ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
    assert e.value.retryable


@pytest.mark.parametrize("status, payload, why", [
    (429, {"error": {"message": "slow down"}}, "upstream HTTP 429 after 2 attempts: slow down"),
    (500, {"error": {"message": "boom"}}, "upstream HTTP 500 after 2 attempts: boom"),
    (200, {"choices": []}, r"upstream replied HTTP 200 with no chat completion \(no choices with a message\)"),
    (200, {"object": "chat.completion"}, "upstream replied HTTP 200 with no chat completion"),
])
def test_an_endpoint_refusing_every_rollout_after_the_retries_is_an_infrastructure_error(harness, upstream,
                                                                                          status, payload, why):
    """An endpoint that answered 429 (or 500) to every request of every rollout, retries spent, is down too:
    `evoharness run` on such an endpoint labelled the anchor's rollouts F3.no_delivery and verified harness edits
    against them (a run seen on a fake 429 endpoint)."""
    upstream.replies.extend([(status, payload)] * 4)
    with LocalExecutor(harness, "synthetic", f"openai:{upstream.url}#m", sandbox=BwrapSandbox(), limits=LIMITS,
                       gateway=FAST) as ex:
        with pytest.raises(InfraError, match=f"model endpoint down for all 1 rollouts: {why}") as e:
            ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
    assert e.value.retryable


def _traj(gateway: dict | None, score: float = 0.0) -> Trajectory:
    meta = {} if gateway is None else {"gateway": gateway}
    return Trajectory(id="t", task_id="x", messages=[], score=score, termination=Termination.error, meta=meta)


def test_a_rollout_whose_endpoint_answered_keeps_the_others_failures_as_data():
    down = {"requests": 1, "errors": 1, "last_error": "upstream http://h/v1 unreachable after 3 attempts: boom"}
    slow = {"requests": 2, "errors": 2, "last_error": "upstream timed out after 3 attempts"}
    fine = {"requests": 3, "errors": 1, "last_error": "upstream unreachable after 3 attempts"}  # 2 replies came
    refused = {"requests": 1, "errors": 1, "last_error": "upstream HTTP 400: too long"}  # the endpoint answered
    limited = {"requests": 2, "errors": 2, "last_error": "upstream HTTP 429 after 4 attempts: slow down"}
    page = {"requests": 1, "errors": 1, "last_error": "upstream replied HTTP 200 with a body that is not a JSON object"}
    assert endpoint_down([_traj(limited), _traj(page)]).startswith("upstream HTTP 429 after 4 attempts")
    assert endpoint_down([_traj(page)]).endswith("not a JSON object")
    assert endpoint_down([_traj(down), _traj(slow)]).startswith("upstream http://h/v1 unreachable")
    assert endpoint_down([_traj(down), _traj(fine)]) is None
    assert endpoint_down([_traj(refused)]) is None
    assert endpoint_down([_traj(None)]) is None  # no gateway: nothing to judge
    assert endpoint_down([_traj({"requests": 1, "errors": 0, "user": down})]) is not None  # the customer's lane


def test_the_sandbox_reaches_the_model_only_through_the_socket_and_never_sees_the_key(tmp_path, upstream,
                                                                                       monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    path = tmp_path / "harness"
    repo = git.Repo.init(path)
    (path / "worker.py").write_text(PROBE)
    (path / "port.txt").write_text(str(upstream.port))
    repo.index.add(["worker.py", "port.txt"])
    sha = repo.index.commit("probe").hexsha
    with LocalExecutor(path, "synthetic", f"openai:{upstream.url}#m", sandbox=BwrapSandbox(), limits=LIMITS,
                       gateway=FAST, worker=[sys.executable, "{harness}/worker.py"]) as ex:
        [traj] = ex.run([RolloutRequest(task_id="contact_0", harness_commit=sha)])
    report = traj.meta["probe"]
    assert report["direct"] != "connected" and "Errno" in report["direct"]  # no network, not even loopback
    assert report["gateway"]["status"] == 200
    assert report["gateway"]["body"]["choices"][0]["message"]["content"] == "ok"
    assert report["socket_dir_listing"] == ["gw.sock"]  # only the socket is bound in, nothing beside it
    inside = json.dumps(report)
    assert SECRET not in inside and "OPENAI_API_KEY" not in inside
    assert report["request"]["model_spec"] == f"openai:{upstream.url}#m"
    assert report["request"]["gateway"].startswith("gateway:/")
    assert upstream.requests[-1]["headers"]["Authorization"] == f"Bearer {SECRET}"  # added outside
    assert traj.meta["gateway"]["requests"] == 1 and traj.usage.prompt_tokens == 11


def test_a_scripted_upstream_serves_sandboxed_rollouts_without_any_endpoint(harness):
    script = [{"role": "assistant", "content": "", "tool_calls": [tool_call("get_order", {"order_id": "A-100"})]},
              "Order A-100 is shipped."]
    with LocalExecutor(harness, "synthetic", "scripted-via-gateway", sandbox=BwrapSandbox(), limits=LIMITS,
                       gateway=FAST, upstream=ModelUpstream(lambda: ScriptedModel(list(script))), batch_size=2) as ex:
        trajs = ex.run([RolloutRequest(task_id="status_A-100", harness_commit="HEAD", seed=s) for s in (0, 1)])
    for traj in trajs:
        assert traj.score == 1.0 and traj.termination == Termination.delivered
        assert traj.meta["gateway"]["requests"] == 2 and traj.usage.completion_tokens > 0
