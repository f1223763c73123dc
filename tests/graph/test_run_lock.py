"""One driver per run: a second `run --resume` (or `run --run-id` of the same id) while another process drives
the run is refused with one error line, exit 2. Two drivers each ran the run's rounds: the resumed run's
trajectories were written twice (622 duplicated ids of 1,704 lines) and its candidates were made twice
(``candidate/...-2`` branches beside the first ones)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import git

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 8, "max_rounds": 3, "budget": 6000,
       "dev_limit": 14, "heldout_limit": 4, "patience": 3}


def _cmd(tmp_path, *args: str) -> list[str]:
    sets = [f"home={tmp_path / 'state'}", f"run.harness={tmp_path / 'harness'}", "sandbox.backend=inprocess",
            "roles.kind=playbook", "log_level=error", *(f"run.{k}={json.dumps(v)}" for k, v in RUN.items())]
    return [sys.executable, "-m", "evoharness", *(x for s in sets for x in ("--set", s)), *args]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}


def _wait_for_progress(proc: subprocess.Popen, path) -> None:
    deadline = time.monotonic() + 120
    while not (path.is_file() and path.stat().st_size > 0):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first driver made no progress in 120 s"
        time.sleep(0.05)


def test_a_second_driver_of_a_running_run_is_refused_and_the_run_ends_once(tmp_path):
    run_dir = tmp_path / "state" / "runs" / "run-x"
    first = subprocess.Popen(_cmd(tmp_path, "run", "--run-id", "run-x"), env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_progress(first, run_dir / "trajectories.jsonl")
        # held still (SIGSTOP) while the others try: a live driver mid-run, whatever the machine's speed. Unheld, a
        # first driver whose rounds got faster (f185ff2: in-process rollouts prepare their template once) ended
        # before the two later processes had imported the CLI, and the test failed at load ~4
        os.kill(first.pid, signal.SIGSTOP)
        try:
            second = subprocess.run(_cmd(tmp_path, "run", "--resume", "run-x"), env=_env(), capture_output=True,
                                    text=True, timeout=300)
            again = subprocess.run(_cmd(tmp_path, "run", "--run-id", "run-x"), env=_env(), capture_output=True,
                                   text=True, timeout=300)
            still_running = first.poll() is None
        finally:
            os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    for proc in (second, again):
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert "another process" in second.stderr and f"pid {first.pid}" in second.stderr, second.stderr
    assert still_running, "the first driver ended before the others were refused"
    assert first.returncode == 0, err[-2000:]
    ids = [json.loads(line)["id"] for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    summary = json.loads((run_dir / "summary.json").read_text())
    repo = git.Repo(tmp_path / "harness")
    made = sorted(b.name for b in repo.branches if b.name.startswith("candidate/"))
    decided = sorted([m["branch"] for m in summary["merged"]] + [r["branch"] for r in summary["rejected"]])
    assert made == decided  # every candidate made once: no '-2' twin of a branch the other driver made
    merges = [c for c in repo.iter_commits("main", first_parent=True) if len(c.parents) == 2]
    assert len(merges) == len(summary["merged"])


def test_after_the_driver_is_killed_the_run_resumes(tmp_path):
    """The lock dies with its process: a SIGKILLed driver never leaves the run locked."""
    env = {**_env(), "EVOHARNESS_FAULT_KILL_AT": "3"}
    killed = subprocess.run(_cmd(tmp_path, "run", "--run-id", "run-x"), env=env, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = subprocess.run(_cmd(tmp_path, "run", "--resume", "run-x"), env=_env(), capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (tmp_path / "state" / "runs" / "run-x" / "summary.json").is_file()
