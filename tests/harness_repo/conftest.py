"""Fixtures for the harness repo tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.repo import HarnessRepo


@pytest.fixture
def harness(tmp_path: Path) -> HarnessRepo:
    return init_harness(tmp_path / "harness")
