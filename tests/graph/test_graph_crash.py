"""Crash safety: SIGKILL the run at 20+ points spread over every node, resume, compare.

Each scenario starts a fresh run in a subprocess that kills itself (SIGKILL) at the k-th fault
point, then resumes it to the end. The result must equal an uninterrupted run: the same final
main tree, the same merges (none twice), no lost or duplicated trajectories, the same ledger.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import git
import pytest

from evoharness.graph.progress import Progress
from evoharness.graph.runner import resume_run, start_run

RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 8, "max_rounds": 2, "budget": 4000,
       "dev_limit": 0, "heldout_limit": 4, "patience": 2}


def _settings(make_settings):
    return make_settings(**RUN)


def _cli_args(settings) -> list[str]:
    sets = [f"home={settings.home}", f"run.harness={settings.run.harness}", "sandbox.backend=inprocess",
            "roles.kind=playbook", "log_level=error"]
    sets += [f"run.{k}={json.dumps(v)}" for k, v in RUN.items()]
    out = []
    for s in sets:
        out += ["--set", s]
    return out


def _outcome(settings, run_id):
    run_dir = settings.home / "runs" / run_id
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    ids = [json.loads(x)["id"] for x in lines]
    repo = git.Repo(settings.run.harness)
    chain = list(repo.iter_commits("main", first_parent=True))
    return {
        "tree": repo.commit("main").tree.hexsha,
        "merges": len([c for c in chain if len(c.parents) == 2]),
        "merged_branches": [m["branch"] for m in summary["merged"]],
        "trajectories": len(ids),
        "duplicates": [i for i, n in Counter(ids).items() if n > 1],
        "spent": summary["budget"]["spent"],
        "rollouts_paid": summary["budget"]["rollouts"],
        "by_purpose": summary["budget"]["by_purpose"],
        "queued": summary["queued"],
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tests.graph.conftest import run_settings

    tmp = tmp_path_factory.mktemp("ref")
    settings = run_settings(tmp, **RUN)
    trace = tmp / "trace.txt"
    os.environ["EVOHARNESS_FAULT_TRACE"] = str(trace)
    try:
        out = start_run(settings, run_id="run-ref", progress=Progress(quiet=True))
    finally:
        del os.environ["EVOHARNESS_FAULT_TRACE"]
    assert out.done
    points = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    return _outcome(settings, "run-ref"), points


def _kill_points(points: list[str], want: int = 22) -> list[int]:
    """1-based indices: every distinct point name at least once, then evenly spread extras."""
    first = {}
    for i, name in enumerate(points, start=1):
        first.setdefault(name, i)
    chosen = set(first.values())
    extra = [i for i in range(1, len(points) + 1) if i not in chosen]
    need = max(0, want - len(chosen))
    if need and extra:
        stride = len(extra) / need
        chosen.update(extra[int(j * stride)] for j in range(min(need, len(extra))))
    return sorted(chosen)


def test_reference_run_has_points_in_every_node(reference):
    ref, points = reference
    nodes = {p.split(":")[0] for p in points}
    assert nodes >= {"collect", "diagnose", "enqueue", "analyst", "critic", "engineer", "verify", "merge",
                     "reanchor", "finish"}
    assert ref["merges"] >= 1 and not ref["duplicates"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigkill_anywhere_then_resume_gives_the_same_result(reference, make_settings, tmp_path):
    ref, points = reference
    kills = _kill_points(points)
    assert len(kills) >= 20
    names = set()
    for n, k in enumerate(kills):
        settings = make_settings(**RUN).model_copy(update={"home": tmp_path / f"s{n}" / "state"})
        settings.run.harness = tmp_path / f"s{n}" / "harness"
        env = {**os.environ, "EVOHARNESS_FAULT_KILL_AT": str(k)}
        env.pop("EVOHARNESS_HOME", None)
        proc = subprocess.run([sys.executable, "-m", "evoharness", *_cli_args(settings), "run",
                               "--run-id", "run-x"], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, (k, proc.returncode, proc.stderr[-2000:])
        names.add(points[k - 1].split(":")[0])
        out = resume_run(settings, "run-x", progress=Progress(quiet=True))
        assert out.done, k
        got = _outcome(settings, "run-x")
        assert got == ref, (k, points[k - 1])
    assert len(names) >= 10
