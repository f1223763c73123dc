"""Fixtures for sandbox tests: a world-readable harness dir, a work dir, a helper to run python."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import structlog

from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.models import Limits, SandboxResult


@pytest.fixture(scope="session")
def bwrap() -> BwrapSandbox:
    sb = BwrapSandbox()
    sb.check()  # no skipping: a machine without bubblewrap fails here, loudly
    return sb


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    harness, work = tmp_path / "harness", tmp_path / "work"
    harness.mkdir(mode=0o755)
    work.mkdir()
    (harness / "lessons.md").write_text("be careful\n")
    harness.chmod(0o755)
    tmp_path.chmod(0o755)
    return harness, work


@pytest.fixture
def run_py(bwrap, dirs):
    harness, work = dirs

    def run(code: str, limits: Limits | None = None, env: dict[str, str] | None = None) -> SandboxResult:
        return bwrap.run([sys.executable, "-c", code], harness_dir=harness, workdir=work, env=env or {},
                         limits=limits or Limits(wall_seconds=20))

    return run


@pytest.fixture(autouse=True)
def _reset_logging():
    """A CLI test configures structlog to print to capsys's stderr; don't let it outlive the test."""
    yield
    structlog.reset_defaults()
