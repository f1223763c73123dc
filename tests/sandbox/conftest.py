"""Fixtures for sandbox tests: a world-readable harness dir, a work dir, a helper to run python."""

from __future__ import annotations

import sys
from pathlib import Path

import git
import pytest
import structlog

from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.models import Limits, SandboxResult

# Two children, each under a 160 MiB sandbox's per-process limit, together over its memory: the kernel OOM-kills one
# (a -9 among the codes printed). Then ``+ EXIT_ON_A_KILL`` to end there, or ``+ HANG`` to wait past the wall limit.
TWO_CHILDREN_OVER_THE_MEMORY = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', "
    "'import time; b = b\"x\" * (100 * 2**20); time.sleep(1.5)']) for _ in range(2)]\n"
    "codes = [k.wait() for k in kids]\nprint(codes, flush=True)\n")
EXIT_ON_A_KILL, HANG = "sys.exit(1 if any(codes) else 0)\n", "time.sleep(600)\n"


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


@pytest.fixture
def commit_middleware():
    """``commit(repo, name, text) -> sha``: ``text`` written as the harness repo's ``middleware/<name>`` and committed
    on its checked-out branch (the commit's message is ``name``)."""

    def commit(repo, name: str, text: str) -> str:
        (repo.path / "middleware" / name).write_text(text)
        g = git.Repo(repo.path)
        g.git.add("-A")
        g.git.commit("-qm", name, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                       "GIT_COMMITTER_EMAIL": "t@t"})
        return g.head.commit.hexsha

    return commit


@pytest.fixture
def second_of_four(tmp_path, commit_middleware):
    """``make(name, code) -> (repo, tasks, requests)``: a harness repo under ``tmp_path`` whose ``middleware/<name>``
    runs ``code`` (indented under an ``if``, 8 spaces; ``os`` imported) at the first step of the second of the
    synthetic env's first four dev tasks, and one request (seed 0) for each of the four at that commit."""
    from evoharness.envs import get_environment
    from evoharness.harness_repo.init import init_harness
    from evoharness.sandbox.api import RolloutRequest

    def make(name: str, code: str):
        tasks = get_environment("synthetic").list_tasks("dev")[:4]
        middleware = (f"import os\ndef before_model(messages, ctx):\n    if ctx.get('step', 0) == 0 and "
                      f"{tasks[1].prompt!r} in str(messages):\n        {code}\n    return None\n")
        repo = init_harness(tmp_path / "h")
        sha = commit_middleware(repo, name, middleware)
        return repo, tasks, [RolloutRequest(task_id=t.id, harness_commit=sha, seed=0, rollout=0) for t in tasks]

    return make


@pytest.fixture(autouse=True)
def _reset_logging():
    """A CLI test configures structlog to print to capsys's stderr; don't let it outlive the test."""
    yield
    structlog.reset_defaults()
