"""Traces from outside the run (production) as analyst evidence: `run.evidence` / `evoharness run --evidence`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.diagnosis.labeller import Labeller
from evoharness.envs import get_environment
from evoharness.graph.evidence import EVIDENCE_FILE, balanced, read_evidence, write_evidence
from evoharness.graph.progress import Progress
from evoharness.graph.runner import resume_run, start_run
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.traces.models import Trajectory

QUIET = Progress(quiet=True)
SMALL = {"rollouts": 2, "max_rounds": 1, "dev_limit": 8, "heldout_limit": 2}


def looping(tid: str, task: str, split: str = "unknown") -> dict:
    """A production trace: the same tool call four times, never delivered (F3.repeated_action)."""
    msgs = [{"role": "system", "content": "You are the agent."},
            {"role": "user", "content": f"Look up the status of order 42 ({task})."}]
    for i in range(4):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "get_order", "arguments": "{\"id\": 42}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "get_order", "content": "order 42: shipped"})
    return {"id": tid, "task_id": task, "split": split, "model": "prod-model", "messages": msgs,
            "final_answer": None, "score": 0.0, "termination": "step_budget", "usage": {"steps": 4}}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def loop_candidate(settings):
    repo = HarnessRepo(settings.run.harness)
    found = [repo.candidate(b) for b in repo.branches() if b.startswith("candidate/")]
    found = [c for c in found if c.targets == "F3.repeated_action"]
    assert len(found) == 1, found
    return found[0]


def cited(candidate) -> set[str]:
    """Trajectory ids in the commit's `Evidence:` trailer (``id@step``)."""
    return {e.rsplit("@", 1)[0] for e in candidate.evidence}


def test_production_f3_failures_are_cited_as_evidence_and_verification_stays_on_env_tasks(make_settings, tmp_path):
    prod = write_jsonl(tmp_path / "prod.jsonl", [looping(f"prod-{i}", f"prod-task-{i}") for i in range(5)])
    settings = make_settings(**SMALL, evidence=[prod])
    out = start_run(settings, progress=QUIET)
    assert out.done
    snapshot = read_evidence(out.run_dir)
    assert [t.id for t in snapshot] == [f"prod-{i}" for i in range(5)]
    cand = loop_candidate(settings)
    ids = cited(cand)
    assert ids & {f"prod-{i}" for i in range(5)}, cand.evidence  # production trajectories are cited...
    assert any(i.split("/")[1] == "dev" for i in ids if "/" in i), cand.evidence  # ...beside the anchor's
    dev = {t.id for t in get_environment("synthetic").list_tasks("dev")}
    assert cand.predicted_flips and set(cand.predicted_flips) <= dev  # flips only on tasks that are rolled out
    rolled = [json.loads(x)["task_id"] for x in (out.run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert rolled and not any(t.startswith("prod-") for t in rolled)  # production tasks are never rolled out
    verdict = HarnessRepo(settings.run.harness).verdict_of(cand.commit)[1]
    assert verdict.measurements["targeted_tasks"] > 0


def test_without_evidence_only_the_anchor_is_cited(make_settings):
    settings = make_settings(**SMALL)
    out = start_run(settings, progress=QUIET)
    assert read_evidence(out.run_dir) == [] and (out.run_dir / EVIDENCE_FILE).exists()
    assert all("/dev/" in i for i in cited(loop_candidate(settings)))


def test_held_out_production_traces_are_not_evidence(make_settings, tmp_path):
    heldout_task = next(t.id for t in get_environment("synthetic").list_tasks("heldout"))
    records = [looping(f"held-{i}", f"prod-task-{i}", split="heldout") for i in range(3)]
    records += [looping(f"heldtask-{i}", heldout_task) for i in range(3)]
    settings = make_settings(**SMALL, evidence=[write_jsonl(tmp_path / "prod.jsonl", records)])
    start_run(settings, progress=QUIET)
    assert all("/dev/" in i for i in cited(loop_candidate(settings)))




@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
def checkpointer(request):
    return "sqlite" if request.param == "sqlite" else request.getfixturevalue("pg_checkpointer")


def test_a_resumed_run_reads_the_snapshot_taken_when_it_started(make_settings, tmp_path, checkpointer):
    """Killed (SIGKILL) after the seed anchor, before the analyst; the evidence file then changes; the
    resumed run still cites the trajectories it was started with (SQLite and Postgres checkpointers)."""
    prod = write_jsonl(tmp_path / "prod.jsonl", [looping(f"prod-{i}", f"prod-task-{i}") for i in range(4)])
    settings = make_settings(**SMALL, checkpointer=checkpointer)
    trace = tmp_path / "faults.txt"
    args = ["--set", f"home={settings.home}", "--set", f"run.harness={settings.run.harness}",
            "--set", "sandbox.backend=inprocess", "--set", "roles.kind=playbook", "--set", "log_level=error",
            "--set", f"run.checkpointer={checkpointer}"]
    args += [a for k, v in SMALL.items() for a in ("--set", f"run.{k}={v}")]
    env = {**os.environ, "EVOHARNESS_FAULT_KILL_AT": "3", "EVOHARNESS_FAULT_TRACE": str(trace)}
    proc = subprocess.run([sys.executable, "-m", "evoharness", *args, "run", "--run-id", "run-ev", "--evidence",
                           str(prod)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert trace.read_text().splitlines()[-1] == "3 collect:done"
    run_dir = settings.home / "runs" / "run-ev"
    assert (settings.home / "runs" / "checkpoints.sqlite").exists() == (checkpointer == "sqlite")
    assert [t.id for t in read_evidence(run_dir)] == [f"prod-{i}" for i in range(4)]
    write_jsonl(prod, [looping(f"other-{i}", f"prod-task-{i}") for i in range(4)])  # the source moves on
    out = resume_run(settings, "run-ev", progress=QUIET)
    assert out.done
    ids = cited(loop_candidate(settings))
    assert ids & {f"prod-{i}" for i in range(4)} and not any(i.startswith("other-") for i in ids)
    assert [t.id for t in read_evidence(run_dir)] == [f"prod-{i}" for i in range(4)]


def test_bad_evidence_is_one_error_line_and_no_run(tmp_path, capsys):
    home = tmp_path / "state"
    sets = ["--set", f"home={home}", "--set", f"run.harness={tmp_path / 'harness'}",
            "--set", "sandbox.backend=inprocess"]
    assert main([*sets, "run", "--run-id", "run-x", "--evidence", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "missing.jsonl: no such file or directory" in err and "\n" not in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(looping("p-1", "t")) + "\n{not json\n")
    assert main([*sets, "run", "--run-id", "run-x", "--evidence", str(broken)]) == 2
    assert "broken.jsonl:line 2" in capsys.readouterr().err
    assert not (home / "runs" / "run-x").exists()
    assert main([*sets, "run", "--resume", "run-x", "--evidence", str(broken)]) == 2
    assert capsys.readouterr().err.startswith("error: --evidence: a run's evidence is fixed when it starts")


def test_evidence_that_holds_no_trajectory_is_one_error_line_and_no_run(tmp_path, capsys):
    """`run --evidence EMPTY_DIR` started a run with no evidence, silently (a wrong path, most likely)."""
    home = tmp_path / "state"
    sets = ["--set", f"home={home}", "--set", f"run.harness={tmp_path / 'harness'}",
            "--set", "sandbox.backend=inprocess"]
    good = write_jsonl(tmp_path / "prod.jsonl", [looping("p-1", "t")])
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("no traces here")
    for bad in ("empty", "notes"):
        assert main([*sets, "run", "--run-id", "run-x", "--evidence", str(good),
                     "--evidence", str(tmp_path / bad)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"error: {tmp_path / bad}: no trajectories found (an evidence path must hold trace files)"]
    assert not (home / "runs" / "run-x").exists()


def test_snapshot_is_written_once(tmp_path):
    first = [Trajectory.model_validate(looping("a", "t")), Trajectory.model_validate(looping("a", "t2"))]
    assert write_evidence(tmp_path, first) == 1  # the first copy of an id wins
    assert write_evidence(tmp_path, [Trajectory.model_validate(looping("b", "t"))]) == 1
    assert [(t.id, t.task_id) for t in read_evidence(tmp_path)] == [("a", "t")]
    assert not [p for p in tmp_path.iterdir() if p.name != EVIDENCE_FILE]  # no temporary file left


def test_balanced_alternates_sources_within_each_signal():
    labeller = Labeller()
    loops = [Trajectory.model_validate(looping(f"a{i}", "t")) for i in range(3)]
    prod = [Trajectory.model_validate(looping(f"p{i}", "t")) for i in range(2)]
    order = [t.id for t in balanced([loops, prod], lambda ts: [labeller.label(t) for t in ts])]
    assert order == ["a0", "p0", "a1", "p1", "a2"]
