"""The FastAPI app of `evoharness serve`: ingest store, background loop and metrics on start-up."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry
from starlette.exceptions import HTTPException as StarletteHTTPException

from evoharness import __version__
from evoharness.config import Settings
from evoharness.errors import InfraError, InputError
from evoharness.logging import get_logger

log = get_logger("evoharness.service")


def ingest_path(settings: Settings) -> Path:
    return Path(settings.home) / "service" / "ingest.sqlite"


def prepare(settings: Settings) -> None:
    """What the service needs from disk, done before it serves: the seed harness made where ``run.harness`` does
    not exist, the ingest store opened, the service's state file read. Each failure is the error it is (an
    ``InputError``, ``InfraError`` or ``OSError``: one line from the CLI); raised in the app's start-up instead,
    uvicorn printed it as a traceback and exited 3 (an ingest store that is not a database, a harness path under
    a file, a daemon.json that is not JSON)."""
    from evoharness.service.daemon import Daemon
    from evoharness.service.ingest import IngestStore

    harness = Path(settings.run.harness)
    if not harness.exists():
        from evoharness.harness_repo.init import init_harness

        init_harness(harness)
    store = IngestStore(ingest_path(settings)).open()
    try:
        Daemon(settings, store, quiet=True).current_run  # noqa: B018 (read for its errors)
    finally:
        store.close()


def _unusable(message: str, field: str) -> JSONResponse:
    """422: what was sent cannot be used, whatever the service's state (a state that refuses it is 409)."""
    return JSONResponse({"error": message, "errors": [{"field": field, "error": message}]}, status_code=422)


def create_app(settings: Settings, token: str | None, *, quiet: bool = False) -> FastAPI:
    """The app. ``token`` None turns auth off (only `serve --insecure-no-auth` does that)."""
    from evoharness.threads import guard_thread_starts

    guard_thread_starts()  # as the CLI's main does, for an app served without it: no thread start waits forever
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.service.daemon import Daemon
    from evoharness.service.ingest import IngestStore
    from evoharness.service.metrics import RequestMetrics, ServiceCollector
    from evoharness.service.reports import ReportRenderer
    from evoharness.service.routes import public, reads, writes

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        harness = Path(settings.run.harness)
        if not harness.exists():  # once, before any request or the loop can race to create it
            from evoharness.harness_repo.init import init_harness

            await asyncio.to_thread(init_harness, harness)
        ingest = IngestStore(ingest_path(settings), Labeller(settings.diagnosis)).open()
        daemon = Daemon(settings, ingest, quiet=quiet)
        app.state.ingest, app.state.daemon = ingest, daemon
        pool = None
        if settings.service.workers > 1:  # parse, label and store ingested batches in worker processes
            from evoharness.service.workers import IngestPool

            pool = IngestPool(settings.service.workers, ingest_path(settings),
                              settings.diagnosis.model_dump(mode="json"))
            await pool.start()
        app.state.ingest_pool = pool
        registry = CollectorRegistry()
        registry.register(ServiceCollector(app.state))
        app.state.registry, app.state.metrics = registry, RequestMetrics(registry)
        daemon.start()
        log.info("service.started", home=str(settings.home), loop=settings.service.loop, auth=token is not None,
                 workers=settings.service.workers)
        try:
            yield
        finally:
            log.info("service.stopping")
            app.state.stopped_cleanly = await asyncio.to_thread(daemon.stop)
            if not app.state.stopped_cleanly:
                log.warning("service.shutdown_timeout", timeout_s=settings.service.shutdown_timeout_s)
            if pool is not None:
                await asyncio.to_thread(pool.close)
            ingest.close()

    app = FastAPI(title="evoharness", version=__version__, lifespan=lifespan)
    app.state.settings, app.state.token, app.state.stopped_cleanly = settings, token, True
    app.state.ingest_pool = None  # set at start-up when service.workers > 1
    app.state.reports = ReportRenderer(settings)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's own (a body it cannot parse, 404) and ours
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        from evoharness.service.bad_request import unparsed
        from evoharness.service.limits import BodyTimeout

        if exc.status_code == 401:
            request.app.state.metrics.unauthorized.inc()
        detail = exc.detail
        if isinstance(exc.__cause__, BodyTimeout):  # FastAPI read the body for a model and gave up: 400 -> 408
            return JSONResponse({"error": exc.__cause__.message}, status_code=408, headers={"Connection": "close"})
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            # a body that cannot be parsed is 422 like every other body the service cannot use (docs/service.md)
            return _unusable(unparsed(request, exc.__cause__) or "body cannot be parsed", "body")
        if exc.status_code == 422:
            return _unusable(detail, "body")
        return JSONResponse({"error": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        from evoharness.service.bad_request import describe

        return JSONResponse(describe(request, list(exc.errors()), getattr(exc, "body", None)), status_code=422)

    @app.exception_handler(InputError)
    async def _input_error(request: Request, exc: InputError) -> JSONResponse:
        # one no route turned into a 422 is what the service holds (a run's settings, its home, the queue's
        # database, an export directory of other files), not the request: 409 (docs/service.md)
        return JSONResponse({"error": str(exc)}, status_code=409)

    @app.exception_handler(InfraError)
    async def _infra_error(request: Request, exc: InfraError) -> JSONResponse:
        log.error("service.infra_error", path=request.url.path, error=str(exc))
        return JSONResponse({"error": str(exc)}, status_code=503)

    app.include_router(public)
    app.include_router(reads)
    app.include_router(writes)
    from evoharness.service.limits import InFlightLimit

    svc = settings.service
    app.add_middleware(InFlightLimit, limit=max(svc.max_in_flight, svc.workers), queued=svc.max_queued,
                       retry_after_s=svc.retry_after_s, token=token, protect_reads=svc.protect_reads,
                       body_timeout_s=svc.body_timeout_s, on_unauthorized=lambda: app.state.metrics.unauthorized.inc())
    return app
