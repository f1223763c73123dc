"""A new run's settings.json is whole or absent: a full disk at the run's start never leaves a cut one."""

from __future__ import annotations

import resource

import pytest

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.runner import load_run_settings, save_run_settings


def test_settings_the_disk_refuses_leave_no_cut_file(tmp_path):
    """A cut settings.json made the run id dead: `run --run-id` said the run exists, `run --resume` that its saved
    settings are no JSON. The file size limit (RLIMIT_FSIZE) fails the write as a full disk does."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")}})
    run_dir = tmp_path / "home" / "runs" / "run-x"
    assert len(settings.model_dump_json(indent=2)) > 2048
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))
    try:
        with pytest.raises(OSError):
            save_run_settings(run_dir, settings)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert list(run_dir.iterdir()) == []
    with pytest.raises(InputError, match="no such run"):
        load_run_settings(settings, "run-x")
