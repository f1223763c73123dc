from __future__ import annotations

import pytest
import structlog

from evoharness.config import Settings


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
