"""The chat model seam and the OpenAI-dict <-> langchain-core message conversion.

``ChatModel`` contract: ``invoke(messages, tools=...) -> AIMessage`` where ``messages`` are
langchain-core messages (System/Human/AI/Tool) and ``tools`` OpenAI tool schemas. Tool calls
come back in ``AIMessage.tool_calls`` (parsed ``args`` dicts) and, when the model wrote
arguments that are not a JSON object, in ``AIMessage.invalid_tool_calls`` (raw ``args`` string)
-- the way ``langchain_openai.ChatOpenAI`` reports them. ``usage_metadata`` is optional.
"""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


class ChatModel(Protocol):
    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage: ...


def to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    """OpenAI chat dicts -> langchain-core messages (malformed tool-call arguments stay raw)."""
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


def to_openai(msg: AIMessage) -> dict[str, Any]:
    """An AIMessage -> an OpenAI assistant dict (invalid tool calls keep their raw argument string)."""
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


class LangChainChatModel:
    """Adapts a langchain chat model (e.g. ``ChatOpenAI``) to ``ChatModel`` via ``bind_tools``."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        bound = self.llm.bind_tools(tools) if tools else self.llm
        return bound.invoke(messages)


def openai_model(spec: str, seed: int) -> LangChainChatModel:
    """``openai:URL#model`` -> ChatOpenAI at ``URL`` (key from ``OPENAI_API_KEY``, else a dummy).

    Construction makes no request; the first ``invoke`` does.
    """
    from langchain_openai import ChatOpenAI

    from evoharness.errors import InputError

    rest = spec.removeprefix("openai:")
    url, _, model = rest.partition("#")
    if not url or not model:
        raise InputError("model", f"{spec!r}: expected openai:URL#model")
    llm = ChatOpenAI(base_url=url, model=model, api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                     seed=seed, temperature=0.0, max_retries=2)
    return LangChainChatModel(llm)


def resolve_model_spec(spec: str, timeout_s: float = 10.0) -> str:
    """``openai:URL`` (no ``#model``) -> ``openai:URL#ID`` when the server lists exactly one model.

    Asks ``URL/models`` once, on the host (the sandbox never sees the URL). Other specs come back
    unchanged. Several models, none, or an unreachable server are bad input with one clear line.
    """
    import httpx

    from evoharness.errors import InputError

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
    from evoharness.errors import InputError

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


def gateway_model(spec: str, seed: int) -> LangChainChatModel:
    """``gateway:SOCKET?rollout=TOKEN#model`` -> ChatOpenAI speaking HTTP over the gateway's Unix socket.

    The base URL is ``http://gateway/r/TOKEN/v1`` (the host part is ignored by the socket transport).
    No API key is needed or sent: the gateway adds the host's. The client does not retry (the
    gateway does) and waits as long as the sandbox's wall-time limit allows. No request is made here.
    """
    import httpx
    from langchain_openai import ChatOpenAI

    sock, token, model = parse_gateway_spec(spec)
    prefix = f"/r/{token}" if token else ""
    client = httpx.Client(transport=httpx.HTTPTransport(uds=sock), timeout=httpx.Timeout(None, connect=10.0))
    llm = ChatOpenAI(base_url=f"http://gateway{prefix}/v1", model=model, api_key="via-gateway",
                     http_client=client, seed=seed, temperature=0.0, max_retries=0)
    return LangChainChatModel(llm)
