"""`evoharness serve`: the HTTP API and the background loop in one process."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import fail, settings_of


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="bind address (default: service.host)")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="TCP port (default: service.port)")] = None,
    no_loop: Annotated[bool, typer.Option("--no-loop", help="API only: do not drive runs in the background")]
    = False,
    insecure_no_auth: Annotated[bool, typer.Option(
        "--insecure-no-auth", help="serve without a bearer token (anyone who can connect may mutate)")] = False,
) -> None:
    """Serve the HTTP API (ingest, runs, review, export, /metrics) and run rounds in the background.

    The API token comes from EVOHARNESS_API_TOKEN; without it the service refuses to start
    unless --insecure-no-auth is given. SIGTERM: the running graph node finishes and is
    checkpointed, then the process exits 0; the next start resumes the run.
    """
    import uvicorn

    from evoharness.service.app import create_app, prepare
    from evoharness.service.auth import MIN_TOKEN_LENGTH, TOKEN_ENV

    settings = settings_of(ctx, collector=True)
    token = os.environ.get(TOKEN_ENV) or None
    if insecure_no_auth:
        token = None
    elif token is None:
        fail(f"{TOKEN_ENV} is not set: the API needs a bearer token for its mutating endpoints "
             "(or pass --insecure-no-auth)")
    elif len(token) < MIN_TOKEN_LENGTH:
        fail(f"{TOKEN_ENV} is too short ({len(token)} characters; at least {MIN_TOKEN_LENGTH})")
    svc = settings.service.model_copy(update={k: v for k, v in
                                              {"host": host, "port": port, "loop": False if no_loop else None}.items()
                                              if v is not None})
    settings = settings.model_copy(update={"service": svc})
    if settings.run.evidence:  # every run the service starts imports them: a bad file fails here, not in the loop
        from evoharness.graph.evidence import import_evidence

        import_evidence(settings.run.evidence)
    _hold_home(Path(settings.home))
    sock = _listen(svc.host, svc.port)
    port = sock.getsockname()[1]
    harness_made = not Path(settings.run.harness).exists()
    prepare(settings)  # a harness, ingest store or state file that cannot be used is one error line, exit 2
    app = create_app(settings, token)
    config = uvicorn.Config(app, log_level=settings.log_level, access_log=False, lifespan="on")
    server = _server(config)
    harness = settings.run.harness
    if harness_made:
        harness = f"{harness} (created now: a seed harness)"
    if not svc.loop:
        runs = "runs: only on POST /runs (--no-loop)"
    elif svc.min_new_process_failures:
        runs = (f"runs: on POST /runs, or once {svc.min_new_process_failures} ingested process failure(s) "
                f"arrive; harness {harness}")
    else:
        runs = f"runs: starting now (service.min_new_process_failures = 0); harness {harness}"
    typer.echo(f"evoharness serve: http://{svc.host}:{port} (auth {'bearer' if token else 'OFF'}, "
               f"home {settings.home}; {runs})", err=True)
    server.run(sockets=[sock])
    if not app.state.stopped_cleanly:
        typer.echo(f"error: the running graph node did not finish within service.shutdown_timeout_s "
                   f"({svc.shutdown_timeout_s:g} s); it re-runs on the next start", err=True)
        sys.stderr.flush()
        os._exit(1)  # executor threads may still be busy: do not wait for them
    _skip_module_teardown()
    if server.interrupted:  # Ctrl-C: the same clean stop, exit 130 ("interrupted")
        raise typer.Exit(130)


def _skip_module_teardown() -> None:
    """Once the service has stopped cleanly (every store closed, the loop's node checkpointed), spare the exit the
    cyclic garbage collection of every module: the interpreter's teardown frees the ~1,750 modules the graph brings
    in (langgraph, langchain-core, FastAPI, their pydantic models) through the cycle collector, 2-3 s of CPU on a
    loaded machine after "Application shutdown complete". ``gc.freeze()`` leaves what exists now to the process's
    end: the exit is the ordinary one (atexit handlers, stream flushes, the exit code), 0.1 s of it at load ~8
    (``import evoharness.graph.graph, evoharness.service.app`` then exit: 2.6 / 3.8 s, with the freeze 0.10 /
    0.14 s). It replaces an ``os._exit(0)`` after the private ``atexit._run_exitfuncs()``."""
    gc.freeze()


def _hold_home(home: Path) -> None:
    """One service per home, for the life of this process (``<home>/service/serve.lock``): a second `serve` on the
    same home (another port) drove the home's current run beside the first (its trajectories written twice, each
    candidate made twice) and wrote the same service/daemon.json. The lock goes with the process, however it ends."""
    from evoharness.graph.locks import try_lock

    try:
        (home / "service").mkdir(parents=True, exist_ok=True)
        fd, holder = try_lock(home / "service" / "serve.lock")
    except OSError as e:
        fail(f"cannot use home {home}: {e.strerror or e} ({e.filename or home / 'service'})")
    if fd is None:
        fail(f"another `evoharness serve`{holder} is using home {home}: one service per home (stop it, or give "
             "this one another home)")
    _HELD.append(fd)  # kept open until the process ends


_HELD: list[int] = []


def _listen(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves, so a busy port is one clear error line (exit 2)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    return sock


def _server(config):
    """uvicorn's server, except that SIGTERM and SIGINT are not raised again once it has stopped (uvicorn's
    ``capture_signals`` re-raises them): `serve` ends the process itself, 0 after SIGTERM, 130 after SIGINT
    (``interrupted``). A SIGINT raised again was a KeyboardInterrupt out of ``server.run``: the exit went through
    the interpreter's whole teardown (2.9 s idle, load ~13) and skipped the check that the running node finished
    within service.shutdown_timeout_s."""
    import uvicorn

    class Server(uvicorn.Server):
        interrupted = False

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():  # as uvicorn's own: a signal handler can
                yield  # only be set there (an embedding that serves from a thread got ValueError, nothing served)
                return
            handlers = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            self.interrupted = self.interrupted or sig == signal.SIGINT

    return Server(config)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
