"""Incremental model requests: the gateway holds a rollout's conversation and the client sends only what was added;
the model, the upstream and the per-rollout counts see whole requests, and a delta that does not extend what the
rollout holds is refused, never merged."""

from __future__ import annotations

import copy
import json

import httpx
import pytest

from evoharness.agent.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from evoharness.agent.models import GatewayChatModel, from_messages, to_messages
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.gateway import start_gateway
from evoharness.sandbox.gateway_upstream import ModelUpstream

FAST = GatewayConfig(retries=0, timeout_s=5, connect_timeout_s=2)
CONV = "evoharness_conversation"
SYS, ASK = {"role": "system", "content": "be brief"}, {"role": "user", "content": "what is 6 x 7?"}


class Echo:
    """A chat model that records the messages it is handed and answers with their count (or raises on 'fail')."""

    def __init__(self, seen: list[list]) -> None:
        self.seen = seen

    def invoke(self, messages, tools=None):
        self.seen.append(list(messages))
        if messages[-1].content == "fail":
            raise RuntimeError("asked to fail")
        return AIMessage(f"{len(messages)} messages", tool_calls=[
            {"name": "calc", "args": {"n": len(messages)}, "id": f"c{len(messages)}", "type": "tool_call"}])


class Recording(ModelUpstream):
    """The Echo model behind the gateway; keeps a copy of each request body the upstream was handed."""

    def __init__(self) -> None:
        self.seen: list[list] = []
        self.bodies: list[dict] = []
        super().__init__(lambda: Echo(self.seen), "echo")

    def chat(self, body, rollout):
        self.bodies.append(copy.deepcopy(body))
        return super().chat(body, rollout)


@pytest.fixture
def echo():
    up = Recording()
    gw = start_gateway("echo", FAST, up)
    yield gw, up
    gw.close()


def _wire(model: GatewayChatModel) -> list[dict]:
    """Record each request body ``model`` sends (parsed)."""
    sent: list[dict] = []
    exchange = model._exchange

    def recorded(data: bytes):
        sent.append(json.loads(data))
        return exchange(data)

    model._exchange = recorded  # type: ignore[method-assign]
    return sent


def _post(gw, token: str, messages: list, conversation=None) -> tuple[int, dict]:
    body = {"model": "x", "messages": messages, **({CONV: conversation} if conversation is not None else {})}
    reply = gw.handle("POST", f"/r/{token}/v1/chat/completions", json.dumps(body).encode())
    return reply.status, reply.payload


def test_the_model_sees_each_whole_conversation_while_the_client_sends_only_what_was_added(echo):
    gw, up = echo
    token = gw.open_rollout()
    model = GatewayChatModel(str(gw.socket), token, "echo", 0)
    sent = _wire(model)
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]
    convo = [SystemMessage("be brief"), HumanMessage("what is 6 x 7?")]
    whole = []
    for turn in range(4):
        ai = model.invoke(convo, tools=tools)
        whole.append(from_messages(convo))
        convo = [*convo, ai, ToolMessage(f"result {turn}", tool_call_id=ai.tool_calls[0]["id"])]
    # the upstream and the model were handed every whole conversation, as whole requests give them
    assert [b["messages"] for b in up.bodies] == whole
    assert all(CONV not in b and b["tools"] == tools for b in up.bodies)
    assert up.seen == [to_messages(w) for w in whole]
    assert up.seen[3][0] is up.seen[0][0] and up.seen[3][2] is up.seen[1][2]  # converted once, reused as before
    # on the wire: the first request whole, each later one the two messages added since, on the count held
    assert sent[0][CONV] == {"hold": True} and sent[0]["messages"] == whole[0]
    for i in (1, 2, 3):
        assert sent[i]["messages"] == whole[i][-2:]
        assert sent[i][CONV]["count"] == len(whole[i - 1]) and isinstance(sent[i][CONV]["extends"], str)
        assert sent[i][CONV]["tools"] == "held" and "tools" not in sent[i]  # the same tools: not sent again
    assert len({s[CONV]["extends"] for s in sent[1:]}) == 3  # a fresh tag after each reply
    u = gw.close_rollout(token)
    assert (u.requests, u.errors) == (4, 0)


def test_a_harness_that_edits_history_between_calls_sends_whole_requests_and_the_model_sees_the_edits(echo):
    gw, up = echo
    token = gw.open_rollout()
    model = GatewayChatModel(str(gw.socket), token, "echo", 0)
    sent = _wire(model)
    sys_msg, ask = SystemMessage("be brief"), HumanMessage("what is 6 x 7?")
    convo = [sys_msg, ask]
    convo.append(model.invoke(convo))
    convo.append(HumanMessage("go on"))
    model.invoke(convo)  # a delta
    ask.content = "what is 7 x 8?"  # an earlier message edited in place
    convo.append(HumanMessage("and now?"))
    model.invoke(convo)
    convo[0] = SystemMessage("be thorough")  # an earlier message replaced
    model.invoke(convo)
    del convo[-2:]  # the history cut short
    model.invoke(convo)
    assert [CONV in s and "extends" in s[CONV] for s in sent] == [False, True, False, False, False]
    assert [b["messages"][:2] for b in up.bodies[2:]] == [
        [SYS, {"role": "user", "content": "what is 7 x 8?"}],
        [{"role": "system", "content": "be thorough"}, {"role": "user", "content": "what is 7 x 8?"}],
        [{"role": "system", "content": "be thorough"}, {"role": "user", "content": "what is 7 x 8?"}]]
    assert [len(b["messages"]) for b in up.bodies] == [2, 4, 5, 5, 3]
    assert up.seen == [to_messages(b["messages"]) for b in up.bodies]


def test_tools_that_change_between_calls_are_sent_and_the_model_is_handed_each_calls_own(echo):
    gw, up = echo
    token = gw.open_rollout()
    model = GatewayChatModel(str(gw.socket), token, "echo", 0)
    sent = _wire(model)
    calc = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]
    other = [{"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}]
    convo = [SystemMessage("be brief"), HumanMessage("what is 6 x 7?")]
    for tools in (calc, calc, other, None, calc, calc):
        convo = [*convo, model.invoke(convo, tools=tools), HumanMessage("next")]
    assert [b.get("tools") for b in up.bodies] == [calc, calc, other, None, calc, calc]
    assert ["extends" in s[CONV] for s in sent] == [False] + [True] * 5
    assert [s[CONV].get("tools") for s in sent] == [None, "held", None, None, None, "held"]
    assert [s.get("tools") for s in sent] == [calc, None, other, None, calc, None]


def _held(gw, token: str, messages: list) -> dict:
    """A whole request asking the gateway to hold ``messages``; what its reply says is held."""
    status, payload = _post(gw, token, messages, {"hold": True})
    assert status == 200, payload
    return payload[CONV]


def test_a_held_conversation_is_extended_by_a_delta_on_its_tag_and_count(echo):
    gw, up = echo
    token = gw.open_rollout()
    held = _held(gw, token, [SYS, ASK])
    assert held["count"] == 2
    reply = {"role": "assistant", "content": "42"}
    status, payload = _post(gw, token, [reply, ASK], {"extends": held["tag"], "count": 2})
    assert status == 200 and payload[CONV]["count"] == 4
    assert up.bodies[-1]["messages"] == [SYS, ASK, reply, ASK]


def _refused(gw, up, token: str, messages: list, conversation) -> str:
    before = (len(up.bodies), gw.usage(token).errors)
    status, payload = _post(gw, token, messages, conversation)
    assert status == 409 and payload["error"]["code"] == "conversation_mismatch", payload
    assert len(up.bodies) == before[0] and gw.usage(token).errors == before[1] + 1  # never reached the model
    assert _post(gw, token, [SYS, ASK, *messages])[0] == 200  # the whole request still works
    return payload["error"]["message"]


def test_a_delta_with_nothing_held_is_refused(echo):
    gw, up = echo
    token = gw.open_rollout()
    assert "holds no conversation" in _refused(gw, up, token, [ASK], {"extends": "made-up", "count": 2})
    assert _post(gw, token, [SYS, ASK])[0] == 200  # a whole request without the field holds nothing
    assert "holds no conversation" in _refused(gw, up, token, [ASK], {"extends": "made-up", "count": 2})


@pytest.mark.parametrize("count", [1, 0, 3, -1])
def test_a_delta_on_another_count_than_held_is_refused(echo, count):
    """Count 1 on 2 held: a delta rewriting the second message; 3: one that skips a message."""
    gw, up = echo
    token = gw.open_rollout()
    held = _held(gw, token, [SYS, ASK])
    message = _refused(gw, up, token, [{"role": "user", "content": "rewritten"}], {"extends": held["tag"],
                                                                                   "count": count})
    assert f"builds on {count} messages; this rollout holds 2" in message


def test_a_delta_on_another_rollouts_tag_is_refused(echo):
    gw, up = echo
    mine, other = gw.open_rollout(), gw.open_rollout()
    _held(gw, mine, [SYS, ASK])
    theirs = _held(gw, other, [SYS, ASK])
    assert "does not hold" in _refused(gw, up, mine, [ASK], {"extends": theirs["tag"], "count": 2})
    assert _post(gw, other, [ASK], {"extends": theirs["tag"], "count": 2})[0] == 200  # still the other's own


def test_a_replayed_delta_is_refused(echo):
    gw, up = echo
    token = gw.open_rollout()
    held = _held(gw, token, [SYS, ASK])
    delta = {"extends": held["tag"], "count": 2}
    assert _post(gw, token, [ASK], delta)[0] == 200
    assert "does not hold" in _refused(gw, up, token, [ASK], delta)


def test_any_request_in_between_ends_what_was_held(echo):
    gw, up = echo
    token = gw.open_rollout()
    held = _held(gw, token, [SYS, ASK])
    assert _post(gw, token, [SYS])[0] == 200  # another request on the rollout (its own client, a harness's)
    assert "holds no conversation" in _refused(gw, up, token, [ASK], {"extends": held["tag"], "count": 2})


def test_a_closed_rollout_leaves_no_conversation_held(echo):
    # a run's gateway lives for the run: what a finished rollout held would otherwise stay for every rollout after
    gw, up = echo
    tokens = [gw.open_rollout() for _ in range(3)]
    for token in tokens:
        _held(gw, token, [SYS, ASK])
    for token in tokens:
        gw.close_rollout(token)
    assert gw._held == {}
    assert _post(gw, tokens[0], [ASK], {"extends": "any", "count": 2})[0] == 403  # and the token is dead


def test_a_request_that_fails_leaves_nothing_held(echo):
    gw, up = echo
    token = gw.open_rollout()
    held = _held(gw, token, [SYS, ASK])
    status, _ = _post(gw, token, [{"role": "user", "content": "fail"}], {"extends": held["tag"], "count": 2})
    assert status == 500
    assert "holds no conversation" in _refused(gw, up, token, [ASK], {"extends": held["tag"], "count": 3})


@pytest.mark.parametrize("conversation", ["hold", {"hold": False}, {"hold": 1}, {"extends": 3, "count": 2},
                                          {"extends": "t", "count": True}, {"extends": "t", "count": "2"},
                                          {"extends": "t"}, {"hold": True, "extends": "t", "count": 2}, [],
                                          {"extends": "t", "count": 2, "tools": "yes"},
                                          {"extends": "t", "count": 2, "tools": None}])
def test_a_malformed_conversation_field_is_a_400_that_never_reaches_the_model(echo, conversation):
    gw, up = echo
    token = gw.open_rollout()
    status, payload = _post(gw, token, [SYS, ASK], conversation)
    assert status == 400 and CONV in payload["error"]["message"]
    assert up.bodies == []


def test_held_tools_come_with_the_held_conversation_and_a_delta_cannot_also_carry_its_own(echo):
    gw, up = echo
    token = gw.open_rollout()
    tools = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]
    body = {"model": "x", "messages": [SYS, ASK], "tools": tools, CONV: {"hold": True}}
    held = gw.handle("POST", f"/r/{token}/v1/chat/completions", json.dumps(body).encode()).payload[CONV]
    assert _post(gw, token, [ASK], {"extends": held["tag"], "count": 2, "tools": "held"})[0] == 200
    assert up.bodies[-1]["tools"] == tools and up.bodies[-1]["messages"] == [SYS, ASK, ASK]
    held = _held(gw, token, [SYS, ASK])  # a whole request without tools: nothing to hold
    assert _post(gw, token, [ASK], {"extends": held["tag"], "count": 2, "tools": "held"})[0] == 200
    assert "tools" not in up.bodies[-1]
    held = _held(gw, token, [SYS, ASK])
    both = {"model": "x", "messages": [ASK], "tools": tools,
            CONV: {"extends": held["tag"], "count": 2, "tools": "held"}}
    reply = gw.handle("POST", f"/r/{token}/v1/chat/completions", json.dumps(both).encode())
    assert reply.status == 400 and "must not carry" in reply.payload["error"]["message"]
    assert len(up.bodies) == 5  # the refused one never reached the model


def test_a_delta_whose_whole_request_passes_the_body_limit_gets_the_413_a_whole_request_would():
    up = Recording()
    gw = start_gateway("echo", GatewayConfig(max_body_mb=1), up)
    try:
        token = gw.open_rollout()
        big = {"role": "user", "content": "x" * 600_000}
        held = _held(gw, token, [SYS, big])
        status, payload = _post(gw, token, [big], {"extends": held["tag"], "count": 2})
        assert status == 413 and "limit" in payload["error"]["message"]
        assert len(up.bodies) == 1
    finally:
        gw.close()


def test_the_client_sends_the_whole_request_when_the_deltas_sizes_add_up_past_the_limit():
    """Tools that change at every call go with every delta: the gateway's size check adds up the bodies, so a delta
    can pass the limit while the whole request is under it; the client then sends the whole request (it failed the
    rollout with the 413 before)."""
    up = Recording()
    gw = start_gateway("echo", GatewayConfig(max_body_mb=1), up)
    try:
        token = gw.open_rollout()
        model = GatewayChatModel(str(gw.socket), token, "echo", 0)
        sent = _wire(model)
        convo = [SystemMessage("be brief"), HumanMessage("what is 6 x 7?")]
        for i in range(5):
            tools = [{"type": "function", "function": {"name": f"t{i}", "description": "x" * 300_000,
                                                       "parameters": {"type": "object"}}}]
            convo = [*convo, model.invoke(convo, tools=tools), HumanMessage("next")]
        assert [b["messages"] for b in up.bodies] == [from_messages(convo[:2 + 2 * i]) for i in range(5)]
        assert ["extends" in s[CONV] for s in sent] == [False, True, True, True, False, True]  # the 3rd delta: 413
    finally:
        gw.close()


def test_the_client_sends_the_whole_request_when_its_delta_is_refused(echo):
    gw, up = echo
    token = gw.open_rollout()
    model = GatewayChatModel(str(gw.socket), token, "echo", 0)
    sent = _wire(model)
    convo = [SystemMessage("be brief"), HumanMessage("what is 6 x 7?")]
    convo.append(model.invoke(convo))
    assert _post(gw, token, [SYS])[0] == 200  # a request of the harness's own on the token, in between
    convo.append(HumanMessage("go on"))
    assert model.invoke(convo).content == "4 messages"
    assert ["extends" in s[CONV] for s in sent] == [False, True, False]  # refused, then whole
    assert up.bodies[-1]["messages"] == from_messages(convo)
    assert len(up.bodies) == 3  # the refused delta never reached the model
    convo.append(HumanMessage("more"))
    model.invoke(convo)
    assert "extends" in sent[-1][CONV] and up.bodies[-1]["messages"] == from_messages(convo)  # deltas again


def test_the_refusal_is_an_http_409_and_a_real_endpoint_gets_whole_requests_without_the_field(upstream, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host")
    gw = start_gateway(f"openai:{upstream.url}#pinned", FAST)
    try:
        token = gw.open_rollout()
        transport = httpx.HTTPTransport(uds=str(gw.socket))
        with httpx.Client(transport=transport, base_url="http://gateway", timeout=10) as c:
            def post(messages, conversation):
                return c.post(f"/r/{token}/v1/chat/completions",
                              json={"model": "m", "messages": messages, CONV: conversation})

            first = post([SYS, ASK], {"hold": True})
            held = first.json()[CONV]
            assert post([ASK], {"extends": held["tag"], "count": 2}).status_code == 200
            refused = post([ASK], {"extends": held["tag"], "count": 2})
        assert refused.status_code == 409 and refused.reason_phrase == "Conflict"
        assert [r["body"]["messages"] for r in upstream.requests] == [[SYS, ASK], [SYS, ASK, ASK]]
        assert all(CONV not in r["body"] for r in upstream.requests)
    finally:
        gw.close()


class Trimming(Recording):
    """An upstream that edits the request it is handed (appends a reminder, as a proxy injecting a message would)."""

    def chat(self, body, rollout):
        reply = super().chat(body, rollout)
        body["messages"].append({"role": "user", "content": "(reminder injected upstream)"})
        return reply


def test_what_the_upstream_does_to_its_request_does_not_change_the_conversation_held():
    """Was: the gateway held the very list it handed upstream, so the reminder became part of the held conversation:
    the next delta (count 3) was refused as a mismatch (4 held), or built on a message the client never sent."""
    up = Trimming()
    gw = start_gateway("echo", FAST, up)
    try:
        token = gw.open_rollout()
        status, first = _post(gw, token, [SYS, ASK], {"hold": True})
        assert status == 200
        reply = first["choices"][0]["message"]
        tag = first[CONV]
        assert tag["count"] == 2
        status, second = _post(gw, token, [reply], {"extends": tag["tag"], "count": tag["count"]})
        assert status == 200, second
        assert up.bodies[1]["messages"] == [SYS, ASK, reply]  # what the client sent, and nothing injected
    finally:
        gw.close()
