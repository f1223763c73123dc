"""Requests over service.max_in_flight (+ max_queued waiting) get an immediate 429 with Retry-After;
/health stays open."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from evoharness.service.limits import InFlightLimit


def _app(release: asyncio.Event, entered: list[int]) -> InFlightLimit:
    async def slow(request):
        entered.append(1)
        await release.wait()
        return JSONResponse({"ok": True})

    async def health(request):
        return JSONResponse({"status": "ok"})

    inner = Starlette(routes=[Route("/work", slow, methods=["POST"]), Route("/health", health)])
    return InFlightLimit(inner, limit=1, queued=1, retry_after_s=3)


def test_over_the_limit_is_429_with_retry_after_and_the_slot_frees():
    async def scenario():
        release, entered = asyncio.Event(), []
        app = _app(release, entered)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            held = [asyncio.create_task(c.post("/work")) for _ in range(2)]
            while len(entered) < 1 or app.active < 2:  # one running, one waiting for the slot
                await asyncio.sleep(0.01)
            assert len(entered) == 1
            busy = await c.post("/work")
            health = await c.get("/health")
            release.set()
            done = [await t for t in held]
            after = await c.post("/work")
        return busy, health, done, after, app

    busy, health, done, after, app = asyncio.run(scenario())
    assert busy.status_code == 429 and busy.headers["retry-after"] == "3"
    assert "max_in_flight" in busy.json()["error"]
    assert health.status_code == 200  # watchable while saturated
    assert [r.status_code for r in done] == [200, 200]
    assert after.status_code == 200 and app.active == 0 and app.rejected == 1
