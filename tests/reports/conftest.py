"""Fixtures: real short runs (synthetic env, scripted weak model, in-process agent, playbook roles)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import structlog

from evoharness.config import Settings
from evoharness.graph.progress import Progress
from evoharness.graph.runner import start_run


def run_settings(root: Path, **run) -> Settings:
    """One round, k=8 on 8 dev and 3 held-out tasks: the playbook's fix passes the gates and is merged (~3 s)."""
    base = {"harness": root / "harness", "env": "synthetic", "model": "scripted:weak", "rollouts": 8,
            "dev_limit": 8, "heldout_limit": 3, "max_rounds": 1, "budget": 3000, "checkpointer": "sqlite"}
    base.update(run)
    return Settings.model_validate({
        "home": root / "state", "log_format": "json", "log_level": "error",
        "run": base, "sandbox": {"backend": "inprocess", "workers": 1}, "roles": {"kind": "playbook"},
    })


def finished_run(root: Path, **run):
    """A finished run laid out like `evoharness demo --out root`: root/summary.json, root/state/runs/<id>."""
    settings = run_settings(root, **run)
    outcome = start_run(settings, progress=Progress(quiet=True))
    assert outcome.done, outcome.state.get("status")
    shutil.copy(outcome.run_dir / "summary.json", root / "summary.json")
    structlog.reset_defaults()
    return settings, outcome


@pytest.fixture(scope="session")
def done_run(tmp_path_factory):
    """Shared by the tests that only read it (they write their outputs elsewhere)."""
    return finished_run(tmp_path_factory.mktemp("done-run"))


@pytest.fixture
def own_run(done_run, tmp_path):
    """A private copy of the finished run (harness repo, state, summary) for tests that write into it."""
    settings, outcome = done_run
    src, dst = settings.run.harness.parent, tmp_path / "run"
    shutil.copytree(src, dst)
    run_dir = dst / "state" / "runs" / outcome.run_id
    for path in (dst / "summary.json", run_dir / "summary.json", run_dir / "settings.json"):
        path.write_text(path.read_text().replace(str(src), str(dst)))
    return dst, run_dir


def cli(*args: str) -> int:
    from evoharness.cli import main

    return main(list(args))
