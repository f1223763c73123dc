"""`serve`'s uvicorn server sets its SIGINT/SIGTERM handlers only on the main thread, as uvicorn's own does: off it
(an embedding that serves from a thread) ``signal.signal`` raised ValueError and nothing was served."""

from __future__ import annotations

import signal
import threading

import uvicorn

from evoharness.service.cli import _server


def _app(scope, receive, send):  # never called: the server is not started
    raise AssertionError("not served")


def test_capture_signals_off_the_main_thread_sets_no_handler_and_raises_nothing():
    server = _server(uvicorn.Config(app=_app))
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def serve():
        try:
            with server.capture_signals():
                seen.append(signal.getsignal(signal.SIGTERM))
        except BaseException as e:  # noqa: BLE001 -- the outcome under test
            seen.append(e)

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join(10)
    assert seen == [before]
    assert signal.getsignal(signal.SIGTERM) == before


def test_capture_signals_on_the_main_thread_sets_and_restores_both_handlers():
    server = _server(uvicorn.Config(app=_app))
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with server.capture_signals():
        inside = {sig: signal.getsignal(sig) for sig in before}
    assert inside == {sig: server.handle_exit for sig in before}
    assert {sig: signal.getsignal(sig) for sig in before} == before
