"""OpenHands/benchmarks' evaluation output (the V1 agent SDK: ``history`` of ``kind: ActionEvent`` ... events) is read
as the agent ran: actions as tool calls under their tool names, observations as their results,
``test_result.git_patch`` as the delivered patch, SWE-bench's verdict from ``output.report.json`` beside it. The runs
of tests/fixtures/traces/openhands_v1 are hand-written in the SDK's event serialisation (make_sample.py there).
Before, such a record was one ``error:`` line naming the V1 event (ce22952)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_file, load_paths

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "openhands_v1"
OUTPUT = SAMPLE / "output.jsonl"
CLASSIC = SAMPLE.parent / "openhands" / "output.jsonl"


def _runs(path: Path = OUTPUT) -> dict:
    return {t.task_id: t for t in load_file(path)}


def _records() -> list[dict]:
    return [json.loads(line) for line in OUTPUT.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _one(tmp_path: Path, rec: dict):
    (t,) = load_file(_write(tmp_path / "output.jsonl", [rec]))
    return t


def test_v1_output_jsonl_is_detected_and_read_as_the_agent_ran():
    assert detect_format(OUTPUT) == "openhands"
    runs = _runs()
    assert [(t.id, t.score, t.termination.value) for t in runs.values()] == [
        ("openhands:pkg__pkg-201", 1.0, "delivered"), ("openhands:pkg__pkg-202", 0.0, "delivered"),
        ("openhands:pkg__pkg-203", None, "step_budget")]
    ok = runs["pkg__pkg-201"]
    rec = _records()[0]
    assert ok.model == "litellm_proxy/claude-sonnet-4-5-20250929" and ok.task == rec["instruction"]
    assert ok.meta["events"] == "v1-sdk" and ok.meta["report"] == str(SAMPLE / "output.report.json")
    assert [m["role"] for m in ok.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool",
                                                "assistant", "tool"]
    assert ok.messages[0]["content"].startswith("You are OpenHands agent")
    # the edit and the check the model asked for in one response (one llm_response_id) are one turn
    assert [c["function"]["name"] for c in ok.messages[4]["tool_calls"]] == ["file_editor", "terminal"]
    assert [m["tool_call_id"] for m in ok.messages[5:7]] == [c["id"] for c in ok.messages[4]["tool_calls"]]
    assert ok.messages[4]["content"] == "It indexes an empty list. I will guard it and check the fix at once."
    # a command's result as TerminalObservation.to_llm_content gives it to the model
    assert ok.messages[6]["content"] == (
        "None\n[The command completed with exit code 0.]\n[Current working directory: /workspace/pkg]\n"
        "[Python interpreter: /opt/miniconda3/envs/testbed/bin/python]\n[Command finished with exit code 0]")
    # the arguments as the model wrote them (tool_call.arguments)
    edit = ok.tool_calls()[1]
    assert edit.args == {"command": "str_replace", "path": "/workspace/pkg/pkg/core.py",
                         "old_str": "    return out[0]", "new_str": "    return out[0] if out else None"}
    assert ok.tool_calls()[-1].name == "finish" and ok.final_answer == rec["test_result"]["git_patch"]
    assert ok.usage.steps == 3 and ok.usage.prompt_tokens == rec["metrics"]["accumulated_token_usage"]["prompt_tokens"]


def test_a_resolved_v1_run_stays_healthy():
    assert Labeller().label(_runs()["pkg__pkg-201"]).failure_class == "healthy"


def test_an_edit_then_rerun_cycle_is_no_loop():
    t = _runs()["pkg__pkg-202"]
    runs = [c for c in t.tool_calls() if c.name == "terminal"]
    assert len({c.canonical for c in runs}) == 1 and len(runs) == 3  # the same script, run after each edit
    assert not [s for s in Labeller().label(t).signals if s.failure_class == "F3"]


def test_an_editor_refusal_fixed_the_next_turn_is_no_friction():
    t = _runs()["pkg__pkg-202"]
    refusal, invalid = t.events
    assert refusal.type == "tool_error" and t.messages[refusal.step]["role"] == "tool"
    assert t.messages[refusal.step]["content"].startswith("No replacement was performed")
    assert t.messages[refusal.step + 2]["content"].startswith("The file")  # the next edit went through
    # the call the SDK could not validate (AgentErrorEvent) is answered by its error, and an event
    assert invalid.type == "invalid_arguments" and "Error validating args" in t.messages[invalid.step]["content"]
    assert t.messages[invalid.step]["tool_call_id"] == t.messages[invalid.step - 1]["tool_calls"][0]["id"]
    assert not [s for s in Labeller().label(t).signals if s.failure_class == "F2"]


def test_an_editor_refusal_quoting_a_timeout_is_the_tool_refusing_not_the_infrastructure(tmp_path):
    rec = _records()[1]
    (refused,) = [e for e in rec["history"] if e["kind"] == "ObservationEvent" and e["observation"]["is_error"]]
    part = refused["observation"]["content"][0]
    part["text"] = part["text"].replace("did not appear", "(timeout=30) did not appear")
    assert [e.type for e in _one(tmp_path, rec).events][0] == "tool_error"


def test_an_unresolved_v1_run_fails_at_the_first_write_of_the_change_its_patch_keeps():
    t = _runs()["pkg__pkg-202"]
    first = Labeller().label(t).first_signal
    core = [c.step for c in t.tool_calls() if c.args.get("path", "").endswith("core.py")
            and c.args.get("command") == "str_replace"]
    # not the reproduction script the patch also holds (created before), not the finish message; the same step the
    # classic reader gives the same run (tests/traces/test_traces_openhands.py)
    assert first.id == "F4.first_write" and first.step == core[0]
    assert first.step != len(t.messages) - 2


def test_the_iteration_limit_ends_a_v1_run_on_its_budget_and_bookkeeping_is_left_out():
    t = _runs()["pkg__pkg-203"]
    assert t.score is None and t.final_answer is None  # its empty patch is in no id list of output.report.json
    assert t.meta["skipped_events"] == 4  # two state updates, a condensation, the limit
    history = _records()[2]["history"]
    assert {history[k]["kind"] for k in t.meta["source_index"]} == {
        "SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent"}
    assert t.events[-1].type == "budget_exhausted" and "maximum iterations" in t.events[-1].detail
    label = Labeller().label(t)
    assert label.failure_class == "F3" and label.first_signal.id in ("F3.step_budget_exhausted", "F3.no_delivery")


def test_the_v1_runs_label_as_the_same_runs_read_from_the_classic_events():
    """The fixtures hold the same three runs in both serialisations (the V1 one adds a call the SDK could not run)."""
    v1 = [Labeller().label(t) for t in load_file(OUTPUT)]
    classic = [Labeller().label(t) for t in load_file(CLASSIC)]
    assert [(x.failure_class, [s.id for s in x.signals]) for x in v1] == [
        (x.failure_class, [s.id for s in x.signals]) for x in classic]


def test_the_sdk_before_1_0_s_observations_are_read_too(tmp_path):
    """``ExecuteBashObservation`` / ``StrReplaceEditorObservation``: ``output`` text, the editor's ``error`` string."""
    rec = _records()[1]
    for e in rec["history"]:
        ob = e.get("observation")
        if e["kind"] != "ObservationEvent" or ob["kind"] not in ("TerminalObservation", "FileEditorObservation"):
            continue
        body = ob.pop("content")[0]["text"]
        if ob.pop("is_error"):
            ob.update(kind="StrReplaceEditorObservation", output="", error=body)
        else:
            ob.update(kind=ob["kind"].replace("Terminal", "ExecuteBash").replace("FileEditor", "StrReplaceEditor"),
                      output=body, error=None if "Editor" in ob["kind"] else False)
    t = _one(tmp_path, rec)
    (failed,) = [m for m in t.messages if m["role"] == "tool" and "ZeroDivisionError" in m["content"]]
    assert failed["content"].endswith("[Command finished with exit code 1]")
    assert [e.type for e in t.events] == ["tool_error", "invalid_arguments"]
    assert t.messages[t.events[0].step]["content"].startswith("No replacement was performed")


def test_a_rejected_action_and_a_conversation_error_are_read(tmp_path):
    rec = _records()[2]
    history = rec["history"]
    k = next(i for i, e in enumerate(history) if e["kind"] == "ObservationEvent")
    history[k] = {"id": "r1", "timestamp": history[k]["timestamp"], "source": "environment", "tool_name": "terminal",
                  "tool_call_id": history[k]["tool_call_id"], "action_id": history[k - 1]["id"],
                  "rejection_reason": "PreToolUse hook blocked grep", "rejection_source": "hook",
                  "kind": "UserRejectObservation"}
    history.append({"id": "x1", "timestamp": history[-1]["timestamp"], "source": "environment",
                    "code": "RuntimeError", "detail": "Remote runtime pod was killed (OOM)",
                    "kind": "ConversationErrorEvent"})
    t = _one(tmp_path, rec)
    assert t.messages[3] == {"role": "tool", "tool_call_id": history[k]["tool_call_id"], "name": "terminal",
                             "content": "Action rejected: PreToolUse hook blocked grep"}
    assert "Remote runtime pod was killed" in t.events[-2].detail  # before the budget event


def test_a_directory_import_reads_the_runs_and_skips_the_evaluation_files(tmp_path, capsys):
    """output.report.json, output.swebench.jsonl and cost_report.jsonl (one indented object: its first line was
    'invalid JSON', exit 2) are no runs."""
    d = tmp_path / "run_1"
    shutil.copytree(SAMPLE, d)
    (d / "make_sample.py").unlink()
    assert (d / "cost_report.jsonl").read_text().startswith("{\n")
    assert sorted(t.id for t in load_paths([d])) == [
        "openhands:pkg__pkg-201", "openhands:pkg__pkg-202", "openhands:pkg__pkg-203"]
    assert main(["import", str(d), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert "wrote 3 trajectories" in capsys.readouterr().out


def test_verdicts_in_output_report_json_and_the_record_that_disagree_are_one_error(tmp_path, capsys):
    d = tmp_path / "run_1"
    shutil.copytree(SAMPLE, d)
    records = _records()
    records[0]["resolved"] = False  # output.report.json says resolved
    _write(d / "output.jsonl", records)
    assert main(["import", str(d / "output.jsonl"), "-o", str(tmp_path / "o.jsonl")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error:") and "line 1" in err and "output.report.json says resolved" in err


@pytest.mark.parametrize(("where", "bad", "says"), [
    (3, "oops", "history[3] is no OpenHands V1 SDK event"),
    (3, {"id": 9, "source": "agent", "action": "run", "args": {"command": "ls"}}, "mixes the classic events"),
])
def test_a_bad_v1_history_is_one_error_line_and_skipping_keeps_the_others(tmp_path, capsys, where, bad, says):
    records = _records()
    records[1]["history"][where] = bad
    out = _write(tmp_path / "output.jsonl", records)
    assert main(["import", str(out), "-o", str(tmp_path / "o.jsonl")]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error:") and "line 2" in err and says in err
    assert main(["import", str(out), "-o", str(tmp_path / "o.jsonl"), "--skip-invalid"]) == 0
    kept = [json.loads(x)["task_id"] for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert kept == ["pkg__pkg-201", "pkg__pkg-203"]


def test_a_classic_history_with_a_v1_event_later_is_one_error_naming_it(tmp_path):
    rec = json.loads(CLASSIC.read_text().splitlines()[0])
    rec["history"].append(_records()[0]["history"][2])
    with pytest.raises(InputError, match=r"history\[\d+\] is an OpenHands V1 SDK event \(kind 'ActionEvent'\)"):
        _one(tmp_path, rec)


def test_odd_v1_fields_never_crash_the_reader(tmp_path):
    rec = _records()[1]
    for e in rec["history"]:
        for key in ("thought", "tool_call", "action", "observation", "llm_message", "system_prompt", "tool_call_id",
                    "tool_name", "llm_response_id", "error"):
            if key in e:
                e[key] = 7
    t = _one(tmp_path, rec)
    assert t.messages and t.tool_calls()


def test_a_run_capped_before_its_events_were_kept_is_its_task_and_its_error(tmp_path):
    """OpenHands/benchmarks writes a run its iteration cap ended with ``history: []`` (EvalOutput's default), no patch
    and the error; before, it was read as no message at all (the task only in ``task``), not as a missing history."""
    rec = {**_records()[2], "history": [], "test_result": {"git_patch": None},
           "error": "RuntimeError: MaxIterationsReached: Agent reached maximum iterations limit (500)"}
    t = _one(tmp_path, rec)
    assert [m["role"] for m in t.messages] == ["user"] and t.messages[0]["content"] == rec["instruction"]
    assert t.meta["history_missing"] and t.termination.value == "step_budget" and t.final_answer is None
    assert Labeller().label(t).failure_class == "F3"
    # an empty history with no error is still just an empty run, not a lost one
    assert "history_missing" not in _one(tmp_path, {**rec, "error": None}).meta


@pytest.mark.parametrize("sample", [SAMPLE, CLASSIC.parent])
def test_an_iterative_evaluation_s_attempt_files_keep_their_own_ids_and_no_verdict_from_beside(
        tmp_path, capsys, sample):
    """run_infer.py's iterative mode (classic) and OpenHands/benchmarks' critic write each attempt's runs to
    output.critic_attempt_<n>.jsonl and the attempt chosen per instance to output.jsonl, which SWE-bench grades. An
    attempt took the verdict of the chosen one from the results beside it (a critic-rejected attempt of a resolved
    instance scored 1.0) and its id, so one of the two was dropped by what keys by id."""
    d = tmp_path / "run_1"
    shutil.copytree(sample, d)
    (d / "make_sample.py").unlink()
    first = json.loads((d / "output.jsonl").read_text().splitlines()[0])  # resolved (report beside)
    rejected = {**first, "attempt": 1, "test_result": {"git_patch": ""}, "history": first["history"][:4]}
    _write(d / "output.critic_attempt_1.jsonl", [rejected])
    runs = {t.id: t for t in load_paths([d])}
    attempt = runs[f"openhands:{first['instance_id']}:critic_attempt_1"]
    assert attempt.score is None and attempt.meta["critic_attempt"] == 1 and attempt.meta["report"] is None
    assert runs[f"openhands:{first['instance_id']}"].score == 1.0 and len(runs) == 4
    # its own verdict still scores it
    _write(d / "output.critic_attempt_1.jsonl", [{**rejected, "resolved": False}])
    (t,) = load_file(d / "output.critic_attempt_1.jsonl")
    assert t.score == 0.0
    assert main(["import", str(d), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert "id of an earlier one" not in capsys.readouterr().err


def test_the_failed_attempts_in_output_errors_jsonl_keep_their_own_ids_and_no_verdict_of_the_graded_run(
        tmp_path, capsys):
    """OpenHands/benchmarks writes each failed attempt to output_errors.jsonl: an instance retried and finished is in
    both files, one the iteration cap ended only there (once per attempt). Read together, a failed attempt of a
    resolved instance took its id (what keys by id kept one of the two) and its verdict from the report (1.0 for an
    attempt that delivered nothing). A failed attempt keeps its own id and only its own verdict; the one attempt of
    an instance that is nowhere else is the run, graded by the report like any other."""
    d = tmp_path / "run_1"
    shutil.copytree(SAMPLE, d)
    (d / "make_sample.py").unlink()
    report = json.loads((d / "output.report.json").read_text())
    report["unresolved_ids"].append("pkg__pkg-301")
    (d / "output.report.json").write_text(json.dumps(report))
    first = _records()[0]  # pkg__pkg-201, resolved by the report
    stuck = {**first, "history": first["history"][:4], "test_result": {"git_patch": ""},
             "error": "RuntimeError: Remote conversation got stuck"}
    capped = {**stuck, "history": [], "error": "RuntimeError: MaxIterationsReached: Agent reached maximum iterations"}
    _write(d / "output_errors.jsonl", [stuck, {**capped, "instance_id": "pkg__pkg-301"},
                                       {**capped, "instance_id": "pkg__pkg-302"},
                                       {**capped, "instance_id": "pkg__pkg-302", "resolved": False}])
    runs = {t.id: t for t in load_paths([d])}
    assert runs["openhands:pkg__pkg-201"].score == 1.0
    attempt = runs["openhands:pkg__pkg-201:errored_attempt_1"]
    assert attempt.score is None and attempt.meta["errored_attempt"] == 1 and attempt.meta["report"] is None
    assert runs["openhands:pkg__pkg-301"].score == 0.0  # its only attempt: the report graded it
    assert runs["openhands:pkg__pkg-302:errored_attempt_1"].score is None
    # its last attempt, only in the errors file: the run (the report does not grade it; its own verdict does)
    assert runs["openhands:pkg__pkg-302"].score == 0.0 and "errored_attempt" not in runs["openhands:pkg__pkg-302"].meta
    assert len(runs) == 3 + 4
    assert main(["import", str(d), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert "id of an earlier one" not in capsys.readouterr().err


@pytest.mark.parametrize("bad_id", ["../../outside", "<abs>", "a\x00b"])
def test_an_instance_id_that_is_a_path_reads_no_report_outside_the_folder(tmp_path, bad_id):
    """eval_outputs/<instance_id>/report.json was built from the id as it came: "../../outside" or an absolute path
    read a report.json outside the evaluation folder (its verdict scored the run), a NUL in the id was the error
    'embedded null byte'."""
    outside = tmp_path / "outside"
    outside.mkdir()
    bad_id = str(outside) if bad_id == "<abs>" else bad_id
    d = tmp_path / "evaluation"
    (d / "eval_outputs").mkdir(parents=True)  # where the per-instance reports go (so "../../" leads out of it)
    (outside / "report.json").write_text(json.dumps({bad_id: {"resolved": True}}))
    rec = {**_records()[1], "instance_id": bad_id}
    (t,) = load_file(_write(d / "output.jsonl", [rec]))
    assert t.task_id == bad_id and t.score is None
