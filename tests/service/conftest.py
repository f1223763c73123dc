from __future__ import annotations

import pytest

from tests.service.helpers import Server, write_config


@pytest.fixture
def serve(tmp_path):
    """Start servers with a config for ``tmp_path``; every server is stopped at the end of the test."""
    started: list[Server] = []

    def start(run=None, service=None, extra_sections=None, **kw) -> Server:
        cfg = write_config(tmp_path, run=run, service=service, extra_sections=extra_sections)
        server = Server(cfg, **kw).start()
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()
