"""Crash safety: SIGKILL the run at fault points covering every node and every kind of point, resume, compare.

Each scenario starts a fresh run of the CLI in a child process (forked from one that imported the CLI once)
that kills itself (SIGKILL) at the k-th fault point, then resumes it to the end. The result must equal an
uninterrupted run: the same final main tree, the same merges (none twice), no lost or duplicated trajectories,
the same ledger.

By default the kills are a deterministic subset (`_kill_points`): the first point of the run, every
node's last point in its first visit (all its side effects done, none checkpointed: the resume re-runs
it), every point in the middle of a node (some of its side effects done), and the last point of the
last round. Each ``<node>:start`` point skipped resumes from the same checkpoint as that node's last
point, with none of its side effects to redo. ``EVOHARNESS_FULL_CRASH=1`` kills at every point (33 at present).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import git
import pytest

from evoharness.graph.progress import Progress
from evoharness.graph.runner import resume_run, start_run

# 8 dev tasks, 4 rollouts each: still two rounds, a merge and a rejection, two candidates to verify in round 1
# (a kill between them) and every kind of fault point (test_reference_run_has_points_in_every_node checks it),
# at about half the cost of all 14 dev tasks at 8 rollouts. (6 dev tasks had two round-1 candidates until
# friction the weak model got past stopped being the failure; then round 1 had one.)
RUN = {"env": "synthetic", "model": "scripted:weak", "rollouts": 4, "max_rounds": 2, "budget": 4000,
       "dev_limit": 8, "heldout_limit": 4, "patience": 2}
NODES = {"collect", "diagnose", "enqueue", "analyst", "critic", "engineer", "verify", "merge", "reanchor", "finish"}


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
        "rejected_branches": sorted(r["branch"] for r in summary["rejected"]),
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


def _cli_child(argv: list[str], env: dict[str, str], cwd: str, log: str) -> None:
    """``python -m evoharness ARGV`` with ``env``, in a child forked from a process that has imported the CLI
    already (``cli_processes``); its stdout and stderr go to ``log``."""
    import evoharness

    sys.argv = [str(Path(evoharness.__file__).with_name("__main__.py")), *argv]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from evoharness.cli import entrypoint

    entrypoint()  # what evoharness/__main__.py runs: sys.exit(main()), main reading sys.argv


@pytest.fixture(scope="module")
def cli_processes():
    """Where each scenario's killed run is started: a fork of a server process that imported the CLI, the graph
    and this module once (multiprocessing's ``forkserver``: single-threaded, nothing run but the imports), instead
    of a fresh ``python -m evoharness`` paying its ~2.5 CPU-s of imports per scenario. The child is still a
    process of its own, started with the scenario's environment, that SIGKILLs itself at the fault point."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["evoharness.cli", "evoharness.graph.runner", __name__])
    return ctx


def _node(point: str) -> str:
    return point.split(":")[0]


def _kill_points(points: list[str], full: bool = False) -> list[int]:
    """1-based indices of the points to kill at: all of them if ``full``, else the subset in the docstring."""
    if full:
        return list(range(1, len(points) + 1))
    visits: list[list[int]] = []  # maximal runs of consecutive points in one node: one visit each
    for i, point in enumerate(points, start=1):
        if visits and _node(points[visits[-1][-1] - 1]) == _node(point):
            visits[-1].append(i)
        else:
            visits.append([i])
    chosen, seen = {1}, set()
    for visit in visits:
        node = _node(points[visit[0] - 1])
        if node not in seen:
            seen.add(node)
            chosen.add(visit[-1])  # all of the node's side effects done, not checkpointed
            chosen.update(visit[1:-1])  # some of them done
    chosen.add(visits[-2][-1])  # the last round's last node, just before finish
    return sorted(chosen)


def test_reference_run_has_points_in_every_node(reference):
    ref, points = reference
    assert {_node(p) for p in points} >= NODES
    assert ref["merges"] >= 1 and ref["rejected_branches"] and not ref["duplicates"]
    assert points[:points.index("merge:start")].count("verify:candidate") >= 2  # a kill between two candidates


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigkill_anywhere_then_resume_gives_the_same_result(reference, cli_processes, make_settings, tmp_path):
    ref, points = reference
    full = os.environ.get("EVOHARNESS_FULL_CRASH") == "1"
    kills = _kill_points(points, full)
    named = {points[k - 1] for k in kills}
    assert {_node(p) for p in named} == NODES
    assert {"collect:start", "collect:anchored", "verify:candidate", "finish:done"} <= named  # first, partial, last
    second_round = [i for i, p in enumerate(points, start=1) if p == "diagnose"][1]
    assert any(second_round <= k < points.index("finish:start") + 1 for k in kills)  # a kill in round 2
    assert full or len(kills) < len(points) // 2
    names = set()
    for n, k in enumerate(kills):
        settings = make_settings(**RUN).model_copy(update={"home": tmp_path / f"s{n}" / "state"})
        settings.run.harness = tmp_path / f"s{n}" / "harness"
        env = {**os.environ, "EVOHARNESS_FAULT_KILL_AT": str(k)}
        env.pop("EVOHARNESS_HOME", None)
        log = tmp_path / f"s{n}.log"
        proc = cli_processes.Process(target=_cli_child, args=([*_cli_args(settings), "run", "--run-id", "run-x"],
                                                              env, os.getcwd(), str(log)))
        proc.start()
        proc.join(300)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
        output = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        assert proc.exitcode == -signal.SIGKILL, (k, proc.exitcode, output)
        names.add(points[k - 1].split(":")[0])
        out = resume_run(settings, "run-x", progress=Progress(quiet=True))
        assert out.done, k
        got = _outcome(settings, "run-x")
        assert got == ref, (k, points[k - 1])
    assert len(names) >= 10
