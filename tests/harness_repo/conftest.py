"""Fixtures for the harness repo tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.repo import HarnessRepo


@pytest.fixture
def harness(tmp_path: Path) -> HarnessRepo:
    return init_harness(tmp_path / "harness")


@pytest.fixture(autouse=True)
def _fresh_logging():
    """CLI tests configure structlog with pytest's captured stderr; don't let it outlive the test."""
    yield
    structlog.reset_defaults()
