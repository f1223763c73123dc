"""The labeller against this project's dev labels of failed mini-swe-agent SWE-bench runs (benchmarks/data: an
LLM helper's, not human labels), beside the trivial labellers, and the pieces that score it.

Both halves are scored per figure; rules are tuned on ``tune`` only (the ``test`` half was scored once, when the
rules were fixed: while changing rules, deselect it with ``-k "not swe-mini-dev/test"``). Reads the public data
folder beside the repository; skipped with the reason when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import (
    FIGURES,
    SWE_DEV_RUNS,
    Prediction,
    baselines_for,
    first_failed_command,
    first_write,
    prediction_of,
    read_swe_dev_labels,
    score_set,
    swe_dev_records,
)
from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory
from tests.diagnosis.above_baselines import assert_strictly_above_baselines

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / ".." / "shared" / "data"
LABELS = REPO / "benchmarks" / "data" / "swe_mini_dev_labels.json"
# not yet above every baseline (n=5 a half; the test half was scored once, at the end: docs/diagnosis.md)
NOT_YET = {
    ("swe-mini-dev/tune", "class"): "5/5 vs all F4 5/5: every tune label crosswalks to F4 and the rules say F4",
    ("swe-mini-dev/test", "class"): "4/5 vs all F4 4/5: a labelled misread reproduction (F1) is called F4",
}


@pytest.fixture(scope="module")
def sets():
    if not (DATA / SWE_DEV_RUNS).is_dir():
        pytest.skip(f"{DATA / SWE_DEV_RUNS} not found (CI lays shared/ beside the clone)")
    return swe_dev_records(read_swe_dev_labels(LABELS), load_paths([DATA / SWE_DEV_RUNS]))


@pytest.fixture(scope="module")
def scores(sets):
    labeller = Labeller()

    def ours(t) -> Prediction:
        return prediction_of(t, labeller.label(t))

    return {name: score_set(name, recs, {"evoharness": ours, **baselines_for(name)}) for name, recs in sets.items()}


def test_the_sample_is_every_failed_run_and_its_halves_are_the_labels_halves(sets):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from swe_dev_sample import failed_runs, sample
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    drawn = {r["instance_id"]: r["half"] for r in sample(failed_runs(DATA / SWE_DEV_RUNS))}
    labels = read_swe_dev_labels(LABELS)
    assert drawn == {k: r["half"] for k, r in labels.items()}
    assert {k: len(v) for k, v in sets.items()} == {"swe-mini-dev/test": 5, "swe-mini-dev/tune": 5}


def _cases():
    for name in ("swe-mini-dev/tune", "swe-mini-dev/test"):
        for fig in FIGURES:
            marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[(name, fig)])] if (name, fig) in NOT_YET else []
            yield pytest.param(name, fig, marks=marks, id=f"{name}-{fig}")


@pytest.mark.parametrize("name, figure", list(_cases()))
def test_the_labeller_is_strictly_above_every_trivial_baseline(scores, name, figure):
    assert_strictly_above_baselines(scores[name], figure)


def _run(task: str, score: float, n: int = 4) -> Trajectory:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "fix it"}]
    msgs += [{"role": "assistant", "content": f"step {i}"} for i in range(n)]
    return Trajectory(id=f"mini-swe-agent:{task}", task_id=task, messages=msgs, score=score)


def _file(tmp_path: Path, rows) -> Path:
    p = tmp_path / "swe.json"
    p.write_text(json.dumps({"about": "dev labels, not human labels", "labels": rows}))
    return p


_GOOD = {"instance_id": "a__a-1", "half": "tune", "step": 3, "category": "Intent-Plan Misalignment",
         "party": "agent", "quote": "q", "reason": "r", "confidence": "low"}


def test_labels_join_unresolved_runs_by_instance_id_and_leave_out_a_resolved_run_and_a_step_past_the_end(tmp_path):
    labels = read_swe_dev_labels(_file(tmp_path, [
        _GOOD,
        {**_GOOD, "instance_id": "b__b-2", "half": "test", "category": "Misinterpretation of Tool Output"},
        {**_GOOD, "instance_id": "c__c-3"},  # resolved in its own report: not a failure
        {**_GOOD, "instance_id": "d__d-4", "step": 40}]))  # past the run's end
    got = swe_dev_records(labels, [_run("a__a-1", 0.0), _run("b__b-2", 0.0), _run("c__c-3", 1.0),
                                   _run("d__d-4", 0.0), _run("e__e-5", 0.0)])
    assert {k: [(t.task_id, h.step, h.agent, h.failure_class) for t, h in v] for k, v in got.items()} == {
        "swe-mini-dev/test": [("b__b-2", 3, None, "F1")], "swe-mini-dev/tune": [("a__a-1", 3, None, "F4")]}


@pytest.mark.parametrize("rows", [None, [{"instance_id": "x"}], [{**_GOOD, "half": "test2"}],
                                  [{**_GOOD, "category": "x"}], [{**_GOOD, "step": True}],
                                  [{**_GOOD, "instance_id": 7}]])
def test_a_file_that_is_no_swe_label_file_is_an_input_error(tmp_path, rows):
    p = _file(tmp_path, rows) if rows is not None else tmp_path / "missing.json"
    with pytest.raises(InputError, match="not a SWE dev-label file"):
        read_swe_dev_labels(p)


def _bash(step: int, command: str) -> dict:
    return {"role": "assistant", "content": f"THOUGHT: {step}",
            "tool_calls": [{"id": f"c{step}", "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def _out(step: int, rc: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{step}", "name": "bash",
            "content": f"<returncode>{rc}</returncode>\n<output>\n{text}\n</output>"}


def test_first_failed_command_is_the_call_whose_result_shows_a_non_zero_exit_or_a_traceback():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "fix the error in x.py"},
            _bash(2, "grep -n error x.py"), _out(2, 0, "3: raise Error"),  # 'error' in a clean result: no failure
            _bash(4, "python repro.py"), _out(4, 0, "Traceback (most recent call last):\n  ValueError"),
            _bash(6, "pytest"), _out(6, 1, "1 failed")]
    t = Trajectory(id="r", task_id="r", messages=msgs)
    assert first_failed_command(t).step == 4
    msgs[5] = _out(4, 0, "ok")
    assert first_failed_command(Trajectory(id="r", task_id="r", messages=msgs)).step == 6
    msgs[7] = _out(6, 0, "passed")
    assert first_failed_command(Trajectory(id="r", task_id="r", messages=msgs)).step == 7  # none failed: the last


def test_first_write_is_the_first_command_that_changes_a_file():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "fix"},
            _bash(2, "cat x.py"), _out(2, 0, "..."), _bash(4, "cat <<'EOF' > repro.py\nprint(1)\nEOF"),
            _out(4, 0, ""), _bash(6, "sed -i 's/a/b/' x.py"), _out(6, 0, "")]
    assert first_write(Trajectory(id="r", task_id="r", messages=msgs)).step == 4


def test_a_bad_swe_label_file_is_one_error_line_and_exit_2(tmp_path):
    if not (DATA / SWE_DEV_RUNS).is_dir():
        pytest.skip(f"{DATA / SWE_DEV_RUNS} not found (CI lays shared/ beside the clone)")
    bad = _file(tmp_path, [{**_GOOD, "half": "dev"}])
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "label_accuracy.py"), "--swe-dev-labels", str(bad),
                        "--dev-labels", "", "--only", "swe-mini-dev/tune"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})  # this checkout's code, from a worktree too
    assert p.returncode == 2
    assert p.stderr.startswith("error: ") and "not a SWE dev-label file" in p.stderr
    assert "Traceback" not in p.stderr


def test_the_sample_reads_both_report_layouts_and_a_bad_report_is_one_error_line(tmp_path):
    for inst, rep in (("a__a-1", {"resolved": False}), ("b__b-2", {"b__b-2": {"resolved": False}}),
                      ("c__c-3", {"resolved": True})):
        (tmp_path / "logs" / inst).mkdir(parents=True)
        (tmp_path / "logs" / inst / "report.json").write_text(json.dumps(rep))
        (tmp_path / "trajs" / inst).mkdir(parents=True)
    script = str(REPO / "benchmarks" / "swe_dev_sample.py")
    p = subprocess.run([sys.executable, script, "--data", str(tmp_path)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0
    assert sorted(json.loads(line)["instance_id"] for line in p.stdout.splitlines()) == ["a__a-1", "b__b-2"]
    (tmp_path / "logs" / "a__a-1" / "report.json").write_text("{cut")
    p = subprocess.run([sys.executable, script, "--data", str(tmp_path)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 2 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    assert "a__a-1/report.json" in p.stderr
