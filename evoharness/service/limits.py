"""At most ``limit`` requests in flight and ``queued`` waiting for a slot; beyond, an immediate 429.

Ingestion is CPU work (validate, label, store durably). Accepting every request at once only
queues them inside the process: each waits behind all the others, so latency grows with the
queue (200 requests in flight on 2 CPUs: p95 over 20 s) and nothing is gained. With a bound, the
requests in flight finish quickly and the rest are told to come back (``Retry-After``, seconds),
which a client or load balancer can act on. A short queue (``queued``) keeps the CPUs busy
between the moment a slot frees and the moment a turned-away client comes back. ``/health``
and ``/metrics`` are exempt, so the service can be watched while it is saturated.

A pure ASGI middleware: the count is read and changed on the event loop only (no lock needed).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

EXEMPT = frozenset({"/health", "/metrics"})


class InFlightLimit:
    def __init__(self, app: Any, limit: int, queued: int = 0, retry_after_s: int = 1) -> None:
        if limit < 1 or queued < 0:
            raise ValueError("limit must be at least 1 and queued at least 0")
        self.app = app
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
        if self.active >= self.limit + self.queued:
            self.rejected += 1
            await self._busy(send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        self.active += 1
        try:
            async with self._slots:
                await self.app(scope, receive, send)
        finally:
            self.active -= 1

    async def _busy(self, send) -> None:
        body = json.dumps({"error": f"busy: {self.limit} requests in flight and {self.queued} waiting "
                                    f"(service.max_in_flight, service.max_queued); retry after "
                                    f"{self.retry_after_s} s"}).encode()
        await send({"type": "http.response.start", "status": 429, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(self.retry_after_s).encode())]})
        await send({"type": "http.response.body", "body": body})
