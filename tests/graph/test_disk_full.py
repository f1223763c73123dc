"""A run whose disk fills up (here: the file size limit, RLIMIT_FSIZE, which fails writes as a full disk does,
without root) stops with one `error: run ... paused: ...` line, exit 2, and resumes, once there is room, to the
same end as a run never stopped. Before: a traceback (sqlite3.OperationalError 'database or disk is full' out of
the rollout cache, or an OSError out of a trajectory write), exit 1."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections import Counter

import git

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 4, "max_rounds": 2, "budget": 4000,
       "dev_limit": 8, "heldout_limit": 4, "patience": 2}


def _cmd(root, *args: str) -> list[str]:
    sets = [f"home={root / 'state'}", f"run.harness={root / 'harness'}", "sandbox.backend=inprocess",
            "roles.kind=playbook", "log_level=error", *(f"run.{k}={json.dumps(v)}" for k, v in RUN.items())]
    return [sys.executable, "-m", "evoharness", *(x for s in sets for x in ("--set", s)), *args]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}


def _small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def _outcome(root) -> dict:
    run_dir = root / "state" / "runs" / "run-x"
    summary = json.loads((run_dir / "summary.json").read_text())
    ids = [json.loads(x)["id"] for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    repo = git.Repo(root / "harness")
    return {"tree": repo.commit("main").tree.hexsha, "merged": [m["branch"] for m in summary["merged"]],
            "rejected": sorted(r["branch"] for r in summary["rejected"]), "trajectories": len(ids),
            "duplicates": [i for i, n in Counter(ids).items() if n > 1], "spent": summary["budget"]["spent"],
            "queued": summary["queued"]}


def test_a_full_disk_pauses_the_run_with_one_line_and_it_resumes_to_the_same_end(tmp_path):
    full, ref = tmp_path / "full", tmp_path / "ref"
    proc = subprocess.run(_cmd(full, "run", "--run-id", "run-x"), env=_env(), capture_output=True, text=True,
                          timeout=300, preexec_fn=_small_files)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("[")]  # progress lines start '[ '
    assert len(errors) == 1 and errors[0].startswith("error: run run-x paused: "), proc.stderr[-3000:]
    assert "run --resume run-x" in errors[0]
    resumed = subprocess.run(_cmd(full, "run", "--resume", "run-x"), env=_env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    never_stopped = subprocess.run(_cmd(ref, "run", "--run-id", "run-x"), env=_env(), capture_output=True,
                                   text=True, timeout=600)
    assert never_stopped.returncode == 0, never_stopped.stderr[-3000:]
    assert _outcome(full) == _outcome(ref)
