"""Where the model gateway gets its replies: a real OpenAI-compatible endpoint, or a scripted model.

``Upstream`` contract: ``chat(body, rollout)`` takes a validated ``/v1/chat/completions`` request body
(a dict; ``model`` already pinned by the gateway) and returns an ``UpstreamReply``: the HTTP status and
JSON payload to hand back to the sandboxed client, plus how many retries it took. It never raises for a
failed model call: an unreachable endpoint is a 502 reply, a timeout a 504, the endpoint's own 4xx/5xx
is passed through. ``models()`` answers ``GET /v1/models`` the same way. ``end(rollout)`` drops what
was kept for a finished rollout; ``close()`` frees the client.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from evoharness.agent.models import to_messages, to_openai
from evoharness.sandbox.config import GatewayConfig

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass
class UpstreamReply:
    status: int
    payload: dict[str, Any]
    retries: int = 0
    error: str = field(default="")  # one line saying why, when status != 200


def error_payload(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class Upstream(Protocol):
    name: str

    def chat(self, body: dict[str, Any], rollout: str) -> UpstreamReply:
        """One chat request. ``body`` and its ``messages`` list are the upstream's own (the gateway holds another
        list for the rollout's next delta); the message objects in it are shared and must not be changed."""
        ...

    def models(self) -> UpstreamReply: ...

    def end(self, rollout: str) -> None:
        """The rollout is over: drop anything kept for it."""
        ...

    def close(self) -> None: ...


class _Status(Exception):
    """An upstream reply whose status is worth retrying (429, 5xx)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        super().__init__(f"HTTP {response.status_code}")


def _retryable(e: BaseException) -> bool:
    return isinstance(e, _Status | httpx.TransportError)


class HttpUpstream:
    """Forwards to ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``) with the host's API key.

    Connect errors, timeouts, 408/429 and 5xx are retried ``cfg.retries`` times with exponential
    backoff; any other status is returned at once. The key is sent as ``Authorization: Bearer`` and
    nothing from the sandboxed client's headers is forwarded.
    """

    name = "http"

    def __init__(self, base_url: str, *, api_key: str | None, cfg: GatewayConfig | None = None) -> None:
        self.cfg = cfg or GatewayConfig()
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(self.cfg.timeout_s, connect=self.cfg.connect_timeout_s)
        self._client = httpx.Client(headers=headers, timeout=timeout, follow_redirects=False)

    def chat(self, body: dict[str, Any], rollout: str) -> UpstreamReply:
        reply = self._call("POST", "/chat/completions", body)
        if reply.status == 200 and not _is_completion(reply.payload):  # the agent's client failed on it, IndexError
            why = "upstream replied HTTP 200 with no chat completion (no choices with a message)"
            return UpstreamReply(502, error_payload(why, "upstream_error", "upstream_bad_reply"), reply.retries, why)
        return reply

    def models(self) -> UpstreamReply:
        return self._call("GET", "/models", None)

    def end(self, rollout: str) -> None:
        pass

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None) -> UpstreamReply:
        attempts = 0

        def once() -> httpx.Response:
            nonlocal attempts
            attempts += 1
            resp = self._client.request(method, self.base_url + path, json=body)
            if resp.status_code in RETRY_STATUSES:
                raise _Status(resp)
            return resp

        retrying = Retrying(stop=stop_after_attempt(self.cfg.retries + 1), reraise=True,
                            wait=wait_exponential(multiplier=self.cfg.backoff_s, max=self.cfg.backoff_max_s),
                            retry=retry_if_exception(_retryable))
        try:
            resp = retrying(once)
        except _Status as e:
            resp = e.response
        except httpx.TimeoutException as e:
            return UpstreamReply(504, error_payload(f"upstream timed out after {attempts} attempts: "
                                                    f"{type(e).__name__}", "upstream_error", "upstream_timeout"),
                                 attempts - 1, f"upstream timed out ({type(e).__name__})")
        except httpx.TransportError as e:
            why = f"upstream {self.base_url} unreachable after {attempts} attempts: {type(e).__name__}: {e}"
            return UpstreamReply(502, error_payload(why, "upstream_error", "upstream_unreachable"), attempts - 1, why)
        try:
            payload = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            payload = None
        if not isinstance(payload, dict):
            why = f"upstream replied HTTP {resp.status_code} with a body that is not a JSON object"
            return UpstreamReply(502, error_payload(why, "upstream_error", "upstream_bad_reply"), attempts - 1, why)
        if resp.status_code == 200:
            error = ""
        elif resp.status_code in RETRY_STATUSES:  # still refused once the retries ran out
            error = f"upstream HTTP {resp.status_code} after {attempts} attempts: {_message(payload)}"
        else:
            error = f"upstream HTTP {resp.status_code}: {_message(payload)}"
        return UpstreamReply(resp.status_code, payload, attempts - 1, error)


def _is_completion(payload: dict[str, Any]) -> bool:
    choices = payload.get("choices")
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict))


def _message(payload: dict[str, Any]) -> str:
    err = payload.get("error")
    msg = err.get("message") if isinstance(err, dict) else err
    return str(msg or payload)[:300]


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for replies that carry no usage of their own."""
    return math.ceil(len(text) / 4) if text else 0


class ModelUpstream:
    """Serves a ``ChatModel`` (e.g. the package's ``ScriptedModel``) behind the gateway, no network.

    ``make()`` builds one model per rollout (so each rollout replays its own script). The OpenAI
    messages are converted with ``agent.models.to_messages``; the reply with ``to_openai``. A chat
    model carries no tokenizer: usage is its ``usage_metadata`` when it has one, else estimated
    (``estimate_tokens`` over the request and reply text). A model that raises gives a 500 reply.

    A rollout's requests carry its whole conversation each time (an incremental one rebuilt whole by the
    gateway, its held messages the same objects); the messages already converted for its previous request are
    reused where the new request starts with the same ones (the same objects, or equal as JSON values), and only
    the rest is converted (``_messages``). The model thus sees, turn after turn, the
    same message objects for the same messages, as an agent's list of messages gives them in-process.
    """

    name = "model"
    estimate_usage = True  # no usage_metadata on a reply: estimate (False: report 0, as in-process)

    def __init__(self, make: Callable[[], Any], model_name: str = "scripted") -> None:
        self.make, self.model_name = make, model_name
        self._models: dict[str, Any] = {}
        self._seen: dict[str, tuple[list[Any], list[Any]]] = {}  # rollout -> its last request's messages, converted
        self._lock = threading.Lock()

    def model_for(self, rollout: str) -> Any:
        """The rollout's model (built by ``make()`` on its first request)."""
        with self._lock:
            model = self._models.get(rollout)
            if model is None:
                model = self._models[rollout] = self.make()
            return model

    def _messages(self, raw: list[Any], rollout: str) -> list[Any]:
        """``raw`` (OpenAI dicts) as the package's messages, reusing the rollout's last conversion for the
        messages ``raw`` starts with that its last request also started with (compared as JSON values)."""
        with self._lock:
            last_raw, last = self._seen.get(rollout, ((), ()))
        same = 0
        for old, new in zip(last_raw, raw, strict=False):
            if old is not new and old != new:  # (the same object: a delta's held messages, no compare needed)
                break
            same += 1
        out = list(last[:same]) + to_messages(raw[same:])
        with self._lock:
            self._seen[rollout] = (raw, out)
        return out

    def chat(self, body: dict[str, Any], rollout: str) -> UpstreamReply:
        try:
            messages = self._messages(body["messages"], rollout)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return UpstreamReply(400, error_payload(f"messages: {e}"), 0, f"bad messages: {e}")
        try:
            model = self.model_for(rollout)
            ai = model.invoke(messages, tools=body.get("tools"))
        except Exception as e:  # noqa: BLE001 -- the scripted model failed: a 500 the client sees
            why = f"model raised {type(e).__name__}: {e}"
            return UpstreamReply(500, error_payload(why, "server_error"), 0, why)
        message = to_openai(ai)
        um = getattr(ai, "usage_metadata", None) or {}
        guess = self.estimate_usage
        prompt = int(um.get("input_tokens") or (estimate_tokens(json.dumps(body["messages"])) if guess else 0))
        completion = int(um.get("output_tokens") or (estimate_tokens(json.dumps(message)) if guess else 0))
        payload = {"id": f"chatcmpl-{rollout[:8]}", "object": "chat.completion", "created": 0,
                   "model": body.get("model") or self.model_name,
                   "choices": [{"index": 0, "message": message,
                                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}}
        return UpstreamReply(200, payload)

    def models(self) -> UpstreamReply:
        return UpstreamReply(200, {"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                               "owned_by": "evoharness"}]})

    def end(self, rollout: str) -> None:
        with self._lock:
            self._models.pop(rollout, None)
            self._seen.pop(rollout, None)

    def close(self) -> None:
        with self._lock:
            self._models.clear()
            self._seen.clear()
