"""At most ``limit`` requests in flight and ``queued`` waiting for a slot; beyond, an immediate 429.

Ingestion is CPU work (validate, label, store durably). Accepting every request at once only
queues them inside the process: each waits behind all the others, so latency grows with the
queue (200 requests in flight on 2 CPUs: p95 over 20 s) and nothing is gained. With a bound, the
requests in flight finish quickly and the rest are told to come back (``Retry-After``, seconds),
which a client or load balancer can act on. A short queue (``queued``) keeps the CPUs busy
between the moment a slot frees and the moment a turned-away client comes back. ``/health``
and ``/metrics`` are exempt, so the service can be watched while it is saturated.

A slot is held only by a request that may use it: a request without the bearer token to an endpoint that needs
one (every method but GET/HEAD; GET too under ``service.protect_reads``) is answered 401 at once, before its body
is read, and an admitted request must have sent its whole body within ``body_timeout_s`` (408 otherwise). Before,
four connections that sent the headers of a POST and one byte of its body, without a token, held all four slots
for as long as they stayed open: every other request waited (a legitimate POST /trajectories timed out).

A pure ASGI middleware: the count is read and changed on the event loop only (no lock needed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from evoharness.service.auth import UNAUTHORIZED, check_token

EXEMPT = frozenset({"/health", "/metrics"})


class InFlightLimit:
    def __init__(self, app: Any, limit: int, queued: int = 0, retry_after_s: int = 1, *, token: str | None = None,
                 protect_reads: bool = False, body_timeout_s: float = 60.0,
                 on_unauthorized: Callable[[], None] | None = None) -> None:
        if limit < 1 or queued < 0:
            raise ValueError("limit must be at least 1 and queued at least 0")
        self.app = app
        self.token, self.protect_reads, self.on_unauthorized = token, protect_reads, on_unauthorized
        self.body_timeout_s = body_timeout_s
        self.limit = limit
        self.queued = queued
        self.retry_after_s = retry_after_s
        self.active = 0  # admitted: running or waiting for a slot
        self.rejected = 0
        self._slots: asyncio.Semaphore | None = None  # made on the serving loop

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            if self.on_unauthorized is not None:
                self.on_unauthorized()
            await _answer(send, 401, {"error": UNAUTHORIZED}, [(b"www-authenticate", b"Bearer")])
            return
        if self.active >= self.limit + self.queued:
            self.rejected += 1
            await self._busy(send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        self.active += 1
        try:
            async with self._slots:
                await self._bounded(scope, receive, send)
        finally:
            self.active -= 1

    def _authorized(self, scope) -> bool:
        if self.token is None or (scope["method"] in ("GET", "HEAD") and not self.protect_reads):
            return True
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
        return check_token(self.token, header)

    async def _bounded(self, scope, receive, send) -> None:
        """Run the request with its body due within ``body_timeout_s`` of taking the slot; 408 past it."""
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        received, started = False, False

        async def timed_receive():
            nonlocal received
            if received:  # the body is in: later receives wait for a disconnect, as long as the answer takes
                return await receive()
            left = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), max(left, 0.0))
            except TimeoutError:
                raise BodyTimeout(self.body_timeout_s) from None
            received = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def watched_send(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except BodyTimeout as e:
            if not started:
                await _answer(send, 408, {"error": e.message}, [(b"connection", b"close")])

    async def _busy(self, send) -> None:
        await _answer(send, 429, {"error": f"busy: {self.limit} requests in flight and {self.queued} waiting "
                                           f"(service.max_in_flight, service.max_queued); retry after "
                                           f"{self.retry_after_s} s"},
                      [(b"retry-after", str(self.retry_after_s).encode())])


class BodyTimeout(Exception):
    """The request's body did not arrive within body_timeout_s (408). FastAPI reads a model's JSON body itself
    and turns what its read raises into a 400, keeping this as the cause: the app's handler answers 408 for it."""

    def __init__(self, timeout_s: float) -> None:
        self.message = f"request body not received within service.body_timeout_s ({timeout_s:g} s)"
        super().__init__(self.message)


async def _answer(send, status: int, payload: dict[str, str], headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
