"""`OpenAIChat`: the roles' client for an OpenAI-compatible chat endpoint (OpenAI, llama.cpp, vLLM, ...).

Written for what a small local model behind one server slot needs, which langchain's ``ChatOpenAI``
does not give (it re-sends a timed-out request while the server still generates the first reply):

- every request carries ``max_tokens``;
- every call has a wall-clock deadline. Replies are streamed, and at the deadline the response is
  closed: llama.cpp's server (llama-cpp-python) checks for a disconnect after each token and stops
  generating, so nothing is left running. The call is then *not* re-sent: it fails with a
  non-retryable `InfraError` (a reply that did not fit the deadline once will not fit it again);
- one request in flight per client (a lock), so roles sharing the model never queue behind an
  abandoned reply;
- structured output by ``json_schema`` (OpenAI's ``response_format``), ``json_object_schema``
  (llama-cpp-python's ``response_format={"type": "json_object", "schema": ...}``, which it compiles
  to a grammar: the reply is valid JSON of that schema by construction), ``function_calling`` (one
  forced tool call), or plain text (``invoke``). A 400/404/413/422 answer means the server does not take
  the method (llama-cpp-python says so with a 500 "validation error"; a 413 or a 400 to every method is
  this request, too large): `Unsupported`, and `structured.ask` moves to the next method without spending
  a retry.

It is duck-typed like a langchain chat model where `structured.ask` needs it: ``invoke(messages)``
returns an ``AIMessage``; ``with_structured_output(schema, method=..., include_raw=True)`` returns an
object whose ``invoke`` returns ``{"raw", "parsed", "parsing_error"}``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from evoharness.errors import InfraError
from evoharness.roles.errors import EndpointDown

METHODS = ("json_schema", "json_object_schema", "function_calling")


class Unsupported(Exception):
    """The endpoint refused the request's form (HTTP 400/404/413/422): try another structured-output method.

    ``status`` is the HTTP status: a 404 to every form is no endpoint at that URL (or no such model), while a
    400 to every form, the plain one too, is this request refused (a prompt past the model's context)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def to_openai(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    roles = {"system": "system", "human": "user", "ai": "assistant"}
    return [{"role": roles.get(m.type, "user"), "content": str(m.content)} for m in messages]


class OpenAIChat:
    """``model`` at ``base_url`` (``.../v1``); see the module docstring for the call contract."""

    accepts_json_schema = True  # `structured.ask` may pass a tighter schema for the grammar

    def __init__(self, model: str, base_url: str, api_key: str = "", *, max_tokens: int = 1024,
                 deadline_s: float = 120.0, temperature: float = 0.0, connect_s: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.model, self.base_url = model, base_url.rstrip("/")
        self.max_tokens, self.deadline_s, self.temperature = max_tokens, deadline_s, temperature
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, transport=transport,
                                  timeout=httpx.Timeout(deadline_s, connect=min(connect_s, deadline_s)))
        self._lock = threading.Lock()
        self.calls = 0

    def invoke(self, messages: Sequence[BaseMessage], **_: Any) -> AIMessage:
        content, _calls = self.complete(to_openai(messages))
        return AIMessage(content=content)

    def with_structured_output(self, schema: type[BaseModel], *, method: str = "json_schema",
                               include_raw: bool = True, json_schema: dict | None = None) -> _Structured:
        if method not in METHODS:
            raise ValueError(f"unknown structured-output method {method!r}")
        return _Structured(self, schema, method, json_schema or schema.model_json_schema())

    # ---- one request ----------------------------------------------------------------------------------

    def complete(self, messages: list[dict[str, str]], **extra: Any) -> tuple[str, list[dict[str, str]]]:
        """(content, tool calls as {name, arguments}) of one streamed completion, within the deadline."""
        payload = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                   "temperature": self.temperature, "stream": True, **extra}
        with self._lock:
            self.calls += 1
            start = time.monotonic()
            expired = threading.Event()
            try:
                with self._http.stream("POST", f"{self.base_url}/chat/completions", json=payload) as resp:
                    timer = threading.Timer(self.deadline_s, _expire, (resp, expired))
                    timer.daemon = True
                    timer.start()
                    try:
                        out = _read(resp)
                    finally:
                        timer.cancel()
                    if expired.is_set():  # closed under the reader, which saw a clean end
                        raise httpx.ReadError("closed at the deadline")
                    return out
            except (httpx.TimeoutException, httpx.StreamError, httpx.ReadError, httpx.RemoteProtocolError) as e:
                if expired.is_set() or isinstance(e, httpx.TimeoutException):
                    raise InfraError(f"{self.model}: no complete reply within the {self.deadline_s:g}s deadline "
                                     f"({time.monotonic() - start:.1f}s); the request was cancelled, not re-sent "
                                     "(raise roles.deadline_s or lower roles.max_tokens)", retryable=False) from None
                raise EndpointDown(f"{self.model}: {type(e).__name__}: {e}") from None
            except httpx.TransportError as e:
                raise EndpointDown(f"{self.model} at {self.base_url}: {type(e).__name__}: {e}") from None

    def close(self) -> None:
        self._http.close()


def _expire(resp: httpx.Response, flag: threading.Event) -> None:
    flag.set()
    resp.close()  # the server sees the disconnect at its next token and stops generating


def _read(resp: httpx.Response) -> tuple[str, list[dict[str, str]]]:
    # 413: this request is too large for the endpoint, as a 400 says of one past the model's context
    if resp.status_code in (400, 404, 413, 422) or (resp.status_code == 500 and b"validation error" in resp.read()):
        resp.read()  # llama-cpp-python answers a request field it does not take with a 500 "validation error"
        raise Unsupported(f"HTTP {resp.status_code}: {resp.text[:300]}", status=resp.status_code)
    if resp.status_code >= 400:
        resp.read()
        raise EndpointDown(f"HTTP {resp.status_code}: {resp.text[:300]}", retryable=resp.status_code >= 429,
                           status=resp.status_code)
    ctype = resp.headers.get("content-type", "")
    if "text/event-stream" not in ctype:  # a server that ignored "stream"
        resp.read()
        try:
            msg = resp.json()["choices"][0]["message"]
            if not isinstance(msg, dict):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):  # a proxy's error page, an empty choices list
            raise _not_a_completion(resp, ctype, resp.text) from None
        calls = [{"name": c["function"]["name"], "arguments": c["function"].get("arguments") or ""}
                 for c in msg.get("tool_calls") or []]
        return msg.get("content") or "", calls
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    for line in resp.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:  # a cut or garbled stream
            raise _not_a_completion(resp, ctype, f"a chunk that is not JSON: {data}") from None
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for c in delta.get("tool_calls") or []:
                slot = calls.setdefault(c.get("index", 0), {"name": "", "arguments": ""})
                fn = c.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
    return "".join(content), [calls[i] for i in sorted(calls)]


def _not_a_completion(resp: httpx.Response, ctype: str, what: str) -> EndpointDown:
    """The endpoint's failure, not the model's: its reply was no chat completion (never fed back to the model
    as its own bad JSON)."""
    return EndpointDown(f"HTTP {resp.status_code} reply is no chat completion ({ctype.split(';')[0] or 'no type'}): "
                      f"{what[:200]!r}", retryable=True)


class _Structured:
    def __init__(self, chat: OpenAIChat, schema: type[BaseModel], method: str, json_schema: dict) -> None:
        self.chat, self.schema, self.method, self.json_schema = chat, schema, method, json_schema

    def invoke(self, messages: Sequence[BaseMessage], **_: Any) -> dict[str, Any]:
        name = self.schema.__name__
        if self.method == "json_schema":
            extra = {"response_format": {"type": "json_schema",
                                         "json_schema": {"name": name, "schema": self.json_schema, "strict": False}}}
        elif self.method == "json_object_schema":
            extra = {"response_format": {"type": "json_object", "schema": self.json_schema}}
        else:
            extra = {"tools": [{"type": "function", "function": {"name": name, "parameters": self.json_schema}}],
                     "tool_choice": {"type": "function", "function": {"name": name}}}
        content, calls = self.chat.complete(to_openai(messages), **extra)
        text = next((c["arguments"] for c in calls if c["name"] == name), None) if calls else None
        raw = AIMessage(content=text if text is not None else content)
        try:
            parsed = json.loads(raw.content) if raw.content.strip().startswith("{") else None
        except json.JSONDecodeError:
            parsed = None  # `structured.ask` parses the text again and reports the exact problem
        return {"raw": raw, "parsed": parsed, "parsing_error": None}
