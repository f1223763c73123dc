"""The model gateway on its own: forwarding, per-rollout counts, retries, errors, the scripted upstream."""

from __future__ import annotations

import json
import stat

import httpx
import pytest

from evoharness.agent.messages import HumanMessage, ToolMessage
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


@pytest.mark.parametrize("payload", [{"choices": []}, {"id": "x", "object": "chat.completion"},
                                     {"choices": [{"index": 0, "finish_reason": "stop"}]}])
def test_a_200_with_no_chat_completion_is_a_502_saying_so(gateway, upstream, payload):
    """An endpoint answering 200 with no choices: the agent's client indexed choices[0] and the rollout failed with
    "IndexError: list index out of range", N failed rollouts the loop then edited the harness against (walkloop)."""
    upstream.queue((200, payload))
    token = gateway.open_rollout()
    r = post(gateway, token, CHAT)
    assert r.status_code == 502 and "no chat completion" in r.json()["error"]["message"]
    assert len(upstream.requests) == 1
    u = gateway.close_rollout(token)
    assert (u.requests, u.errors) == (1, 1) and "HTTP 200 with no chat completion" in u.last_error


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


# ---- the gateway's own HTTP handling (a parser of its own since http.server's cost most of its CPU) -------


class _Recorder:
    """An upstream that answers every chat with a fixed message and records the requests it got."""

    name = "recorder"

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def chat(self, body, token):
        from evoharness.sandbox.gateway_upstream import UpstreamReply

        self.bodies.append(body)
        return UpstreamReply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    def models(self):
        from evoharness.sandbox.gateway_upstream import UpstreamReply

        return UpstreamReply(200, {"object": "list", "data": []})

    def end(self, token):
        pass

    def close(self):
        pass


def _raw(gw: Gateway, data: bytes) -> list[tuple[int, dict, bytes]]:
    """Send ``data`` on one connection; every reply read until the gateway closes it (status, headers, body)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(gw.socket))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    replies = []
    while got:
        head, _, rest = got.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        n = int(headers["Content-Length"])
        replies.append((int(lines[0].split()[1]), headers, rest[:n]))
        got = rest[n:]
    return replies


def _post_bytes(token: str, body: bytes, extra: str = "", version: str = "HTTP/1.1") -> bytes:
    return (f"POST /r/{token}/v1/chat/completions {version}\r\nHost: gateway\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.fixture
def recording():
    up = _Recorder()
    gw = start_gateway("m", FAST, up)
    yield gw, up
    gw.close()


def test_requests_on_one_kept_alive_connection_are_each_answered_in_turn(recording):
    gw, up = recording
    token = gw.open_rollout()
    body = json.dumps(CHAT).encode()
    replies = _raw(gw, _post_bytes(token, body) * 3 + f"GET /r/{token}/v1/models HTTP/1.1\r\n\r\n".encode())
    assert [r[0] for r in replies] == [200, 200, 200, 200]
    assert all("Connection" not in h for _, h, _ in replies)  # kept open until the client closed it
    assert json.loads(replies[0][2])["choices"][0]["message"]["content"] == "ok"
    assert len(up.bodies) == 3 and up.bodies[0]["model"] == "m"  # pinned
    assert gw.usage(token).requests == 3


@pytest.mark.parametrize("request_bytes, status, fragment", [
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\n\r\n", 411, "Content-Length"),
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411,
     "chunked"),
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413, "exceeds"),
    # a Latin-1 digit str.isdigit() takes ('\xb2', superscript two) and a length past int()'s 4,300 digits were
    # a ValueError in the handler: the connection dropped with no answer (gateway.handler_crashed logged)
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n", 411, "Content-Length"),
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", 413, "exceeds"),
    (b"NONSENSE\r\n\r\n", 400, "bad request line"),
    (b"POST /r/T/v1/chat/completions HTTP/2.0\r\n\r\n", 505, "version"),
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\nno colon here\r\n\r\n", 400, "bad header line"),
    (b"POST /r/T/v1/chat/completions HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431, "headers"),
    (b"GET /r/T/v1/models HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", 431, "too long"),
    (b"PUT /r/T/v1/models HTTP/1.1\r\n\r\n", 405, "not allowed"),
    (b"BREW /r/T/v1/models HTTP/1.1\r\n\r\n", 501, "not allowed"),
])
def test_what_the_gateway_cannot_parse_is_one_json_error_and_the_connection_closes(recording, request_bytes, status,
                                                                                  fragment):
    gw, up = recording
    token = gw.open_rollout()
    follow = _post_bytes(token, json.dumps(CHAT).encode())  # never served: the connection is closed first
    replies = _raw(gw, request_bytes.replace(b"/r/T/", f"/r/{token}/".encode()) + follow)
    assert len(replies) == 1
    got, headers, body = replies[0]
    assert got == status and headers["Connection"] == "close"
    assert fragment in json.loads(body)["error"]["message"]
    assert up.bodies == []


def test_connection_close_and_http_1_0_end_the_connection_after_the_reply(recording):
    gw, up = recording
    token = gw.open_rollout()
    body = json.dumps(CHAT).encode()
    for first in (_post_bytes(token, body, "Connection: close\r\n"), _post_bytes(token, body, version="HTTP/1.0")):
        replies = _raw(gw, first + _post_bytes(token, body))
        assert [(r[0], r[1].get("Connection")) for r in replies] == [(200, "close")]
    assert len(up.bodies) == 2


def test_expect_100_continue_is_answered_before_the_body(recording):
    gw, _ = recording
    token = gw.open_rollout()
    import socket

    body = json.dumps(CHAT).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(gw.socket))
        s.sendall(_post_bytes(token, b"", "Expect: 100-continue\r\n").replace(b"Content-Length: 0",
                                                                             f"Content-Length: {len(body)}".encode()))
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        assert s.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_client_gone_mid_request_is_no_crash_and_the_gateway_serves_on(recording):
    gw, up = recording
    token = gw.open_rollout()
    assert _raw(gw, _post_bytes(token, b'{"messages": [')[:-5]) == []  # cut inside the body
    assert _raw(gw, b"POST /r/x/v1/chat/completions HTTP/1.1\r\nContent-") == []  # cut inside the headers
    assert [r[0] for r in _raw(gw, _post_bytes(token, json.dumps(CHAT).encode()))] == [200]
    assert len(up.bodies) == 1


def test_a_client_killed_with_a_reply_unread_is_no_crash_and_the_gateway_serves_on(recording):
    """A sandboxed agent killed (wall, memory limit, crash) after its request was answered, the reply unread: the
    gateway's next read of that connection is reset (ECONNRESET), which logged gateway.handler_crashed with a
    traceback on the console for each such rollout."""
    import socket
    import time

    from structlog.testing import capture_logs

    gw, up = recording
    token = gw.open_rollout()
    with capture_logs() as logs:
        for i in range(2):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(str(gw.socket))
                s.sendall(_post_bytes(token, json.dumps(CHAT).encode()))
                end = time.monotonic() + 10
                while len(up.bodies) < 1 + i and time.monotonic() < end:  # answered (the reply sits unread)
                    time.sleep(0.01)
                time.sleep(0.1)
        assert [r[0] for r in _raw(gw, _post_bytes(token, json.dumps(CHAT).encode()))] == [200]
    assert len(up.bodies) == 3
    assert [e for e in logs if e["log_level"] in ("warning", "error")] == []


def test_the_gateway_client_reconnects_once_when_the_kept_alive_connection_was_closed(recording):
    from evoharness.agent.models import GatewayChatModel

    gw, up = recording
    token = gw.open_rollout()
    model = GatewayChatModel(str(gw.socket), token, "m", 0)
    assert model.invoke([HumanMessage("a")]).content == "ok"
    sock, _ = model._conn
    sock.shutdown(2)  # as a connection the gateway dropped between two requests looks to the client
    assert model.invoke([HumanMessage("b")]).content == "ok"
    assert [b["messages"][0]["content"] for b in up.bodies] == ["a", "b"]


def test_the_model_upstream_reuses_a_rollouts_converted_messages_only_where_they_are_the_same():
    seen: list[list] = []

    class Echo:
        def invoke(self, messages, tools=None):
            from langchain_core.messages import AIMessage

            seen.append(list(messages))
            return AIMessage(f"{len(messages)}")

    up = ModelUpstream(Echo)
    sys_msg, hi = {"role": "system", "content": "s"}, {"role": "user", "content": "hi"}
    up.chat({"messages": [sys_msg, hi]}, "r1")
    up.chat({"messages": [dict(sys_msg), dict(hi), {"role": "assistant", "content": "2"}]}, "r1")
    up.chat({"messages": [sys_msg, {"role": "user", "content": "changed"}]}, "r1")
    up.chat({"messages": [sys_msg, hi]}, "r2")  # another rollout: converted afresh
    assert seen[1][0] is seen[0][0] and seen[1][1] is seen[0][1]  # the same messages: the same objects
    assert seen[2][0] is seen[0][0] and seen[2][1] is not seen[1][1] and seen[2][1].content == "changed"
    assert seen[3][0] is not seen[0][0] and [m.content for m in seen[3]] == ["s", "hi"]
    bad = up.chat({"messages": [sys_msg, {"role": "wizard"}]}, "r1")
    assert bad.status == 400
    up.end("r1")
    up.end("r2")
    assert up._seen == {}


def test_the_agent_lane_pins_the_default_temperature_too(gateway, upstream):
    """A spec without ?temperature= means temperature 0 (README): the gateway pinned only a named T, so a harness's
    own client sampled at whatever it sent (a rollout at 1.3 recorded under the temperature-0 spec)."""
    token = gateway.open_rollout("a")
    assert post(gateway, token, {**CHAT, "temperature": 1.3}).status_code == 200
    assert upstream.requests[-1]["body"]["temperature"] == 0.0


def test_a_connection_left_open_never_keeps_the_next_one_waiting(recording):
    """A thread whose connection closed serves the next connection; one held open (idle, mid-request) keeps its
    thread, and the connections after it are served all the same, each on a thread of its own."""
    import socket

    gw, up = recording
    token = gw.open_rollout()
    body = json.dumps(CHAT).encode()
    assert [r[0] for r in _raw(gw, _post_bytes(token, body))] == [200]  # its thread now waits for the next
    held = []
    try:
        for _ in range(3):  # each takes a thread and keeps it: an open connection, half a request sent
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            held.append(s)
            s.connect(str(gw.socket))
            s.sendall(b"POST /r/x/v1/chat/completions HTTP/1.1\r\n")
        for _ in range(3):
            assert [r[0] for r in _raw(gw, _post_bytes(token, body))] == [200]
    finally:
        for s in held:
            s.close()
    assert [r[0] for r in _raw(gw, _post_bytes(token, body))] == [200]
    assert len(up.bodies) == 5


def test_closing_the_gateway_ends_its_waiting_connection_threads():
    import threading
    import time

    def waiting() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "model-gateway-conn"}

    before = waiting()  # another test's gateway, still open in this process, may have its own
    gw = start_gateway("m", FAST, _Recorder())
    token = gw.open_rollout()
    for _ in range(3):
        assert [r[0] for r in _raw(gw, _post_bytes(token, json.dumps(CHAT).encode()))] == [200]
    mine = waiting() - before
    assert mine  # the thread that served them waits for the next connection
    gw.close()
    end = time.monotonic() + 5
    while any(t.is_alive() for t in mine) and time.monotonic() < end:
        time.sleep(0.01)
    assert not any(t.is_alive() for t in mine)
