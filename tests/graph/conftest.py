from __future__ import annotations

import os
import uuid
from urllib.parse import quote

import pytest
import structlog

from evoharness.config import Settings

PG = os.environ.get("EVOHARNESS_TEST_POSTGRES")  # read at import: the autouse fixture clears EVOHARNESS_*


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()


def run_settings(tmp_path, **run) -> Settings:
    """A small, fast run: synthetic env, in-process agent, playbook roles, SQLite checkpoints."""
    base = {
        "harness": tmp_path / "harness", "env": "synthetic", "model": "scripted:weak", "rollouts": 4,
        "max_rounds": 3, "budget": 3000, "checkpointer": "sqlite", "patience": 2,
    }
    base.update(run)
    return Settings.model_validate({
        "home": tmp_path / "state", "log_format": "json", "log_level": "warning",
        "run": base, "sandbox": {"backend": "inprocess", "workers": 1}, "roles": {"kind": "playbook"},
    })


@pytest.fixture
def make_settings(tmp_path):
    return lambda **run: run_settings(tmp_path, **run)


@pytest.fixture
def pg_checkpointer():
    """A Postgres checkpointer URL in a fresh schema (dropped afterwards); skips without EVOHARNESS_TEST_POSTGRES."""
    if not PG:
        pytest.skip("EVOHARNESS_TEST_POSTGRES not set (scripts/services.sh starts PostgreSQL)")
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    yield PG + ("&" if "?" in PG else "?") + "options=" + quote(f"-csearch_path={name}")
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE")
