"""SWE-agent ``.traj`` files: auto-detected (also in a directory), the conversation from ``history`` (tool calls
and their results, demonstrations left out), scored by SWE-bench results (SWE-bench/experiments' layout) --
real runs written as SWE-agent saves them (tests/fixtures/traces/swe_agent/make_sample.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_paths
from evoharness.traces.models import Termination
from tests.modules import load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLE = FIXTURES / "traces" / "swe_agent" / "experiments"
V1 = FIXTURES / "data" / "mini_swe_agent_sample"
RUN, FAILED = "django__django-12708", "django__django-11477"


def _maker():
    return load_file(SAMPLE.parent / "make_sample.py", "swe_agent_sample")


def _run(style: str = "function_calling") -> dict:
    v1 = json.loads((V1 / "trajs" / RUN / f"{RUN}.traj.json").read_text())
    return _maker().to_swe_agent(v1, style)


def test_swe_agent_runs_import_from_a_directory_with_their_verdicts():
    path = SAMPLE / "trajs" / f"{RUN}.traj"
    assert detect_format(path) == "swe-agent"
    trajs = {t.task_id: t for t in load_paths([SAMPLE.parent])}  # report.json, results.json: no traces
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, FAILED: 0.0}
    t = trajs[RUN]
    raw = json.loads(path.read_text())
    assert t.id == f"swe-agent:{RUN}" and t.model == "google/gemini-3-pro-preview"
    assert t.termination == Termination.delivered and t.final_answer.startswith("diff --git")
    assert len(t.messages) == len(raw["history"]) and "source_index" not in t.meta  # step i is history[i]
    calls = t.tool_calls()
    assert len(calls) == len(raw["trajectory"]) and calls[-1].args == {"command": "submit"}
    assert [m["tool_call_id"] for m in t.messages if m["role"] == "tool"] == [c.id for c in calls]
    assert t.task.startswith("<pr_description>")


def test_experiments_results_json_alone_scores_and_never_guesses(tmp_path):
    out = tmp_path / "exp"
    shutil.copytree(SAMPLE, out)
    shutil.rmtree(out / "logs")
    results = json.loads((out / "results" / "results.json").read_text())
    results["generated"].remove(FAILED)
    results["with_logs"].remove(FAILED)
    results["applied"].remove(FAILED)  # listed nowhere now: no verdict
    (out / "results" / "results.json").write_text(json.dumps(results))
    trajs = {t.task_id: t for t in load_paths([out])}
    assert trajs[RUN].score == 1.0 and trajs[RUN].meta["report"].endswith("results.json")
    assert trajs[FAILED].score is None


def test_a_whole_experiments_submission_imports_its_runs_only(tmp_path):
    """A SWE-bench/experiments submission also holds all_preds.jsonl (its patches) and, beside results.json,
    results/resolved_by_repo.json and resolved_by_time.json: a directory import read them as traces and
    stopped (unrecognised record / format, exit 2)."""
    out = tmp_path / "20250101_swe-agent"
    shutil.copytree(SAMPLE, out)
    with (out / "all_preds.jsonl").open("w") as fh:
        for run in (RUN, FAILED):
            fh.write(json.dumps({"instance_id": run, "model_name_or_path": "swe-agent", "model_patch": "diff"}) + "\n")
    (out / "results" / "resolved_by_repo.json").write_text(json.dumps({"django/django": {"resolved": 1, "total": 2}}))
    (out / "results" / "resolved_by_time.json").write_text(json.dumps({"2019": {"resolved": 1, "total": 2}}))
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, FAILED: 0.0}
    # the same names elsewhere are still read as traces (a JSONL of trajectories named preds.jsonl is no sidecar)
    other = tmp_path / "elsewhere"
    (other / "results").mkdir(parents=True)
    (other / "results" / "resolved_by_repo.json").write_text("{}")
    with pytest.raises(InputError, match="resolved_by_repo.json"):
        list(load_paths([other]))


@pytest.mark.parametrize("cut", [0, 1, 5, 40, 150, -3])
def test_a_truncated_experiments_results_json_is_a_warning_never_a_trace(tmp_path, capsys, cut):
    """Was: read as a trace and stopped the import (``empty file`` / ``invalid JSON``, exit 2; with --skip-invalid a
    ``skipped:`` line). Now it is no trace: one warning names it, and runs it alone would score stay unscored."""
    from evoharness.cli import main

    out = tmp_path / "exp"
    shutil.copytree(SAMPLE, out)
    results = out / "results" / "results.json"
    results.write_bytes(results.read_bytes()[:cut])
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, FAILED: 0.0}  # logs/<id>/report.json still count
    assert all(t.meta["import_warnings"][0]["file"] == str(results) for t in trajs.values())
    shutil.rmtree(out / "logs")  # results.json was the only verdict
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: None, FAILED: None}
    capsys.readouterr()
    assert main(["import", str(out), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {results}: SWE-bench results ") and line.endswith("(2 trajectories)")


@pytest.mark.parametrize("empty", [{"resolved": []}, {"no_generation": [], "generated": [], "resolved": []}])
def test_an_experiments_results_json_that_lists_no_instance_is_a_warning(tmp_path, capsys, empty):
    """A results.json whose lists are all empty (an evaluation that judged nothing) gave its runs no verdict without
    a word; now it is named as a broken one is. One listing other instances but not the run stays silent."""
    from evoharness.cli import main

    out = tmp_path / "exp"
    shutil.copytree(SAMPLE, out)
    shutil.rmtree(out / "logs")
    results = out / "results" / "results.json"
    results.write_text(json.dumps(empty))
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: None, FAILED: None}
    assert all(t.meta["import_warnings"][0]["file"] == str(results) for t in trajs.values())
    capsys.readouterr()
    assert main(["import", str(out), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"warning: {results}: SWE-bench results list no instance (every id list is empty): "
                    "no verdicts from it (2 trajectories)")
    results.write_text(json.dumps({**empty, "no_generation": ["other__other-1"]}))
    assert all("import_warnings" not in t.meta and t.score is None for t in load_paths([out]))


def test_an_experiments_results_json_whose_resolved_list_is_past_its_first_64_kib_is_read(tmp_path):
    """A full-test submission (2,294 instances) lists generated / with_logs / applied before ``resolved``: the
    file was taken for a trace only by its first 64 KiB (``unrecognised format``, exit 2)."""
    out = tmp_path / "exp"
    shutil.copytree(SAMPLE, out)
    shutil.rmtree(out / "logs")
    many = [f"repo__repo-{i}" for i in range(2300)] + [FAILED, RUN]
    (out / "results" / "results.json").write_text(json.dumps(
        {"no_generation": [], "generated": many, "with_logs": many, "applied": many, "resolved": [RUN]}, indent=4))
    assert b'"resolved"' not in (out / "results" / "results.json").read_bytes()[:64 * 1024]
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, FAILED: 0.0}
    assert "import_warnings" not in trajs[RUN].meta


def test_a_results_json_of_another_tool_is_still_a_trace(tmp_path):
    """tau2-bench's results.json (first key ``timestamp``) in a results/ folder stays a trace."""
    tau2 = FIXTURES / "traces" / "tau2" / "results.json"
    (tmp_path / "results").mkdir()
    (tmp_path / "logs").mkdir()
    shutil.copy(tau2, tmp_path / "results" / "results.json")
    assert detect_format(tmp_path / "results" / "results.json") == "tau2"
    assert len(list(load_paths([tmp_path]))) == len(list(load_paths([tau2])))


def test_thought_action_replies_get_their_action_as_a_call(tmp_path):
    p = tmp_path / f"{RUN}.traj"
    p.write_text(json.dumps(_run("thought_action")))
    [t] = list(load_paths([p]))
    calls = t.tool_calls()
    assert len(calls) > 10 and all(c.name == "bash" for c in calls)
    results = [m for m in t.messages if m["role"] == "tool"]
    assert len(results) == len(calls) and results[0]["content"].startswith("OBSERVATION:")


def test_demonstrations_are_left_out_and_steps_map_to_history(tmp_path):
    data = _run()
    demo = [{"role": "user", "content": "demo task", "is_demo": True, "message_type": "demonstration"},
            {"role": "assistant", "content": "demo reply", "is_demo": True, "message_type": "demonstration"}]
    data["history"][1:1] = demo
    p = tmp_path / f"{RUN}.traj"
    p.write_text(json.dumps(data))
    [t] = list(load_paths([p]))
    assert "demo" not in json.dumps(t.messages)
    assert t.meta["source_index"][:3] == [0, 3, 4]
    assert t.messages[1]["content"] == data["history"][3]["content"][0]["text"]


def test_a_file_without_history_is_rebuilt_from_its_steps(tmp_path):
    data = _run()
    data["trajectory"][0]["query"] = data["history"][:2]
    del data["history"]
    p = tmp_path / f"{RUN}.traj"
    p.write_text(json.dumps(data))
    [t] = list(load_paths([p]))
    assert t.meta["source"] == "trajectory" and t.task.startswith("<pr_description>")
    assert len(t.tool_calls()) == len(data["trajectory"])
    assert [m["role"] for m in t.messages[:4]] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize(("status", "termination", "event"), [
    ("exit_cost", Termination.step_budget, "budget_exhausted"),
    ("exit_context", Termination.context_overflow, "context_overflow"),
    ("exit_format", Termination.error, "format_rejected"),
    ("exit_total_execution_time", Termination.timeout, "timeout"),
    ("submitted (exit_cost)", Termination.delivered, "budget_exhausted"),  # the patch left, after the budget ran out
    ("exit_api", Termination.error, "infra_error"),
    ("submitted", Termination.delivered, None),
])
def test_exit_statuses(tmp_path, status, termination, event):
    data = _run()
    data["info"]["exit_status"] = status
    p = tmp_path / "x.traj"
    p.write_text(json.dumps(data))
    [t] = list(load_paths([p]))
    assert t.termination == termination
    assert [e.type for e in t.events] == ([event] if event else [])


def test_a_bad_history_names_the_file(tmp_path):
    data = _run()
    data["history"][4] = {"content": "no role"}
    p = tmp_path / "bad.traj"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"bad\.traj.*history\[4\] has no string 'role'"):
        list(load_paths([p]))


@pytest.mark.parametrize("chosen", [True, False])
def test_a_retry_agent_file_is_read_from_the_chosen_attempt(tmp_path, chosen):
    """RetryAgent: {"attempts": [...]} and, once its loop chose, the best attempt merged at the top level."""
    good, other = _run(), _run()
    other["history"] = other["history"][:4]
    other["info"] = {**other["info"], "exit_status": "exit_cost", "submission": None}
    data = {"attempts": [good, other]}
    if chosen:
        data |= json.loads(json.dumps(good))
        data["info"]["best_attempt_idx"] = 0
    p = tmp_path / f"{RUN}.traj"
    p.write_text(json.dumps(data))
    assert detect_format(p) == "swe-agent"
    [t] = list(load_paths([p]))
    assert t.meta["attempts"] == 2
    if chosen:
        assert t.termination == Termination.delivered and len(t.messages) == len(good["history"])
    else:  # not chosen yet: the latest attempt
        assert t.termination == Termination.step_budget and len(t.messages) == 4


def test_an_older_history_without_message_types_pairs_observations(tmp_path):
    """SWE-agent 0.x history items carry role, content and agent only."""
    data = _run("thought_action")
    for m in data["history"]:
        for key in ("message_type", "thought", "tool_calls", "thinking_blocks"):
            m.pop(key, None)
        m["agent"] = "primary"
    p = tmp_path / f"{RUN}.traj"
    p.write_text(json.dumps(data))
    [t] = list(load_paths([p]))
    assert len([m for m in t.messages if m["role"] == "tool"]) == len(t.tool_calls()) == len(data["trajectory"])


@pytest.mark.parametrize("keep", [("info", "replay_config", "environment"), ("info",)])
def test_a_file_with_history_and_no_steps_is_imported(tmp_path, keep):
    """Was: a .traj holding ``history`` but no ``trajectory`` (a writer that saved only what the model saw) was
    "unrecognised format"."""
    data = _run()
    whole = list(load_paths([_write(tmp_path / "whole", data)]))
    del data["trajectory"]
    for key in ("info", "replay_config", "environment"):
        if key not in keep:
            data.pop(key, None)
    p = _write(tmp_path / "history", data)
    assert detect_format(p) == "swe-agent"
    [t] = list(load_paths([p]))
    assert t.messages == whole[0].messages and t.termination == whole[0].termination
    assert "source" not in t.meta  # read from history, as with steps


def _write(d: Path, data: dict) -> Path:
    d.mkdir()
    p = d / f"{RUN}.traj"
    p.write_text(json.dumps(data))
    return p


def test_a_run_batch_folder_with_its_moved_sb_cli_report_scores_its_runs(tmp_path):
    """``sweagent run-batch`` with evaluation on writes ``<out>/<id>/<id>.traj`` and ``preds.json``, then moves
    sb-cli's report to ``<out>/results.json`` (``SweBenchEvaluate.move_sb_cli_report``): an aggregate beside the
    run folders, not SWE-bench/experiments' ``results/results.json``. Each run gets its verdict from it."""
    out = tmp_path / "run-batch"
    for i in (RUN, FAILED):
        (out / i).mkdir(parents=True)
        shutil.copy(SAMPLE / "trajs" / f"{i}.traj", out / i / f"{i}.traj")
    (out / "preds.json").write_text(json.dumps({i: {"instance_id": i, "model_patch": "diff", "model_name_or_path": "m"}
                                                for i in (RUN, FAILED)}))
    (out / "results.json").write_text(json.dumps({  # sb-cli's report: counts and id lists
        "total_instances": 2, "submitted_instances": 2, "completed_instances": 2, "resolved_instances": 1,
        "unresolved_instances": 1, "empty_patch_instances": 0, "error_instances": 0, "completed_ids": [RUN, FAILED],
        "incomplete_ids": [], "empty_patch_ids": [], "submitted_ids": [RUN, FAILED], "resolved_ids": [RUN],
        "unresolved_ids": [FAILED], "error_ids": [], "schema_version": 2}, indent=4))
    trajs = {t.task_id: t for t in load_paths([out])}
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, FAILED: 0.0}
    assert all(t.meta["report"] == str(out / "results.json") for t in trajs.values())


def test_an_instance_id_that_is_no_name_gives_way_to_the_file_name(tmp_path):
    """A ``.traj`` whose ``instance_id`` is a boolean was instance "True": no verdict named it, so the resolved run
    was unscored; its file name is the id then (mini_swe.instance_id_of, as for mini-swe-agent)."""
    out = tmp_path / "exp"
    shutil.copytree(SAMPLE, out)
    f = out / "trajs" / f"{RUN}.traj"
    f.write_text(json.dumps({**json.loads(f.read_text()), "instance_id": True}))
    [t] = [t for t in load_paths([out]) if t.task_id != FAILED]
    assert (t.task_id, t.score) == (RUN, 1.0)
