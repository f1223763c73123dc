"""The model gateway: a small OpenAI-compatible proxy on a Unix socket, a sandbox's only way to a model.

The executor starts one ``Gateway`` per run (lazily), opens a *rollout* on it for each sandboxed
rollout and hands the worker the spec ``gateway:SOCKET?rollout=TOKEN#MODEL``; the worker's client
then talks HTTP over the socket (bound into the sandbox at the same path) to
``http://gateway/r/TOKEN/v1``.

A gateway serves one or more *lanes*: a named upstream with its pinned model (``agent``: the run's
model; ``user``: the model of a simulated user, e.g. tau2's customer). Each token is opened on one
lane, so one rollout holding an ``agent`` and a ``user`` token is counted on two separate accounts,
and each token reaches only its own lane's model. Served routes, per rollout prefix ``/r/TOKEN``:

- ``POST /v1/chat/completions``: checked (a JSON object with a non-empty ``messages`` list; no
  ``stream``), ``model`` pinned to the token's lane's model, then answered by that lane's ``Upstream``
  (a real endpoint with the host's API key, or a scripted model). Streaming is refused with a 400.
- ``GET /v1/models``: the lane's upstream's model list.

Every request is counted against its rollout (requests, prompt/completion tokens as the upstream
reports them, errors, retries); ``close_rollout(token)`` returns the counts and forgets the token,
so a finished sandbox cannot spend on another rollout's account. Unknown tokens get a 403, bad
requests a 400, and every error body is OpenAI-shaped JSON (``{"error": {"message": ...}}``).
The socket is mode 0o777 inside a private 0o711 directory: the sandbox's unprivileged uid can
connect to it by its exact path but cannot list the directory.

**Incremental requests** (``CONVERSATION``, an extension field of the chat request; what the package's
``GatewayChatModel`` sends, never a real endpoint: the field is taken off before the upstream sees the request).
A whole request carrying ``{"hold": true}`` asks the gateway to hold its conversation for the rollout: a 200
reply then carries ``{"tag": T, "count": N}`` under the same key (N: the messages held). The client's next
request may then send only the messages added since, with ``{"extends": T, "count": N}``; the gateway rebuilds
the whole request (the held messages, then these; with ``"tools": "held"`` in the field, the held request's tools
too, and the delta carries none of its own) and serves it as if it had been sent whole: the upstream,
the per-rollout counts and the model see exactly that. A delta that does not extend what the rollout holds --
nothing held, another tag (a stale one: a replay; another rollout's), another count (a rewrite of earlier
messages) -- is refused with a 409 (``conversation_mismatch``) and never merged; the client then sends the
whole request. A delta whose whole request would pass ``max_body_mb`` gets the 413 a whole request would. Each
tag serves only the request that comes next on the rollout, whatever it is: a replayed or refused delta, a
request that does not end in a 200 and a request without the field all leave nothing held.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import socketserver
import tempfile
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from evoharness.agent.models import CONVERSATION, MISMATCH  # the field for incremental requests, a 409's code
from evoharness.errors import InfraError
from evoharness.logging import get_logger
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.gateway_upstream import Upstream, UpstreamReply, error_payload

log = get_logger(__name__)

SOCKET_NAME = "gw.sock"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with its NUL
AGENT, USER = "agent", "user"  # lane names: the run's model, a simulated user's model


@dataclass
class _Held:
    """One rollout's conversation as its last request gave it (whole), for a delta to extend."""

    tag: str
    messages: list[Any]
    size: int  # bytes of the request bodies it was built from (the whole request's, roughly)
    tools: list[Any] | None = None  # the request's tools (None: it had none)


@dataclass
class Lane:
    """One upstream behind the gateway and the model (and temperature) its requests are pinned to (None: not
    pinned: what the client sent)."""

    upstream: Upstream
    model: str | None = None
    temperature: float | None = None


@dataclass
class RolloutUsage:
    """What one rollout spent through the gateway."""

    label: str = ""
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    retries: int = 0
    usage_missing: int = 0  # 200 replies that carried no usage block
    upstream_seconds: float = 0.0  # time spent waiting for the upstream (retries and backoff included)
    last_error: str = ""

    def as_meta(self) -> dict[str, Any]:
        """The counts as a plain dict, in field order (``dataclasses.asdict`` gives the same, ~10x slower: it
        deep-copies each value, and every field is a number or a string)."""
        return {name: getattr(self, name) for name in _USAGE_FIELDS}


_USAGE_FIELDS = tuple(f.name for f in fields(RolloutUsage))


def gateway_spec(socket: Path | str, token: str, model: str) -> str:
    """The model spec a sandboxed worker uses to reach ``model`` through the gateway at ``socket``."""
    return f"gateway:{socket}?rollout={token}#{model}"


class Gateway:
    """One OpenAI-compatible proxy on a Unix socket, serving its lanes (see the module docstring).

    ``upstream`` (optional) is the ``agent`` lane, ``model`` its pinned model: when set, every chat
    request's ``model`` is replaced by it (a sandbox cannot pick another, costlier model). ``lanes``
    adds others by name (e.g. ``{USER: Lane(upstream, "cust")}``); at least one lane is needed.
    Use as a context manager, or ``start()`` and ``close()``.
    """

    def __init__(self, upstream: Upstream | None = None, *, model: str | None = None,
                 cfg: GatewayConfig | None = None, lanes: dict[str, Lane] | None = None) -> None:
        self.lanes: dict[str, Lane] = {AGENT: Lane(upstream, model)} if upstream is not None else {}
        self.lanes |= lanes or {}
        if not self.lanes:
            raise ValueError("a gateway needs an upstream")
        self.cfg = cfg or GatewayConfig()
        self._dir: Path | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._rollouts: dict[str, RolloutUsage] = {}
        self._lane_of: dict[str, Lane] = {}  # token -> its lane
        self._held: dict[str, _Held] = {}  # token -> its conversation, for incremental requests
        self._lock = threading.Lock()

    @property
    def upstream(self) -> Upstream:
        """The ``agent`` lane's upstream (the first lane's when there is no agent lane)."""
        return self.lanes.get(AGENT, next(iter(self.lanes.values()))).upstream

    @property
    def model(self) -> str | None:
        """The ``agent`` lane's pinned model (the first lane's when there is no agent lane)."""
        return self.lanes.get(AGENT, next(iter(self.lanes.values()))).model

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        if self._dir is None:
            raise RuntimeError("gateway not started")
        return self._dir / SOCKET_NAME

    def start(self) -> Path:
        """Bind the socket and serve in a background thread; the socket path. InfraError if it cannot."""
        if self._server is not None:
            return self.socket
        base = self.cfg.socket_dir
        try:
            self._dir = Path(tempfile.mkdtemp(prefix="evoharness-gw-", dir=base))
            self._dir.chmod(0o711)
        except OSError as e:
            raise InfraError(f"gateway: cannot make a socket directory under {base or tempfile.gettempdir()}: "
                             f"{e.strerror}", retryable=False) from None
        path = self.socket
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            self._remove_dir()
            raise InfraError(f"gateway: socket path {path} is longer than {MAX_SOCKET_PATH} bytes; "
                             "set sandbox.gateway.socket_dir to a shorter directory", retryable=False)
        try:
            self._server = _Server(str(path), self)
            path.chmod(0o777)
        except OSError as e:
            self._remove_dir()
            raise InfraError(f"gateway: cannot listen on {path}: {e.strerror}", retryable=False) from None
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="model-gateway", daemon=True)
        self._thread.start()
        log.info("gateway.started", socket=str(path),
                 lanes={name: f"{lane.upstream.name}:{lane.model}" for name, lane in self.lanes.items()})
        return path

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for lane in self.lanes.values():
            lane.upstream.close()
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- per-rollout accounts --------------------------------------------------------------

    def open_rollout(self, label: str = "", lane: str = AGENT) -> str:
        """A fresh, unguessable token on ``lane`` whose requests are counted together (``label`` is for
        humans). KeyError for a lane this gateway does not serve."""
        if lane not in self.lanes:
            raise KeyError(f"the gateway has no {lane!r} lane (it serves {', '.join(self.lanes)})")
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._rollouts[token] = RolloutUsage(label=label)
            self._lane_of[token] = self.lanes[lane]
        return token

    def usage(self, token: str) -> RolloutUsage:
        with self._lock:
            return RolloutUsage(**self._rollouts[token].as_meta())

    def close_rollout(self, token: str) -> RolloutUsage:
        """The rollout's counts; its token stops working."""
        with self._lock:
            usage = self._rollouts.pop(token)
            lane = self._lane_of.pop(token)
            self._held.pop(token, None)
        lane.upstream.end(token)
        return usage

    def spec(self, token: str, model: str) -> str:
        return gateway_spec(self.socket, token, model)

    def _lane(self, token: str) -> Lane | None:
        with self._lock:
            return self._lane_of.get(token)

    def _account(self, token: str, reply: UpstreamReply, chat: bool, seconds: float = 0.0) -> None:
        with self._lock:
            u = self._rollouts.get(token)
            if u is None:  # closed while the request ran
                return
            u.requests += 1 if chat else 0
            u.upstream_seconds = round(u.upstream_seconds + seconds, 4)
            u.retries += reply.retries
            if reply.status != 200:
                u.errors += 1
                u.last_error = reply.error or f"HTTP {reply.status}"
                return
            if not chat:
                return
            usage = reply.payload.get("usage")
            if isinstance(usage, dict):
                u.prompt_tokens += _int(usage.get("prompt_tokens"))
                u.completion_tokens += _int(usage.get("completion_tokens"))
            else:
                u.usage_missing += 1

    # ---- one request -----------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes | None) -> UpstreamReply:
        """Route one request (the HTTP handler's only call; also usable directly)."""
        parts = path.split("?", 1)[0].split("/")
        # "", "r", TOKEN, "v1", ...
        if len(parts) < 5 or parts[1] != "r" or parts[3] != "v1":
            return _err(404, f"no route {path!r}: the gateway serves /r/<rollout>/v1/chat/completions and "
                        "/r/<rollout>/v1/models", "not_found")
        token, route = parts[2], "/".join(parts[4:])
        lane = self._lane(token)
        if lane is None:
            return _err(403, "unknown or finished rollout token", "forbidden")
        if route == "models":
            if method != "GET":
                return _err(405, f"{method} not allowed on /v1/models", "method_not_allowed")
            reply = lane.upstream.models()
            self._account(token, reply, chat=False)
            return reply
        if route != "chat/completions":
            return _err(404, f"no route /v1/{route}: the gateway serves chat/completions and models", "not_found")
        if method != "POST":
            return _err(405, f"{method} not allowed on /v1/chat/completions", "method_not_allowed")
        request, problem = _parse_chat(body)
        conversation = request.pop(CONVERSATION, None) if request is not None else None
        with self._lock:  # what the rollout held serves only the request that comes next, whatever it is
            held = self._held.pop(token, None)
        start = time.monotonic()
        if request is None:
            reply = _err(400, problem)
        elif (extended := self._extend(held, request, conversation, len(body or b"")))[0] is not None:
            reply = extended[0]
        else:
            if lane.model:
                request["model"] = lane.model
            if lane.temperature is not None:  # the host's openai:URL#model?temperature=T, whatever the client sent
                request["temperature"] = lane.temperature
            # the upstream gets its own list: it was the one held for the next delta, so a message the upstream
            # appended became part of the rollout's conversation (the next delta refused, or built on it)
            held_request, request = request, {**request, "messages": list(request["messages"])}
            reply = lane.upstream.chat(request, token)
            if conversation is not None and reply.status == 200:
                reply = self._hold(token, held_request, extended[1], reply)
        self._account(token, reply, chat=True, seconds=time.monotonic() - start)
        if reply.status != 200:
            log.info("gateway.error", status=reply.status, error=reply.error[:300])
        return reply

    def _extend(self, held: _Held | None, request: dict[str, Any], conversation: Any, size: int
                ) -> tuple[UpstreamReply | None, int]:
        """For a delta (``conversation`` names what it extends): the whole request's messages (``held``'s, then
        the delta's) are put in ``request``, or the refusal comes back (nothing merged). Also the whole request's
        size (about: the bodies it was built from)."""
        if conversation is None:
            return None, size
        if not isinstance(conversation, dict) or not (
                conversation.keys() == {"hold"} and conversation["hold"] is True
                or conversation.keys() in ({"extends", "count"}, {"extends", "count", "tools"})
                and isinstance(conversation["extends"], str) and type(conversation["count"]) is int
                and conversation.get("tools", "held") == "held"):
            return _err(400, f"'{CONVERSATION}' must be {{\"hold\": true}} or {{\"extends\": TAG, \"count\": N}} "
                        "(and \"tools\": \"held\" to use the held request's tools)"), 0
        if "extends" not in conversation:
            return None, size
        if "tools" in conversation and "tools" in request:
            return _err(400, f"a delta with '{CONVERSATION}' tools \"held\" must not carry 'tools' of its own"), 0
        if held is None or held.tag != conversation["extends"]:
            why = ("this rollout holds no conversation" if held is None else
                   "the delta extends a conversation this rollout does not hold")
            return _err(409, f"{why}: send the whole request", MISMATCH), 0
        if len(held.messages) != conversation["count"]:
            return _err(409, f"the delta builds on {conversation['count']} messages; this rollout holds "
                        f"{len(held.messages)}: send the whole request", MISMATCH), 0
        limit = self.cfg.max_body_mb * 1024 * 1024
        if held.size + size > limit:
            return _err(413, f"the whole request (about {held.size + size} bytes) exceeds the gateway's limit "
                        f"of {limit}"), 0
        request["messages"] = held.messages + request["messages"]
        if "tools" in conversation and held.tools is not None:
            request["tools"] = held.tools
        return None, held.size + size

    def _hold(self, token: str, request: dict[str, Any], size: int, reply: UpstreamReply) -> UpstreamReply:
        """Hold ``request``'s messages and tools (a 200 reply's whole request) for the rollout's next delta; the reply
        with the new tag."""
        tag, messages = secrets.token_urlsafe(12), request["messages"]
        with self._lock:
            if token not in self._rollouts:  # closed while the request ran
                return reply
            self._held[token] = _Held(tag, messages, size, request.get("tools"))
        return UpstreamReply(reply.status, {**reply.payload, CONVERSATION: {"tag": tag, "count": len(messages)}},
                             reply.retries, reply.error)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and v >= 0 else 0


def _err(status: int, message: str, code: str = "invalid_request") -> UpstreamReply:
    return UpstreamReply(status, error_payload(message, code=code), 0, message)


def _parse_chat(body: bytes | None) -> tuple[dict[str, Any] | None, str]:
    """The request dict, or None and one line saying what is wrong with it."""
    if not body:
        return None, "empty request body: expected a JSON chat completion request"
    try:
        request = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"request body is not valid JSON: {e}"
    if not isinstance(request, dict):
        return None, "request body must be a JSON object"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return None, "'messages' must be a non-empty list"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return None, f"messages[{i}] must be an object with a string 'role'"
    if "model" in request and not isinstance(request["model"], str):
        return None, "'model' must be a string"
    if request.get("stream"):
        return None, "streaming is not supported by the evoharness model gateway; send stream=false"
    if "tools" in request and not isinstance(request["tools"], list):
        return None, "'tools' must be a list"
    return request, ""


class _Server(socketserver.UnixStreamServer):
    """One thread per open connection, as ``ThreadingUnixStreamServer``, but a thread whose connection closed waits
    up to ``IDLE_S`` for the next one instead of exiting (at most ``IDLE_THREADS`` wait): each rollout opens a
    connection of its own, and starting a thread for it (the accepting thread waits until it runs) cost ~0.13 ms
    of the host's CPU a rollout. A connection never waits for a busy thread: with none idle, a new one starts."""

    IDLE_THREADS = 16
    IDLE_S = 30.0

    def __init__(self, path: str, gateway: Gateway) -> None:
        self.gateway = gateway
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a connection, less the connections queued for them
        self._idle_lock = threading.Lock()
        self._closing = False
        super().__init__(path, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._idle_lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(request)
                return
        threading.Thread(target=self._serve, args=(request,), name="model-gateway-conn", daemon=True).start()

    def _serve(self, request: Any) -> None:
        while request is not None:
            try:
                self.finish_request(request, None)
            except Exception:  # noqa: BLE001 -- as socketserver: logged, the connection closed, the thread goes on
                self.handle_error(request, None)
            finally:
                self.shutdown_request(request)
            with self._idle_lock:
                if self._closing or self._idle >= self.IDLE_THREADS:
                    return
                self._idle += 1
            request = self._next()

    def _next(self) -> Any:
        """The next connection for this idle thread; None when it should end (idle too long, or closing)."""
        while True:
            try:
                return self._jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._idle_lock:
                    if self._idle > 0:  # more threads wait than connections are queued: this one may go
                        self._idle -= 1
                        return None
                # every waiting thread was handed a connection, this one included: it is on its way

    def server_close(self) -> None:
        super().server_close()
        with self._idle_lock:
            self._closing, idle, self._idle = True, self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("gateway.handler_crashed", exc_info=True)


MAX_LINE = 65536  # bytes of a request line or a header line (as http.server)
MAX_HEADERS = 100  # header lines of a request (as http.client)
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 411: "Length Required", 413: "Content Too Large", 429: "Too Many Requests",
            431: "Request Header Fields Too Large",
            500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 505: "HTTP Version Not Supported"}


class _Handler(socketserver.StreamRequestHandler):
    """One sandbox connection: HTTP/1.1 requests in turn, kept alive until the client closes it or asks to.

    A small parser of its own rather than ``http.server``'s (which parses every request's headers with the
    ``email`` package: most of the gateway's CPU per request): the request line, at most ``MAX_HEADERS``
    header lines of at most ``MAX_LINE`` bytes, a body of exactly ``Content-Length`` bytes (required for
    POST; chunked bodies are refused). Each reply goes out in one write. Anything it cannot parse gets a
    JSON error and the connection is closed."""

    server: _Server

    def handle(self) -> None:
        try:
            while self._one():
                pass
        except ConnectionError as e:  # the client died with a reply unread (a rollout killed at a limit, crashed):
            # its connection is reset, nothing to answer -- not a crash of the gateway (a warning with a traceback)
            log.debug("gateway.client_gone", error=type(e).__name__)

    def _one(self) -> bool:
        """Serve one request; whether the connection stays open for another."""
        line = self.rfile.readline(MAX_LINE + 1)
        if not line:
            return False
        if len(line) > MAX_LINE:
            return self._send(_err(400, "request line too long"), close=True)
        if not line.endswith(b"\n"):  # the client went away mid-line
            return False
        words = line.decode("latin-1").split()
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            return self._send(_err(400, f"bad request line {line[:100]!r}"), close=True)
        method, path, version = words
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            return self._send(_err(505, f"HTTP version {version[:20]!r} is not supported"), close=True)
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self.rfile.readline(MAX_LINE + 1)
            if len(raw) > MAX_LINE:
                return self._send(_err(431, "header line too long"), close=True)
            if raw in (b"\r\n", b"\n") or not raw.endswith(b"\n"):  # the end, or the client went away
                break
            name, colon, value = raw.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():
                return self._send(_err(400, f"bad header line {raw[:100]!r}"), close=True)
            headers[name.lower()] = value.strip()
        else:
            return self._send(_err(431, f"more than {MAX_HEADERS} headers"), close=True)
        if not raw.endswith(b"\n"):  # the client went away mid-request
            return False
        conn = headers.get("connection", "").lower()
        close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
        if method == "GET":
            return self._send(self.server.gateway.handle("GET", path, None), close=close)
        if method != "POST":
            code = 405 if method in ("PUT", "DELETE", "PATCH") else 501
            return self._send(_err(code, f"{method[:20]} is not allowed", "method_not_allowed"), close=True)
        limit = self.server.gateway.cfg.max_body_mb * 1024 * 1024
        length = headers.get("content-length")
        if length is None or not (length.isascii() and length.isdigit()) or "transfer-encoding" in headers:
            return self._send(_err(411, "a Content-Length header is required (chunked bodies are not supported)"),
                              close=True)  # (isascii: str.isdigit takes '\xb2', which int() refuses)
        if len(length) > 18 or int(length) > limit:  # (int() refuses over 4,300 digits)
            shown = length if len(length) <= 18 else f"{length[:18]}... ({len(length)} digits)"
            return self._send(_err(413, f"request body of {shown} bytes exceeds the gateway's limit of {limit}"),
                              close=True)
        if headers.get("expect", "").lower() == "100-continue" and version == "HTTP/1.1":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = self.rfile.read(int(length))
        if len(body) < int(length):  # the client went away mid-body
            return False
        return self._send(self.server.gateway.handle("POST", path, body), close=close)

    def _send(self, reply: UpstreamReply, *, close: bool) -> bool:
        """Write ``reply`` in one write; False (close the connection) when ``close``."""
        data = json.dumps(reply.payload).encode()
        head = (f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Unknown')}\r\n"
                f"Server: evoharness-gateway\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                + ("Connection: close\r\n" if close else "") + "\r\n")
        try:
            self.wfile.write(head.encode("latin-1") + data)
        except OSError:  # the client went away
            return False
        return not close


def http_lane(spec: str, cfg: GatewayConfig, key_env: str, what: str = "model") -> Lane:
    """A lane forwarding to ``openai:URL#model``'s URL, pinned to its model, with the key from the host
    variable ``key_env`` (read now, never passed on). InputError for any other spec."""
    from evoharness.errors import InputError
    from evoharness.model_specs import split_temperature
    from evoharness.sandbox.gateway_upstream import HttpUpstream

    base, temperature = split_temperature(spec) if spec.startswith("openai:") else (spec, None)
    url, _, name = base.removeprefix("openai:").partition("#")
    if not spec.startswith("openai:") or not url or not name:
        raise InputError(what, f"{spec!r}: the gateway forwards openai:URL#model specs")
    return Lane(HttpUpstream(url, api_key=os.environ.get(key_env) or None, cfg=cfg), name, temperature)


def start_gateway(model_spec: str | None, cfg: GatewayConfig | None = None, upstream: Upstream | None = None,
                  *, user_spec: str | None = None) -> Gateway:
    """A started gateway for a run.

    Its ``agent`` lane: ``upstream`` if given (pinned to ``model_spec``'s name), else forwarding
    ``openai:URL#model`` (``http_lane``, pinned to the spec's temperature, 0 when it names none); no agent lane
    when both ``model_spec`` and ``upstream`` are None. ``user_spec`` (``openai:URL#model``, a simulated user's
    model) adds a ``user`` lane forwarding there with the key from ``cfg.user_api_key_env`` (default:
    ``cfg.api_key_env``).
    """
    cfg = cfg or GatewayConfig()
    lanes: dict[str, Lane] = {}
    try:
        if upstream is not None:
            from evoharness.model_specs import model_name

            lanes[AGENT] = Lane(upstream, model_name(model_spec or "") or None)
        elif model_spec is not None:
            lanes[AGENT] = http_lane(model_spec, cfg, cfg.api_key_env)
            if lanes[AGENT].temperature is None:  # the spec's default, 0: a harness's client cannot sample otherwise
                lanes[AGENT].temperature = 0.0
        if user_spec is not None:
            lanes[USER] = http_lane(user_spec, cfg, cfg.user_api_key_env or cfg.api_key_env, "env")
        gw = Gateway(cfg=cfg, lanes=lanes)
        gw.start()
    except BaseException:
        for lane in lanes.values():
            lane.upstream.close()
        raise
    return gw
