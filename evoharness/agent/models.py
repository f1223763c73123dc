"""The chat model seam and the OpenAI-dict <-> message conversion.

``ChatModel`` contract: ``invoke(messages, tools=...) -> AIMessage`` where ``messages`` are the package's
own messages (``evoharness.agent.messages``: System/Human/AI/Tool, with langchain-core's attribute names)
and ``tools`` OpenAI tool schemas. Tool calls come back in ``AIMessage.tool_calls`` (parsed ``args`` dicts)
and, when the model wrote arguments that are not a JSON object, in ``AIMessage.invalid_tool_calls`` (raw
``args`` string) -- the way ``langchain_openai.ChatOpenAI`` reports them. ``usage_metadata`` is optional.
A reply may also be a langchain-core ``AIMessage`` (read by the same attributes). LangChain is imported only
where a LangChain chat model is called (``LangChainChatModel``: the ``openai:`` path), never for an offline
model through the gateway, so a sandboxed worker serving one does not load it.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Protocol

from evoharness.agent.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, plain_copy
from evoharness.errors import InputError
from evoharness.model_specs import is_offline, split_temperature


class ChatModel(Protocol):
    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage: ...


def to_messages(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    """OpenAI chat dicts -> the package's messages (malformed tool-call arguments stay raw)."""
    out: list[BaseMessage] = []
    for m in messages:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=m.get("tool_call_id") or ""))
        elif role == "assistant":
            calls, invalid = [], []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                raw = fn.get("arguments") or ""
                try:
                    args = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    args = None
                if isinstance(args, dict):
                    calls.append({"name": fn.get("name", ""), "args": args, "id": tc.get("id"), "type": "tool_call"})
                else:
                    invalid.append({"name": fn.get("name"), "args": raw, "id": tc.get("id"),
                                    "error": "arguments are not a JSON object", "type": "invalid_tool_call"})
            out.append(AIMessage(content, tool_calls=calls, invalid_tool_calls=invalid))
        else:
            raise ValueError(f"unknown message role {role!r}")
    return out


def to_openai(msg: Any) -> dict[str, Any]:
    """An AIMessage (the package's or langchain-core's) -> an OpenAI assistant dict (invalid tool calls keep
    their raw argument string)."""
    calls = []
    for i, tc in enumerate(msg.tool_calls):
        calls.append({"id": tc.get("id") or f"call_{i}", "type": "function",
                      "function": {"name": tc["name"], "arguments": json.dumps(tc["args"])}})
    for j, tc in enumerate(msg.invalid_tool_calls):
        calls.append({"id": tc.get("id") or f"call_x{j}", "type": "function",
                      "function": {"name": tc.get("name") or "", "arguments": tc.get("args") or ""}})
    content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = calls
    return out


def to_langchain(messages: list[Any]) -> list[Any]:
    """The package's messages -> langchain-core's (imported here: only a LangChain chat model needs them).
    A langchain-core message passes through unchanged."""
    from langchain_core import messages as lc

    kinds = {"system": lc.SystemMessage, "human": lc.HumanMessage}
    out: list[Any] = []
    for m in messages:
        if isinstance(m, lc.BaseMessage):
            out.append(m)
        elif m.type in kinds:
            out.append(kinds[m.type](m.content))
        elif m.type == "tool":
            out.append(lc.ToolMessage(m.content, tool_call_id=m.tool_call_id))
        elif m.type == "ai":
            out.append(lc.AIMessage(m.content, tool_calls=list(m.tool_calls),
                                    invalid_tool_calls=list(m.invalid_tool_calls)))
        else:
            raise ValueError(f"cannot send a {type(m).__name__} to a chat model")
    return out


def from_langchain_reply(ai: Any) -> AIMessage:
    """A langchain-core ``AIMessage`` reply -> the package's (its content, tool calls and usage)."""
    return AIMessage(ai.content, tool_calls=list(getattr(ai, "tool_calls", None) or []),
                     invalid_tool_calls=list(getattr(ai, "invalid_tool_calls", None) or []),
                     usage_metadata=dict(ai.usage_metadata) if getattr(ai, "usage_metadata", None) else None)


class LangChainChatModel:
    """Adapts a langchain chat model (e.g. ``ChatOpenAI``) to ``ChatModel`` via ``bind_tools``: the
    package's messages go as langchain-core's (``to_langchain``), the reply comes back as the package's."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        bound = self.llm.bind_tools(tools) if tools else self.llm
        return from_langchain_reply(bound.invoke(to_langchain(messages)))


def openai_model(spec: str, seed: int, http_client: Any = None) -> LangChainChatModel:
    """``openai:URL#model[?temperature=T]`` -> ChatOpenAI at ``URL`` (key from ``OPENAI_API_KEY``, else a
    dummy), sampling at ``T`` (default 0).

    Construction makes no request; the first ``invoke`` does. ``http_client``: an ``httpx.Client`` to send
    through (tests hand one whose transport records the request).
    """
    from langchain_openai import ChatOpenAI

    base, temperature = split_temperature(spec)
    url, _, model = base.removeprefix("openai:").partition("#")
    if not url or not model:
        raise InputError("model", f"{spec!r}: expected openai:URL#model")
    llm = ChatOpenAI(base_url=url, model=model, api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                     seed=seed, temperature=temperature or 0.0, max_retries=2, http_client=http_client)
    return LangChainChatModel(llm)


def resolve_model_spec(spec: str, timeout_s: float = 10.0) -> str:
    """``openai:URL`` (no ``#model``) -> ``openai:URL#ID`` when the server lists exactly one model.

    Asks ``URL/models`` once, on the host (the sandbox never sees the URL). Other specs come back
    unchanged. Several models, none, or an unreachable server are bad input with one clear line.
    """
    import httpx

    if not spec.startswith("openai:") or "#" in spec:
        return spec
    url = spec.removeprefix("openai:").rstrip("/")
    if not url:
        raise InputError("model", f"{spec!r}: expected openai:URL[#model]")
    key = os.environ.get("OPENAI_API_KEY")
    try:
        reply = httpx.get(f"{url}/models", timeout=timeout_s,
                          headers={"Authorization": f"Bearer {key}"} if key else None)
        reply.raise_for_status()
        ids = [m["id"] for m in reply.json().get("data", []) if isinstance(m, dict) and m.get("id")]
    except (httpx.HTTPError, ValueError, AttributeError) as e:
        raise InputError("model", f"{spec!r}: cannot list the server's models ({e}); "
                         "name one: openai:URL#model") from None
    if len(ids) != 1:
        listed = ", ".join(ids[:10]) or "none"
        raise InputError("model", f"{spec!r}: the server serves {len(ids)} models ({listed}); "
                         "name one: openai:URL#model")
    return f"{spec.rstrip('/')}#{ids[0]}"


def parse_gateway_spec(spec: str) -> tuple[str, str, str]:
    """``gateway:SOCKET[?rollout=TOKEN]#MODEL`` -> (socket path, rollout token or '', model)."""
    rest, _, model = spec.removeprefix("gateway:").partition("#")
    sock, _, query = rest.partition("?")
    token = ""
    if query:
        key, _, token = query.partition("=")
        if key != "rollout" or not token or "/" in token:
            raise InputError("model", f"{spec!r}: expected gateway:SOCKET?rollout=TOKEN#model")
    if not sock.startswith("/") or not model:
        raise InputError("model", f"{spec!r}: expected gateway:/absolute/path.sock[?rollout=TOKEN]#model")
    return sock, token, model


def from_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages (the package's, or langchain-core's: read by ``type``) -> OpenAI chat dicts (the inverse of
    ``to_messages``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        kind = getattr(m, "type", None)
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        if kind == "ai":
            out.append(to_openai(m))
        elif kind == "system":
            out.append({"role": "system", "content": content})
        elif kind == "human":
            out.append({"role": "user", "content": content})
        elif kind == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": content})
        else:
            raise ValueError(f"cannot send a {type(m).__name__} to a chat endpoint")
    return out


class GatewayError(RuntimeError):
    """The gateway answered with an error (its one-line message)."""


CONVERSATION = "evoharness_conversation"  # the gateway's field for incremental requests (sandbox/gateway.py)
MISMATCH = "conversation_mismatch"  # the code of the gateway's 409 refusing a delta


class GatewayChatModel:
    """A ``ChatModel`` speaking the gateway's ``/v1/chat/completions`` over its Unix socket with the
    standard library only (no OpenAI SDK to import: a sandboxed worker serving an offline model starts as
    fast as one running it in-process did). Messages go as ``from_messages`` writes them and the reply
    comes back through ``to_messages``, so a host-side stand-in sees what it would have seen in-process.
    A non-200 reply raises ``GatewayError`` with the gateway's message (a failed rollout, not a crash).
    It speaks HTTP/1.1 on one kept-alive connection itself: each request goes in one write, each reply is
    read by its Content-Length (``http.client`` parsed every reply's headers with the ``email`` package).
    Requests are incremental (the gateway's ``CONVERSATION`` field, sandbox/gateway.py): a whole request asks
    the gateway to hold the conversation; once it has (a 200 reply names a tag and the count held), a request
    whose conversation starts with exactly those messages, unchanged, sends only the ones added since. Anything
    else -- a message edited, removed or replaced since, an error reply before -- sends the whole request again,
    and so does a delta the gateway refuses (409, or 413: its size check adds up the bodies it held, which may pass
    the limit before the whole request does): the conversation the model sees is the same either way.
    """

    def __init__(self, socket_path: str, token: str, model: str, seed: int) -> None:
        self.socket_path, self.model, self.seed = socket_path, model, seed
        self.path = f"/r/{token}/v1/chat/completions" if token else "/v1/chat/completions"
        self._conn: Any = None
        # copies of the last request's messages, their dicts and those dicts' JSON
        self._sent: list[tuple[Any, dict[str, Any], str]] = []
        self._tools: tuple[Any, str] | None = None  # a copy of the last request's tools, their JSON
        self._same = 0  # how many messages the last _convert found unchanged since the request before
        # the gateway holds the last request's messages and tools: (tag, count, the tools' JSON or None)
        self._acked: tuple[str, int, str | None] | None = None
        self._delta = False  # the last body built is a delta
        self._sent_tools: str | None = None  # the JSON of the last body's tools (None: it had none)

    def _convert(self, messages: list[BaseMessage]) -> list[tuple[Any, dict[str, Any], str]]:
        """For each message: a copy of it, its ``from_messages`` dict and that dict's JSON, reusing the last
        request's for the messages it starts with that equal those the last request started with: each is
        compared with a copy kept of it, so a message edited in place since (the same object, another content or
        tool call) is converted and serialised again, not sent stale."""
        same = 0
        for (old, _, _), new in zip(self._sent, messages, strict=False):
            if old != new:
                break
            same += 1
        fresh = from_messages(messages[same:])
        self._same = same
        self._sent = self._sent[:same] + [(c, d, json.dumps(d)) for c, d in
                                          zip(plain_copy(messages[same:]), fresh, strict=True)]
        return self._sent

    def _dicts(self, messages: list[BaseMessage]) -> list[dict[str, Any]]:
        """``from_messages(messages)``, with the reuse of ``_convert``."""
        return [d for _, d, _ in self._convert(messages)]

    def _body(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None, *, whole: bool = False) -> bytes:
        """The request's JSON, byte for byte what ``json.dumps`` of the body gives, built from each message's JSON
        kept from the last request where the message is unchanged (``_convert``), and the tools' where they equal a
        copy kept of the last request's: a rollout's Nth call no longer serialises its N-1 earlier messages again.
        The body is a delta (only the messages after those the gateway holds, with ``{"extends": TAG, "count":
        N}``; with ``"tools": "held"`` and no tools of its own when its tools are the held request's) when the gateway
        holds the last request's messages and they all start this one unchanged, and more follow; else (or
        ``whole``) it is the whole request with ``{"hold": true}``."""
        parts = [d for _, _, d in self._convert(messages)]
        tools_json = None
        if tools:
            if self._tools is None or self._tools[0] != tools:
                self._tools = (plain_copy(tools), json.dumps(tools))
            tools_json = self._tools[1]
        acked, self._acked = self._acked, None  # any request ends what the gateway held
        self._delta = not whole and acked is not None and self._same >= acked[1] and len(parts) > acked[1]
        self._sent_tools = tools_json
        head = json.dumps({"model": self.model})[:-1]
        tail = f', "seed": {json.dumps(self.seed)}, "temperature": 0.0, "stream": false'
        if self._delta:
            assert acked is not None
            held_tools = tools_json is not None and tools_json is acked[2]  # the same JSON string: unchanged tools
            conversation = json.dumps({"extends": acked[0], "count": acked[1], **({"tools": "held"} if held_tools
                                                                                 else {})})
            parts = parts[acked[1]:]
            if tools_json is not None and not held_tools:
                tail += f', "tools": {tools_json}'
        else:
            conversation = '{"hold": true}'
            if tools_json is not None:
                tail += f', "tools": {tools_json}'
        tail += f', "{CONVERSATION}": {conversation}'
        return f'{head}, "messages": [{", ".join(parts)}]{tail}}}'.encode()

    def _exchange(self, data: bytes) -> tuple[int, bytes]:
        """POST ``data`` on the kept-alive connection (opened when there is none); the reply's status and body.
        The gateway's replies always carry a Content-Length: that many bytes are read, no more. ConnectionError
        when the connection broke or the reply is not HTTP."""
        if self._conn is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.socket_path)
            except OSError:
                sock.close()
                raise
            self._conn = (sock, sock.makefile("rb"))
        sock, reader = self._conn
        sock.sendall(b"POST " + self.path.encode() + b" HTTP/1.1\r\nHost: gateway\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n"
                     + data)
        status_line = reader.readline(65537)
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise ConnectionError(f"gateway: not an HTTP reply: {status_line[:80]!r}")
        length, close = None, False
        for _ in range(101):
            line = reader.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        if not line or length is None:
            raise ConnectionError("gateway: a reply without a body length")
        body = reader.read(length)
        if len(body) < length:
            raise ConnectionError("gateway: the reply was cut short")
        if close:
            self._close()
        return int(parts[1]), body

    def _close(self) -> None:
        if self._conn is not None:
            for part in reversed(self._conn):
                part.close()
            self._conn = None

    def _send(self, data: bytes) -> tuple[int, Any]:
        """``_exchange``, reconnecting once when the kept-alive connection the gateway closed; the status and the
        reply's JSON."""
        for attempt in (0, 1):
            try:
                status, raw = self._exchange(data)
                break
            except OSError:  # ConnectionError, BrokenPipeError, a reset
                self._close()
                if attempt:
                    raise
        try:
            return status, json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise GatewayError(f"gateway HTTP {status}: a reply that is not JSON") from None

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        status, payload = self._send(self._body(messages, tools))
        if self._delta and (status == 409 and _error_code(payload) == MISMATCH or status == 413):
            # the gateway held something else; or the sizes of the bodies it built its conversation from (tools sent
            # again, deltas' own fields) add up past its limit, while the whole request may be under it
            status, payload = self._send(self._body(messages, tools, whole=True))
        held = payload.get(CONVERSATION) if status == 200 and isinstance(payload, dict) else None
        if isinstance(held, dict) and isinstance(held.get("tag"), str) and held.get("count") == len(self._sent):
            self._acked = (held["tag"], len(self._sent), self._sent_tools)
        if status != 200:
            err = payload.get("error") if isinstance(payload, dict) else None
            message = err.get("message") if isinstance(err, dict) else payload
            raise GatewayError(f"gateway HTTP {status}: {message}")
        try:
            ai = to_messages([payload["choices"][0]["message"]])[0]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise GatewayError(f"gateway reply without a message: {e}") from None
        usage = payload.get("usage") or {}
        if isinstance(ai, AIMessage) and isinstance(usage, dict):
            p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            ai.usage_metadata = {"input_tokens": p, "output_tokens": c, "total_tokens": p + c}
        return ai  # type: ignore[return-value]


def _error_code(payload: Any) -> Any:
    err = payload.get("error") if isinstance(payload, dict) else None
    return err.get("code") if isinstance(err, dict) else None


def gateway_model(spec: str, seed: int) -> LangChainChatModel | GatewayChatModel:
    """``gateway:SOCKET?rollout=TOKEN#model`` -> ChatOpenAI speaking HTTP over the gateway's Unix socket
    (an offline model's name, ``standin:``/``scripted:``, gets the lighter ``GatewayChatModel``).

    The base URL is ``http://gateway/r/TOKEN/v1`` (the host part is ignored by the socket transport).
    No API key is needed or sent: the gateway adds the host's. The client does not retry (the
    gateway does) and waits as long as the sandbox's wall-time limit allows. No request is made here.
    """
    sock, token, model = parse_gateway_spec(spec)
    if is_offline(model):
        return GatewayChatModel(sock, token, model, seed)
    import httpx
    from langchain_openai import ChatOpenAI

    prefix = f"/r/{token}" if token else ""
    client = httpx.Client(transport=httpx.HTTPTransport(uds=sock), timeout=httpx.Timeout(None, connect=10.0))
    llm = ChatOpenAI(base_url=f"http://gateway{prefix}/v1", model=model, api_key="via-gateway",
                     http_client=client, seed=seed, temperature=0.0, max_retries=0)
    return LangChainChatModel(llm)
