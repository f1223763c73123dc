"""Fixtures for the verification tests."""

from __future__ import annotations

import pytest
import structlog


@pytest.fixture(autouse=True)
def _fresh_logging():
    """The CLI and the benchmark configure structlog; don't let that outlive the test."""
    yield
    structlog.reset_defaults()
