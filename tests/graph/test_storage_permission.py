"""A permission refused under the run's home is its storage failing; one refused elsewhere (a sandbox binary, a file
outside the home) pauses the run as what it is: it was 'cannot write /usr/bin/bwrap: Permission denied', a storage
fault, whatever the path."""

from __future__ import annotations

import errno
import os

import pytest

from evoharness.graph.storage import paused, storage_reason


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM])
def test_a_permission_refused_under_the_home_is_storage(tmp_path, code):
    e = OSError(code, os.strerror(code), str(tmp_path / "home" / "runs" / "r" / "trajectories.jsonl"))
    assert storage_reason(e, tmp_path / "home") == f"cannot access {e.filename}: {os.strerror(code)}"
    err = paused(e, "r", tmp_path / "home", None)
    assert str(err).startswith("run r paused: cannot access ") and err.retryable


@pytest.mark.parametrize("name", ["/usr/bin/bwrap", None, b"/etc/shadow"])
@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM])
def test_a_permission_refused_elsewhere_is_not_storage(tmp_path, name, code):
    e = OSError(code, os.strerror(code)) if name is None else OSError(code, os.strerror(code), name)
    assert storage_reason(e, tmp_path / "home") is None
    err = paused(e, "r", tmp_path / "home", None)
    text = str(err)
    assert text.startswith("run r paused: permission denied: ") and "cannot write" not in text
    assert "not the run's storage" in text and text.endswith("`evoharness run --resume r`") and not err.retryable


def test_a_path_that_leaves_the_home_by_dot_dot_is_elsewhere(tmp_path):
    e = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "home" / ".." / "other"))
    assert storage_reason(e, tmp_path / "home") is None


def test_a_full_disk_is_storage_wherever_it_is(tmp_path):
    e = OSError(errno.ENOSPC, "No space left on device", "/var/tmp/x")
    assert storage_reason(e, tmp_path / "home") == "cannot write /var/tmp/x: No space left on device"
