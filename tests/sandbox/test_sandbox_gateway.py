"""The model gateway on its own: forwarding, per-rollout counts, retries, errors, the scripted upstream."""

from __future__ import annotations

import json
import stat

import httpx
import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from evoharness.agent.models import parse_gateway_spec
from evoharness.agent.runner import make_model
from evoharness.agent.scripted import ScriptedModel
from evoharness.errors import InputError
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.gateway import Gateway, start_gateway
from evoharness.sandbox.gateway_upstream import ModelUpstream
from tests.sandbox.gateway_fakes import closed_port, completion

FAST = GatewayConfig(retries=2, backoff_s=0.01, backoff_max_s=0.02, timeout_s=5, connect_timeout_s=2)
CHAT = {"model": "whatever", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def gateway(upstream, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    gw = start_gateway(f"openai:{upstream.url}#pinned-model", FAST)
    yield gw
    gw.close()


def client(gw: Gateway) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(gw.socket)), base_url="http://gateway", timeout=10)


def post(gw: Gateway, token: str, body) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    with client(gw) as c:
        return c.post(f"/r/{token}/v1/chat/completions", content=data,
                      headers={"Content-Type": "application/json", "Authorization": "Bearer sandbox-fake"})


def test_forwards_with_the_host_key_and_counts_tokens_per_rollout(gateway, upstream):
    a, b = gateway.open_rollout("a"), gateway.open_rollout("b")
    for token in (a, a, b):
        r = post(gateway, token, CHAT)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok"
    assert gateway.usage(a).prompt_tokens == 22  # readable while the rollout runs
    ua, ub = gateway.close_rollout(a), gateway.close_rollout(b)
    assert (ua.requests, ua.prompt_tokens, ua.completion_tokens, ua.errors) == (2, 22, 14, 0)
    assert (ub.requests, ub.prompt_tokens, ub.completion_tokens, ub.errors) == (1, 11, 7, 0)
    assert len(upstream.requests) == 3
    seen = upstream.requests[0]
    assert seen["path"] == "/v1/chat/completions"
    assert seen["body"]["model"] == "pinned-model"  # the sandbox cannot pick another model
    assert seen["body"]["messages"] == CHAT["messages"]
    assert seen["headers"]["Authorization"] == "Bearer sk-host-secret"  # the host's key, not the client's
    assert post(gateway, a, CHAT).status_code == 403  # a closed account is closed


def test_models_route(gateway, upstream):
    token = gateway.open_rollout()
    with client(gateway) as c:
        r = c.get(f"/r/{token}/v1/models")
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "fake"
    assert upstream.requests[0]["path"] == "/v1/models"


def test_a_503_is_retried_then_succeeds(gateway, upstream):
    upstream.queue((503, {"error": {"message": "busy"}}), (429, {"error": {"message": "slow down"}}))
    token = gateway.open_rollout()
    r = post(gateway, token, CHAT)
    assert r.status_code == 200
    assert len(upstream.requests) == 3
    u = gateway.close_rollout(token)
    assert (u.requests, u.retries, u.errors, u.prompt_tokens) == (1, 2, 0, 11)


def test_retries_give_up_with_the_upstreams_last_status(gateway, upstream):
    upstream.queue(*[(503, {"error": {"message": "still busy"}})] * 3)
    token = gateway.open_rollout()
    r = post(gateway, token, CHAT)
    assert r.status_code == 503 and r.json()["error"]["message"] == "still busy"
    assert len(upstream.requests) == 3  # 1 + FAST.retries
    u = gateway.close_rollout(token)
    assert (u.errors, u.retries) == (1, 2) and "503" in u.last_error


def test_a_400_is_passed_back_and_not_retried(gateway, upstream):
    upstream.queue((400, {"error": {"message": "response_format json_schema is not supported"}}))
    token = gateway.open_rollout()
    r = post(gateway, token, CHAT)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "response_format json_schema is not supported"
    assert len(upstream.requests) == 1
    u = gateway.close_rollout(token)
    assert (u.requests, u.errors, u.retries) == (1, 1, 0)
    assert "json_schema" in u.last_error


def test_upstream_down_is_a_502_saying_so_after_the_retries(monkeypatch):
    gw = start_gateway(f"openai:http://127.0.0.1:{closed_port()}/v1#m", FAST)
    try:
        token = gw.open_rollout()
        r = post(gw, token, CHAT)
        assert r.status_code == 502
        assert "unreachable after 3 attempts" in r.json()["error"]["message"]
        u = gw.close_rollout(token)
        assert (u.errors, u.retries) == (1, 2)
    finally:
        gw.close()


@pytest.mark.parametrize("body, fragment", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    ({"model": "m"}, "'messages' must be a non-empty list"),
    ({"model": "m", "messages": ["hi"]}, "messages[0] must be an object"),
    ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "'model' must be a string"),
    ({**CHAT, "stream": True}, "streaming is not supported"),
    (b"", "empty request body"),
])
def test_malformed_requests_get_a_400_json_error_and_never_reach_the_upstream(gateway, upstream, body, fragment):
    token = gateway.open_rollout()
    r = post(gateway, token, body)
    assert r.status_code == 400
    assert fragment in r.json()["error"]["message"]
    assert upstream.requests == []
    assert gateway.close_rollout(token).errors == 1


def test_unknown_tokens_paths_and_methods_are_json_errors(gateway, upstream):
    token = gateway.open_rollout()
    with client(gateway) as c:
        assert c.post("/r/not-a-token/v1/chat/completions", json=CHAT).status_code == 403
        no_prefix = c.post("/v1/chat/completions", json=CHAT)
        assert no_prefix.status_code == 404 and "/r/<rollout>/v1" in no_prefix.json()["error"]["message"]
        assert c.post(f"/r/{token}/v1/embeddings", json={}).status_code == 404
        assert c.get(f"/r/{token}/v1/chat/completions").status_code == 405
        assert c.delete(f"/r/{token}/v1/models").status_code == 405
    assert upstream.requests == []


def test_socket_is_world_connectable_in_a_private_directory_removed_on_close(gateway):
    sock = gateway.socket
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o711
    assert stat.S_IMODE(sock.stat().st_mode) == 0o777 and stat.S_ISSOCK(sock.stat().st_mode)
    gateway.close()
    assert not sock.parent.exists()


def test_scripted_upstream_serves_each_rollout_its_own_script_to_the_gateway_client():
    script = [{"role": "assistant", "content": "",
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "lookup", "arguments": "{\"q\": \"x\"}"}}]},
              "the answer is 42"]
    gw = start_gateway("scripted-answers", FAST, ModelUpstream(lambda: ScriptedModel(list(script))))
    try:
        for _ in range(2):  # two rollouts: each replays the whole script
            token = gw.open_rollout()
            model = make_model(gw.spec(token, "scripted-answers"), seed=0)
            first = model.invoke([HumanMessage("q?")], tools=[{"type": "function", "function": {
                "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}])
            assert first.tool_calls[0]["name"] == "lookup" and first.tool_calls[0]["args"] == {"q": "x"}
            second = model.invoke([HumanMessage("q?"), first, ToolMessage("42", tool_call_id="c1")])
            assert second.content == "the answer is 42"
            assert second.usage_metadata["input_tokens"] > 0
            u = gw.close_rollout(token)
            assert u.requests == 2 and u.prompt_tokens > 0 and u.completion_tokens > 0 and u.errors == 0
            token_left = gw.open_rollout()
            third = post(gw, token_left, CHAT)  # a fresh rollout starts at the top of the script
            assert third.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "lookup"
            gw.close_rollout(token_left)
    finally:
        gw.close()


def test_a_scripted_model_that_runs_out_is_a_500_error_reply():
    gw = start_gateway("m", FAST, ModelUpstream(lambda: ScriptedModel(["only one"])))
    try:
        token = gw.open_rollout()
        assert post(gw, token, CHAT).status_code == 200
        r = post(gw, token, CHAT)
        assert r.status_code == 500 and "ScriptExhausted" in r.json()["error"]["message"]
    finally:
        gw.close()


@pytest.mark.parametrize("spec", ["gateway:relative.sock#m", "gateway:/x.sock", "gateway:/x.sock?user=1#m",
                                  "gateway:/x.sock?rollout=#m", "gateway:/x.sock?rollout=a/b#m"])
def test_bad_gateway_specs_are_input_errors(spec):
    with pytest.raises(InputError):
        make_model(spec, 0)


def test_gateway_spec_round_trip():
    assert parse_gateway_spec("gateway:/tmp/g/gw.sock?rollout=abc#smollm2") == ("/tmp/g/gw.sock", "abc", "smollm2")


def test_openai_spec_required_without_an_upstream():
    with pytest.raises(InputError, match="openai:URL#model"):
        start_gateway("scripted:weak", FAST)


def test_reply_without_usage_is_counted_as_missing(gateway, upstream):
    upstream.queue((200, completion(usage=None)))
    token = gateway.open_rollout()
    assert post(gateway, token, CHAT).status_code == 200
    u = gateway.close_rollout(token)
    assert (u.requests, u.prompt_tokens, u.usage_missing) == (1, 0, 1)


def test_bwrap_refuses_a_socket_path_that_is_not_a_socket(tmp_path):
    from evoharness.errors import InfraError
    from evoharness.sandbox.bwrap import BwrapSandbox
    from evoharness.sandbox.models import Limits

    plain = tmp_path / "not.sock"
    plain.write_text("")
    with pytest.raises(InfraError, match="not a Unix socket"):
        BwrapSandbox().argv(["true"], harness_dir=tmp_path, workdir=tmp_path, limits=Limits(), uid=None,
                            sockets=[plain])


def test_bwrap_binds_each_socket_read_only_at_its_own_path(gateway, tmp_path):
    from evoharness.sandbox.bwrap import BwrapSandbox
    from evoharness.sandbox.models import Limits

    argv = BwrapSandbox().argv(["true"], harness_dir=tmp_path, workdir=tmp_path, limits=Limits(), uid=None,
                               sockets=[gateway.socket])
    i = argv.index(str(gateway.socket))
    assert argv[i - 1] == "--ro-bind" and argv[i + 1] == str(gateway.socket)
    assert str(gateway.socket.parent) in argv  # its directory is made inside, empty but for the socket


def test_the_gateway_key_cannot_be_allow_listed_into_a_sandbox(monkeypatch):
    from evoharness.sandbox.config import SandboxConfig
    from evoharness.sandbox.factory import passthrough_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-host")
    monkeypatch.setenv("CUSTOMER_KEY", "sk-customer")
    monkeypatch.setenv("DATA_DIR", "/data")
    for names in (["DATA_DIR", "OPENAI_API_KEY"], ["CUSTOMER_KEY"]):
        cfg = SandboxConfig.model_validate({"env_passthrough": names,
                                            "gateway": {"user_api_key_env": "CUSTOMER_KEY"}})
        with pytest.raises(InputError, match="gateway's API key"):
            passthrough_env(cfg)
    assert passthrough_env(SandboxConfig(env_passthrough=["DATA_DIR"])) == {"DATA_DIR": "/data"}
