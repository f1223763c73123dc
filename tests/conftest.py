"""Shared test set-up: no network model calls, an isolated home and config per test."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not SHARED_DATA.is_dir():  # CI lays shared/ beside the clone; sessions have ../shared
    SHARED_DATA = Path(os.environ.get("EVOHARNESS_SHARED_DATA", "/work/shared/data"))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("EVOHARNESS_") and key != "EVOHARNESS_SHARED_DATA":
            monkeypatch.delenv(key)
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("EVOHARNESS_HOME", str(home / ".evoharness"))
    yield


_real_connect = socket.socket.connect


def _guarded_connect(self, address):
    """Unit tests may use loopback and Unix sockets; nothing else (no network model)."""
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if not (host.startswith("127.") or host in ("localhost", "::1")):
            raise RuntimeError(f"network access to {address!r} is forbidden in tests")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    socket.socket.connect = _guarded_connect
    yield
    socket.socket.connect = _real_connect


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
