"""OpenHands' own evaluation output (``output.jsonl`` of its SWE-bench ``run_infer.py``) is read as the agent ran:
actions as tool calls, observations as their results, ``test_result.git_patch`` as the delivered patch, SWE-bench's
verdict from the evaluation files beside it. Issue 13's held-back checks on the runs of tests/fixtures/traces/openhands
(hand-written in OpenHands' event serialisation: make_sample.py there). Before, the file was "unrecognised JSONL
record"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_file, load_paths

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "openhands"
OUTPUT = SAMPLE / "output.jsonl"


def _runs(path: Path = OUTPUT) -> dict:
    return {t.task_id: t for t in load_file(path)}


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "run_1"
    shutil.copytree(SAMPLE, d)
    return d


def _records() -> list[dict]:
    return [json.loads(line) for line in OUTPUT.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _calls(t) -> list[tuple[str, str]]:
    return [(c.name, c.args.get("command") if isinstance(c.args, dict) else None) for c in t.tool_calls()]


def test_output_jsonl_is_detected_and_read_as_the_agent_ran():
    assert detect_format(OUTPUT) == "openhands"
    runs = _runs()
    assert [(t.id, t.score, t.termination.value) for t in runs.values()] == [
        ("openhands:pkg__pkg-101", 1.0, "delivered"), ("openhands:pkg__pkg-102", 0.0, "delivered"),
        ("openhands:pkg__pkg-103", None, "step_budget")]
    ok = runs["pkg__pkg-101"]
    assert ok.model == "litellm_proxy/claude-3-7-sonnet-20250219" and ok.task.startswith("<uploaded_files>")
    assert [m["role"] for m in ok.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool",
                                                "assistant"]
    # the edit and the check the model asked for in one response are one turn, each answered by its result
    assert [c["function"]["name"] for c in ok.messages[4]["tool_calls"]] == ["str_replace_editor", "execute_bash"]
    assert [m["tool_call_id"] for m in ok.messages[5:7]] == [c["id"] for c in ok.messages[4]["tool_calls"]]
    assert ok.messages[6]["content"] == "None\n[The command completed with exit code 0.]"
    assert _calls(ok)[-1] == ("finish", None)
    # the patch SWE-bench graded is the delivered answer the coding rules read
    assert ok.final_answer == _records()[0]["test_result"]["git_patch"]
    # recall events are bookkeeping: left out, and each step still names its event
    history = _records()[0]["history"]
    assert ok.meta["skipped_events"] == 2
    assert all(history[k].get("action", history[k].get("observation")) != "recall" for k in ok.meta["source_index"])
    assert ok.usage.steps == 3


def test_a_resolved_run_stays_healthy():
    label = Labeller().label(_runs()["pkg__pkg-101"])
    assert label.failure_class == "healthy"


def test_an_edit_then_rerun_cycle_is_no_loop():
    t = _runs()["pkg__pkg-102"]
    runs = [c for c in t.tool_calls() if c.name == "execute_bash"]
    assert len({c.canonical for c in runs}) == 1 and len(runs) == 3  # the same script, run after each edit
    assert not [s for s in Labeller().label(t).signals if s.failure_class == "F3"]


def test_an_editor_refusal_fixed_the_next_turn_is_no_friction():
    t = _runs()["pkg__pkg-102"]
    (refusal,) = [e for e in t.events if e.type == "tool_error"]
    assert "No replacement was performed" in t.messages[refusal.step]["content"]
    assert t.messages[refusal.step + 2]["content"].startswith("The file")  # the next edit went through
    assert not [s for s in Labeller().label(t).signals if s.failure_class == "F2"]


def test_an_editor_refusal_quoting_a_timeout_is_the_tool_refusing_not_the_infrastructure(tmp_path):
    rec = _records()[1]
    (refused,) = [e for e in rec["history"] if str(e.get("content", "")).startswith("ERROR:")]
    refused["content"] = refused["content"].replace("did not appear", "(timeout=30) did not appear")
    (t,) = load_file(_write(tmp_path / "output.jsonl", [rec]))
    assert [e.type for e in t.events] == ["tool_error"]  # was tool_infra_error: an environment failure


def test_an_unresolved_run_fails_at_the_first_write_of_the_change_its_patch_keeps():
    t = _runs()["pkg__pkg-102"]
    first = Labeller().label(t).first_signal
    core = [c.step for c in t.tool_calls() if isinstance(c.args, dict) and c.args.get("path", "").endswith("core.py")
            and c.args.get("command") == "str_replace"]
    # not the reproduction script the patch also holds (created before), not the finish message
    assert first.id == "F4.first_write" and first.step == core[0]
    assert first.step != len(t.messages) - 1


def test_a_run_with_no_verdict_is_unscored_and_never_healthy():
    t = _runs()["pkg__pkg-103"]
    assert t.score is None and t.final_answer is None  # its empty patch is in no id list of report.json
    label = Labeller().label(t)
    assert label.failure_class == "F3" and label.first_signal.id in ("F3.step_budget_exhausted", "F3.no_delivery")


def test_a_directory_import_reads_the_runs_and_skips_the_evaluation_files(tmp_path):
    d = _copy(tmp_path)
    (d / "llm_completions" / "pkg__pkg-101").mkdir(parents=True)
    (d / "llm_completions" / "pkg__pkg-101" / "claude-1747735200.json").write_text(json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "response": {"id": "x"}, "cost": 0.01}))
    (d / "output.swebench_eval.jsonl").write_text(json.dumps(
        {"instance_id": "pkg__pkg-101", "test_result": {"report": {"resolved": True}}, "history": None}) + "\n")
    assert sorted(t.id for t in load_paths([d])) == [
        "openhands:pkg__pkg-101", "openhands:pkg__pkg-102", "openhands:pkg__pkg-103"]


@pytest.mark.parametrize(("field", "value", "score"), [
    ("report", {"empty_generation": False, "resolved": True, "failed_apply_patch": False, "error_eval": False,
                "test_timeout": False}, 1.0),  # update_output_with_eval.py
    ("report", {"resolved": False, "error_eval": True}, 0.0),
    ("resolved", 1, 1.0), ("resolved", False, 0.0)])
def test_the_record_s_own_verdict_scores_it(tmp_path, field, value, score):
    rec = _records()[2]
    (t,) = load_file(_write(tmp_path / "output.jsonl", [{**rec, field: value}]))
    assert t.score == score and t.meta["report"] is None


def test_the_remote_evaluation_beside_the_file_scores_it(tmp_path):
    out = _write(tmp_path / "output.jsonl", [_records()[2]])
    (tmp_path / "output.swebench_eval.jsonl").write_text(json.dumps(
        {"instance_id": "pkg__pkg-103", "test_result": {"git_patch": "", "report": {
            "empty_generation": True, "resolved": False, "failed_apply_patch": False, "error_eval": False,
            "test_timeout": False}}, "metadata": None, "history": None}) + "\n")
    (t,) = load_file(out)
    assert t.score == 0.0 and t.meta["report"].endswith("output.swebench_eval.jsonl")


def test_verdicts_that_disagree_are_one_error_naming_both(tmp_path, capsys):
    d = _copy(tmp_path)
    records = _records()
    records[0]["report"] = {"resolved": False}  # report.json and eval_outputs/ say resolved
    _write(d / "output.jsonl", records)
    with pytest.raises(InputError, match="disagree on pkg__pkg-101: the record says unresolved") as e:
        list(load_file(d / "output.jsonl"))
    assert e.value.where == "line 1"
    assert main(["import", str(d / "output.jsonl"), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "line 1" in err[0]


def test_a_broken_report_beside_the_runs_is_a_warning_not_a_verdict(tmp_path):
    d = _copy(tmp_path)
    (d / "report.json").write_text('{"resolved_ids": ["pkg__pkg-101"], "unresol')
    shutil.rmtree(d / "eval_outputs")
    runs = _runs(d / "output.jsonl")
    assert runs["pkg__pkg-101"].score is None
    (w,) = runs["pkg__pkg-101"].meta["import_warnings"]
    assert w["file"] == str(d / "report.json") and "not valid JSON" in w["reason"]
    (d / "report.json").write_text("")  # opened, not written yet: no aggregate by its first bytes, still no run
    assert len(list(load_paths([d]))) == 3


def test_bad_records_are_one_error_line_and_skipping_keeps_the_others(tmp_path, capsys):
    records = _records()
    records[1]["history"][5] = "oops"
    lines = [json.dumps(r) for r in records]
    lines.insert(1, '{"instance_id": "cut short", "history": [')
    bad = tmp_path / "output.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["import", str(bad), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "line 2" in err[0]
    assert main(["import", str(bad), "-o", str(tmp_path / "o.jsonl"), "--skip-invalid"]) == 0
    err = capsys.readouterr().err
    assert "line 2" in err and "line 3" in err and "history[5]" in err
    kept = [json.loads(x)["task_id"] for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert kept == ["pkg__pkg-101", "pkg__pkg-103"]


def test_the_history_as_action_observation_pairs_is_read_too(tmp_path):
    """Before 2025 ``history`` held ``[action, observation]`` pairs, a command's exit code in ``extras``."""
    rec = _records()[2]
    run, out = {"id": 5, "source": "agent", "action": "run", "args": {"command": "pytest -q", "thought": "Test."}}, {
        "id": 6, "source": "agent", "cause": 5, "observation": "run", "content": "1 failed",
        "extras": {"command_id": -1, "command": "pytest -q", "exit_code": 1}}
    say = {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix median()."}}
    rec["history"] = [[say, {"id": 2, "observation": "null", "content": "", "extras": {}}], [run, out]]
    (t,) = load_file(_write(tmp_path / "output.jsonl", [rec]))
    assert [m["role"] for m in t.messages] == ["user", "assistant", "tool"]
    assert t.messages[2]["content"] == "1 failed\n[Command finished with exit code 1]"
    assert _calls(t) == [("execute_bash", "pytest -q")] and t.task == "Fix median()."


def test_a_run_that_failed_before_its_events_were_kept_is_read_not_refused(tmp_path):
    """``_process_instance_wrapper`` writes ``EvalOutput(instance_id, test_result={}, error=...)`` for a run past its
    time limit: no history. Such a line first in the file was 'unrecognised JSONL record', later in it a bad record."""
    lost = {"instance_id": "pkg__pkg-104", "test_result": {}, "instruction": "Fix mode().", "metadata": None,
            "history": None, "metrics": None, "error": "Timeout after 7200 seconds", "instance": None}
    out = _write(tmp_path / "output.jsonl", [lost, _records()[0]])
    assert detect_format(out) == "openhands"
    t, _ = load_file(out)
    assert (t.task, [m["role"] for m in t.messages], t.termination.value) == ("Fix mode().", ["user"], "timeout")
    assert t.meta["history_missing"] and t.score is None and t.final_answer is None
    assert Labeller().label(t).failure_class == "F3"
    # the same line with no 'history' key at all (a writer leaving None fields out): read the same, not a KeyError
    absent = {k: v for k, v in lost.items() if k != "history"}
    (t2,) = load_file(_write(tmp_path / "output.jsonl", [absent]))
    assert t2.meta["history_missing"] and t2.task == "Fix mode()." and t2.termination.value == "timeout"
    # an evaluation's own line (no history, no error) is still none
    evaluated = {**lost, "error": None, "test_result": {"report": {"resolved": False}}}
    with pytest.raises(InputError, match="unrecognised JSONL record"):
        detect_format(_write(tmp_path / "output.swebench_eval.jsonl", [evaluated]))


def test_the_delivered_patch_is_the_one_swe_bench_graded(tmp_path):
    """eval_infer.py's process_git_patch: CRLF made LF, the command output before the first diff dropped."""
    rec = _records()[0]
    patch = rec["test_result"]["git_patch"]
    rec["test_result"]["git_patch"] = "git diff --no-color --cached a1b2c3d4e5f6\r\n0\r\n" + patch.replace("\n", "\r\n")
    (t,) = load_file(_write(tmp_path / "output.jsonl", [rec]))
    assert t.final_answer == patch



@pytest.mark.parametrize("sample", [SAMPLE, SAMPLE.parent / "openhands_v1"], ids=["classic", "v1"])
def test_the_finish_call_under_a_policy_like_system_prompt_is_the_delivery_not_a_domain_write(sample):
    """OpenHands' final answer is the patch (git_patch), so its ``finish`` call, whose message is a summary, was
    no delivery to the policy rules: under a system prompt with a confirmation or identity line (a coding prompt's
    "never push ... without explicit user confirmation") the unresolved run's first signal moved from its first
    write of the patched file to a policy violation at ``finish``. The delivered run's last message, a call nothing
    answered, ends the run: no domain write."""
    (t,) = [t for t in load_file(sample / "output.jsonl") if t.score == 0.0]
    line = ("Never push changes or delete files without explicit user confirmation. Verify the user's identity "
            "before any change.")
    msgs = [dict(m) for m in t.messages]
    assert msgs[0]["role"] == "system" and t.termination.value == "delivered"
    msgs[0]["content"] = f"{msgs[0]['content']}\n{line}"
    before = Labeller().label(t).first_signal
    after = Labeller().label(t.model_copy(update={"messages": msgs})).first_signal
    assert (after.id, after.step) == (before.id, before.step) == ("F4.first_write", 8)


def test_a_domain_write_a_run_ends_on_is_still_a_write_under_the_policy():
    """Only a coding agent's last call (a run with shell / editor calls) is taken for its delivery: a domain agent
    that changes an address with no identity check and ends the run there still violates the policy."""
    from evoharness.diagnosis.context import TraceView
    from evoharness.diagnosis.invariants import violation_log
    from evoharness.traces.models import Termination, Trajectory

    msgs = [{"role": "system", "content": "You must verify the user's identity before any change to an account."},
            {"role": "user", "content": "Change my address to 1 Main St."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "update_address", "arguments": json.dumps({"user_id": "u1", "address": "1 Main St"})}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "update_address", "content": "{\"ok\": true}"}]
    t = Trajectory.with_messages(msgs, id="d1", task_id="d", score=0.0, termination=Termination.delivered,
                                 final_answer=None)
    assert [(v.rule, v.step) for v in violation_log(TraceView(t))] == [("policy.identity_check", 2)]
    assert (Labeller().label(t).first_signal.id, Labeller().label(t).first_signal.step) == ("F4.policy_violation", 2)
