"""The service's record of its current run (service/daemon.json) on a disk that refuses the write (full, a file
size limit): one InfraError naming the file, the record kept as it was, no cut .tmp left, no run made. It was a bare
`OSError: [Errno ...]` with no file named, logged as a loop crash with its traceback (seen with the home on a full
tmpfs: POST /runs 202, then /health's last_error 'OSError: [Errno 28] No space left on device')."""

from __future__ import annotations

import json
import resource

import pytest

from evoharness.config import load_settings
from evoharness.errors import InfraError
from evoharness.graph.runner import runs_dir
from evoharness.service.daemon import Daemon
from evoharness.service.ingest import IngestStore
from tests.traces.test_traces_store_full_disk import file_size_limit  # noqa: F401 (a fixture)


def test_a_refused_write_of_daemon_json_names_it_and_keeps_the_record(tmp_path, file_size_limit):  # noqa: F811
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'harness'}",
                                    "run.env=synthetic", "run.model=scripted:weak", "sandbox.backend=inprocess",
                                    "roles.kind=playbook"], environ={})
    daemon = Daemon(settings, IngestStore(tmp_path / "ingest.sqlite3"), quiet=True)
    record = {"run_id": "run-old", "started_seq": 0, "history": ["run-old"] + [f"run-{i}" for i in range(5000)]}
    daemon.state_path.parent.mkdir(parents=True)
    daemon.state_path.write_text(json.dumps(record))
    daemon.ingest.last_seq()
    file_size_limit(40_000)  # the record (~60 KB) no longer fits
    try:
        with pytest.raises(InfraError) as e:
            daemon._begin("run-new")
    finally:
        file_size_limit(resource.RLIM_INFINITY)
    said = f"run run-new not started: cannot write {daemon.state_path}: File too large"
    assert str(e.value).startswith(said), e.value
    assert json.loads(daemon.state_path.read_text()) == record
    assert sorted(p.name for p in daemon.state_path.parent.iterdir()) == ["daemon.json"]  # no cut daemon.tmp
    assert not (runs_dir(settings) / "run-new").exists()
