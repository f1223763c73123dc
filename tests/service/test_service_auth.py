"""Bearer-token checks, and `service.protect_reads` (in process: FastAPI's TestClient runs the app)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app
from evoharness.service.auth import check_token

TOKEN = "s3cret-token-0123456789"


@pytest.mark.parametrize(("header", "ok"), [
    (f"Bearer {TOKEN}", True),
    (f"bearer {TOKEN}", True),  # the scheme is case-insensitive
    (f"Bearer  {TOKEN} ", True),
    (f"Bearer {TOKEN}x", False),
    (f"Bearer {TOKEN[:-1]}", False),
    (TOKEN, False),  # no scheme
    (f"Basic {TOKEN}", False),
    ("Bearer ", False),
    ("", False),
    (None, False),
])
def test_check_token(header, ok):
    assert check_token(TOKEN, header) is ok


def test_no_token_configured_means_auth_off():
    assert check_token(None, None) and check_token(None, "Bearer anything")


def test_protect_reads_requires_the_token_on_reads_but_not_on_health(tmp_path):
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False, "protect_reads": True}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.get("/health").status_code == 200
        for path in ("/runs", "/candidates", "/composition", "/metrics", "/trajectories/x"):
            assert c.get(path).status_code == 401, path
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert c.get("/composition", headers=auth).json()["n"] == 0
        assert c.get("/metrics", headers=auth).status_code == 200
        assert c.get("/candidates", headers=auth).json()["candidates"] == []
