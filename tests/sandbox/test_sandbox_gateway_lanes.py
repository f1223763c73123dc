"""Gateway lanes: an agent account and a simulated user's account on one socket, each pinned to its own model."""

from __future__ import annotations

import pytest

from evoharness.errors import InputError
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.gateway import AGENT, USER, Gateway, Lane, start_gateway
from evoharness.sandbox.gateway_upstream import ModelUpstream
from tests.sandbox.gateway_fakes import FakeUpstream
from tests.sandbox.test_sandbox_gateway import CHAT, FAST, client, post


@pytest.fixture
def upstreams():
    agent, user = FakeUpstream(), FakeUpstream()
    yield agent, user
    agent.close()
    user.close()


def test_each_token_reaches_only_its_lanes_upstream_and_model_and_is_counted_apart(upstreams, monkeypatch):
    agent_up, user_up = upstreams
    monkeypatch.setenv("OPENAI_API_KEY", "sk-agent")
    monkeypatch.setenv("CUST_KEY", "sk-cust")
    cfg = FAST.model_copy(update={"user_api_key_env": "CUST_KEY"})
    with start_gateway(f"openai:{agent_up.url}#agent-model", cfg, user_spec=f"openai:{user_up.url}#cust") as gw:
        assert set(gw.lanes) == {AGENT, USER}
        a, u = gw.open_rollout("t#0"), gw.open_rollout("t#0 user", lane=USER)
        for token in (a, u, u):
            assert post(gw, token, CHAT).status_code == 200
        with client(gw) as c:
            assert c.get(f"/r/{u}/v1/models").status_code == 200
        ua, uu = gw.close_rollout(a), gw.close_rollout(u)
    assert (ua.requests, ua.prompt_tokens) == (1, 11) and (uu.requests, uu.prompt_tokens) == (2, 22)
    assert [r["body"]["model"] for r in agent_up.requests] == ["agent-model"]
    assert [r["body"] and r["body"]["model"] for r in user_up.requests] == ["cust", "cust", None]  # + GET /models
    assert agent_up.requests[0]["headers"]["Authorization"] == "Bearer sk-agent"
    assert {r["headers"]["Authorization"] for r in user_up.requests} == {"Bearer sk-cust"}


def test_user_lane_alone_and_its_key_defaults_to_the_agents(upstreams, monkeypatch):
    _, user_up = upstreams
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host")
    with start_gateway(None, FAST, user_spec=f"openai:{user_up.url}#cust") as gw:
        assert list(gw.lanes) == [USER]
        with pytest.raises(KeyError, match="no 'agent' lane"):
            gw.open_rollout("x")
        token = gw.open_rollout("x", lane=USER)
        assert post(gw, token, CHAT).status_code == 200
    assert user_up.requests[0]["headers"]["Authorization"] == "Bearer sk-host"


def test_a_bad_user_spec_is_an_input_error_and_nothing_is_left_open(upstreams):
    closed = []

    class Tracked(ModelUpstream):
        def close(self) -> None:
            closed.append(True)

    with pytest.raises(InputError, match="openai:URL#model"):
        start_gateway("scripted", GatewayConfig(), Tracked(lambda: None), user_spec="openai:no-model")
    assert closed == [True]  # the agent's upstream was closed, no socket kept
    with pytest.raises(ValueError):
        Gateway()


def test_closing_the_gateway_closes_every_lanes_upstream():
    closed = []

    class Tracked(ModelUpstream):
        def close(self) -> None:
            closed.append(self.model_name)

    gw = Gateway(Tracked(lambda: None, "a"), lanes={USER: Lane(Tracked(lambda: None, "u"), "u")})
    gw.start()
    gw.close()
    assert sorted(closed) == ["a", "u"]
