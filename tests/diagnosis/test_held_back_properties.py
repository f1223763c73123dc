"""What the held-back sets of other domains check, on variants of real public runs: a tool error retried
with success (at once or after several failures) and a format rejection the agent fixed (even after
several in a row) are friction, never the failure; an edit -> re-run cycle is never a loop; a run that
never gets past its friction is still F2; every reward-1 / resolved run is Healthy; a failed run's first
signal is rarely its last assistant message. Each variant is a real record of ../shared/data with messages
inserted, written back in a format the held-back sets may come in and read by the importer (the path a
user's files take): tau-bench records as tau-bench's list (``openai``) and as AgentRx's one file per run
(``agentrx-tau``); mini-swe-agent runs as v1, as v2 (tool calls, text, Responses API: the writers in
tests/fixtures/traces/mini_swe_v2/make_sample.py) and as SWE-agent ``.traj`` files
(tests/fixtures/traces/swe_agent/make_sample.py)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from tests.modules import load_file

PROCESS = ("F2", "F3")
TRACE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
TAU_FORMATS = ("openai", "agentrx-tau")
SWE_FORMATS = ("v1", "v2-toolcall", "v2-text", "v2-response", "swe-agent")


def _writer(name: str):
    return load_file(TRACE_FIXTURES / name / "make_sample.py", f"{name}_writer")


def _last_assistant(t) -> int:
    return max(i for i, m in enumerate(t.messages) if m["role"] == "assistant")


def _tau_records(full_shared_data):
    return json.loads((full_shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())


def _first_write(traj):
    """Index of the first assistant message calling a write tool whose result is no error."""
    for i, m in enumerate(traj):
        for c in m.get("tool_calls") or []:
            name = c["function"]["name"]
            if name.startswith(("book_", "update_", "cancel_", "send_")):
                res = next((r for r in traj[i + 1:] if r.get("tool_call_id") == c["id"]), None)
                if res is not None and not str(res.get("content", "")).startswith("Error"):
                    return i
    return None


def _with_failed_tries(record, tries: int, recover: bool = True, same_args: bool = True):
    """The record with ``tries`` failed calls (``Error: ...`` results) of its first write inserted before the
    call that succeeded -- the same call, or with ``same_args=False`` one with other arguments (the agent fixed
    the call); with ``recover=False`` the run ends on the last failure instead."""
    rec = copy.deepcopy(record)
    traj = rec["traj"]
    i = _first_write(traj)
    call = traj[i]["tool_calls"][0]
    if not same_args:
        args = {**json.loads(call["function"]["arguments"]), "payment_id": "gift_card_0000000"}
        call = {**call, "function": {**call["function"], "arguments": json.dumps(args)}}
    inserted = []
    for k in range(tries):
        cid = f"{call['id']}_failed{k}"
        inserted.append({"role": "assistant", "content": None, "tool_calls": [{**call, "id": cid}]})
        inserted.append({"role": "tool", "tool_call_id": cid, "name": call["function"]["name"],
                         "content": "Error: the payment method gift_card_0000000 is not enough"})
    rec["traj"] = traj[:i] + inserted + (traj[i:] if recover else [])
    return rec


def _tau_trajectories(tmp_path, records, fmt="openai"):
    """The records as tau-bench's list (``openai``) or as AgentRx's files, one run each with 1-based message
    ``index``es (``agentrx-tau``: data/tau_dataset/<n>.json), read back in order."""
    if fmt == "openai":
        path = tmp_path / "tau.json"
        path.write_text(json.dumps(records))
        return list(load_paths([path]))
    folder = tmp_path / "data" / "tau_dataset"
    folder.mkdir(parents=True)
    for n, r in enumerate(records):
        run = {**r, "traj": [{**m, "index": i + 1} for i, m in enumerate(r["traj"])]}
        (folder / f"{n:04d}.json").write_text(json.dumps(run))
    trajs = list(load_paths([folder]))
    assert {t.meta["source_format"] for t in trajs} == {"agentrx-tau"}
    return trajs


def _label_tau(tmp_path, records, fmt="openai"):
    labeller = Labeller()
    return [labeller.label(t) for t in _tau_trajectories(tmp_path, records, fmt)]


@pytest.mark.parametrize("fmt", TAU_FORMATS)
def test_every_reward_1_run_is_healthy_and_failures_are_found_before_the_last_reply(full_shared_data, tmp_path, fmt):
    records = _tau_records(full_shared_data)
    trajs = _tau_trajectories(tmp_path, records, fmt)
    labeller = Labeller()
    labels = [labeller.label(t) for t in trajs]
    passed = [lab for t, lab in zip(trajs, labels, strict=True) if t.score == 1.0]
    assert len(passed) == 84 and all(lab.failure_class == "healthy" for lab in passed)
    failed = [(t, lab) for t, lab in zip(trajs, labels, strict=True) if t.score == 0.0]
    at_last = [t.id for t, lab in failed if lab.first_signal is None or lab.first_signal.step == _last_assistant(t)]
    assert len(failed) == 116 and len(at_last) * 4 < len(failed), at_last  # the last reply: under a quarter


@pytest.mark.parametrize("fmt", TAU_FORMATS)
@pytest.mark.parametrize(("tries", "same_args"), [(1, True), (2, True), (3, True), (3, False)])
def test_a_tool_error_retried_with_success_is_never_the_failure(full_shared_data, tmp_path, tries, same_args, fmt):
    records = [r for r in _tau_records(full_shared_data) if _first_write(r["traj"]) is not None]
    failed = [r for r in records if r["reward"] == 0][:20]
    passed = [r for r in records if r["reward"] == 1][:20]
    labels = _label_tau(tmp_path, [_with_failed_tries(r, tries, same_args=same_args) for r in failed + passed], fmt)
    assert len(labels) == len(failed) + len(passed) == 40
    assert all(lab.failure_class == "healthy" for lab in labels[len(failed):])
    bad = [(lab.trajectory_id, lab.first_signal.id) for lab in labels[:len(failed)]
           if lab.failure_class in PROCESS]
    assert not bad, bad
    assert not [s.id for lab in labels for s in lab.signals if s.id == "F2.tool_error"]


@pytest.mark.parametrize("fmt", TAU_FORMATS)
def test_a_tool_error_never_got_past_is_the_failure(full_shared_data, tmp_path, fmt):
    failed = [r for r in _tau_records(full_shared_data) if r["reward"] == 0 and _first_write(r["traj"])][:20]
    labels = _label_tau(tmp_path, [_with_failed_tries(r, 2, recover=False) for r in failed], fmt)
    for rec, lab in zip(failed, labels, strict=True):
        error_at = _first_write(rec["traj"]) + 1  # the first inserted failure's result (the importer keeps indices)
        # at the inserted failure, or at an earlier error of the record's own that the cut tail recovered
        [tool_error] = [s.step for s in lab.signals if s.id == "F2.tool_error"]
        assert tool_error <= error_at, lab.trajectory_id
        assert lab.first_signal.id == "F2.tool_error" or lab.first_signal.step < error_at, lab.first_signal


REJECTION = ("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\n"
             "Please format your action in triple backticks as shown in <response_example>.")


def _mini_swe_variant(full_shared_data, tmp_path, resolved: bool, edit, fmt: str = "v1"):
    """Every mini-swe-agent run with the given outcome, ``edit(messages)`` applied to its v1 messages, written
    as ``fmt`` (v1; v2-toolcall / v2-text / v2-response; swe-agent) in that format's layout with its report."""
    src = full_shared_data / "mini_swe_agent_sample"
    out = tmp_path / ("resolved" if resolved else "failed")
    n = 0
    for report in sorted(src.glob("logs/*/report.json")):
        inst = report.parent.name
        rep = json.loads(report.read_text())
        if rep.get(inst, rep).get("resolved") != resolved:
            continue
        data = json.loads((src / "trajs" / inst / f"{inst}.traj.json").read_text())
        data["messages"] = edit(data["messages"])
        (out / "logs" / inst).mkdir(parents=True)
        if fmt == "swe-agent":  # SWE-bench/experiments: trajs/<id>.traj, logs/<id>/report.json
            (out / "trajs").mkdir(exist_ok=True)
            (out / "trajs" / f"{inst}.traj").write_text(json.dumps(_writer("swe_agent").to_swe_agent(data)))
        else:
            if fmt != "v1":
                data = _writer("mini_swe_v2").to_v2(data, fmt.removeprefix("v2-"))
            (out / "trajs" / inst).mkdir(parents=True)
            (out / "trajs" / inst / f"{inst}.traj.json").write_text(json.dumps(data))
        shutil.copy(report, out / "logs" / inst / "report.json")
        n += 1
    labeller = Labeller()
    trajs = list(load_paths([out]))
    assert {t.meta["source_format"] for t in trajs} == {"swe-agent" if fmt == "swe-agent" else "mini-swe-agent"}
    labels = [labeller.label(t) for t in trajs]
    assert len(labels) == n == 10 and all(t.score == (1.0 if resolved else 0.0) for t in trajs)
    if edit is _rejected_twice and fmt != "swe-agent":  # the inserted rejections are there to be judged
        assert all(sum(e.type == "format_rejected" for e in t.events) >= 3 for t in trajs)
    if edit is _edit_rerun_cycle:
        assert all(sum("sed -i 's/x" in str(c.args) for c in t.tool_calls()) == 3 for t in trajs)
    if not resolved:  # the failing step: rarely the last reply (under a quarter of the failed runs)
        at_last = [t.id for t, lab in zip(trajs, labels, strict=True)
                   if lab.first_signal is None or lab.first_signal.step == _last_assistant(t)]
        assert len(at_last) * 4 < len(trajs), at_last
    return labels


def _first_action(messages):
    return next(i for i, m in enumerate(messages) if m["role"] == "assistant" and "```bash" in m["content"])


def _rejected_twice(messages):
    i = _first_action(messages)
    bad = {"role": "assistant", "content": "THOUGHT: two at once.\n\n```bash\nls\n```\n\n```bash\npwd\n```"}
    rejection = {"role": "user", "content": REJECTION}
    return messages[:i] + [bad, rejection, bad, rejection, bad, rejection] + messages[i:]


@pytest.mark.parametrize("fmt", SWE_FORMATS)
@pytest.mark.parametrize("resolved", [True, False])
def test_every_resolved_run_is_healthy(full_shared_data, tmp_path, resolved, fmt):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, lambda messages: messages, fmt)
    assert all((lab.failure_class == "healthy") == resolved for lab in labels)


@pytest.mark.parametrize("fmt", [f for f in SWE_FORMATS if f != "swe-agent"])  # SWE-agent keeps no rejection
@pytest.mark.parametrize("resolved", [True, False])
def test_format_rejections_the_agent_fixed_are_no_process_label(full_shared_data, tmp_path, resolved, fmt):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, _rejected_twice, fmt)
    if resolved:
        assert all(lab.failure_class == "healthy" for lab in labels)
    else:
        assert not [lab.first_signal.id for lab in labels if lab.failure_class in PROCESS]
    assert not [s.id for lab in labels for s in lab.signals if s.id == "F2.format_rejected"]


def _edit_rerun_cycle(messages):
    """Three rounds of: edit a file with sed -i, re-run the same script, the same failing output."""
    i = _first_action(messages)
    cycle = []
    for k in range(3):
        cycle += [
            {"role": "assistant", "content": f"THOUGHT: try a fix.\n\n```bash\nsed -i 's/x{k}/y{k}/' src/m.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
            {"role": "assistant", "content": "THOUGHT: re-run.\n\n```bash\npython reproduce.py\n```"},
            {"role": "user", "content": "<returncode>1</returncode>\n<output>\nAssertionError: 1 != 2\n</output>"},
        ]
    return messages[:i] + cycle + messages[i:]


@pytest.mark.parametrize("fmt", SWE_FORMATS)
@pytest.mark.parametrize("resolved", [True, False])
def test_an_edit_rerun_cycle_is_no_loop(full_shared_data, tmp_path, resolved, fmt):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, _edit_rerun_cycle, fmt)
    assert all((lab.failure_class == "healthy") == resolved for lab in labels)
    assert not [s.id for lab in labels for s in lab.signals if s.id.startswith("F3.")]


def _editor_rounds(history, fail_first: int):
    """SWE-agent's own tools after the task: three rounds of a ``str_replace_editor`` edit and a ``bash`` re-run
    of the same script; the first ``fail_first`` edits fail (no replacement) and their re-runs error."""
    rounds = []
    for k in range(3):
        failed = k < fail_first
        edit = json.dumps({"command": "str_replace", "path": "/testbed/src/m.py",
                           "old_str": f"x{k}", "new_str": f"y{k}"})
        rerun = json.dumps({"command": "python reproduce.py"})
        rounds += [
            {"role": "assistant", "content": "Fix it.", "agent": "main", "message_type": "action",
             "tool_calls": [{"id": f"e{k}", "type": "function",
                             "function": {"name": "str_replace_editor", "arguments": edit}}]},
            {"role": "tool", "agent": "main", "message_type": "observation", "tool_call_ids": [f"e{k}"],
             "content": [{"type": "text", "text": "No replacement was performed, old_str `x0` did not appear verbatim "
                                                  "in /testbed/src/m.py." if failed else
                                                  "The file /testbed/src/m.py has been edited."}]},
            {"role": "assistant", "content": "Re-run.", "agent": "main", "message_type": "action",
             "tool_calls": [{"id": f"r{k}", "type": "function",
                             "function": {"name": "bash", "arguments": rerun}}]},
            {"role": "tool", "agent": "main", "message_type": "observation", "tool_call_ids": [f"r{k}"],
             "content": [{"type": "text", "text": "Traceback (most recent call last):\nAssertionError: 1 != 2"}]},
        ]
    return history[:2] + rounds + history[2:]


@pytest.mark.parametrize("fail_first", [0, 2])
@pytest.mark.parametrize("resolved", [True, False])
def test_swe_agent_editor_rounds_are_no_process_label(full_shared_data, tmp_path, resolved, fail_first):
    """On SWE-agent's own tools: edit -> re-run rounds with the same failing output are no loop, and editor
    calls that failed before one went through are friction, not the failure."""
    src = full_shared_data / "mini_swe_agent_sample"
    out = tmp_path / "exp"
    writer = _writer("swe_agent")
    for report in sorted(src.glob("logs/*/report.json")):
        inst = report.parent.name
        rep = json.loads(report.read_text())
        if rep.get(inst, rep).get("resolved") != resolved:
            continue
        data = writer.to_swe_agent(json.loads((src / "trajs" / inst / f"{inst}.traj.json").read_text()))
        data["history"] = _editor_rounds(data["history"], fail_first)
        (out / "trajs").mkdir(parents=True, exist_ok=True)
        (out / "trajs" / f"{inst}.traj").write_text(json.dumps(data))
        (out / "logs" / inst).mkdir(parents=True)
        shutil.copy(report, out / "logs" / inst / "report.json")
    trajs = list(load_paths([out]))
    assert len(trajs) == 10 and all(sum(c.name == "str_replace_editor" for c in t.tool_calls()) == 3 for t in trajs)
    labeller = Labeller()
    labels = [labeller.label(t) for t in trajs]
    assert all((lab.failure_class == "healthy") == resolved for lab in labels)
    assert not [s.id for lab in labels for s in lab.signals if s.id.startswith(("F2.", "F3."))]


def _label_profile():
    script = Path(__file__).resolve().parents[2] / "scripts" / "label_profile.py"
    return load_file(script, "label_profile")


def test_label_profile_tells_a_constant_place_from_a_varying_one(tmp_path, capsys):
    """scripts/label_profile.py on AgentRx-format runs (the vendored trimmed run, written as three files): one
    scored 1, two failed copies of which one has a closing assistant reply appended. Its figures are the
    labeller's own, counted independently here; the appended reply moves the last assistant message, so the
    two failures answer the same step but a different distance from the run's end."""
    record = json.loads((TRACE_FIXTURES / "agentrx_tau" / "tau_dataset" / "2.json").read_text())
    folder = tmp_path / "tau_dataset"
    folder.mkdir()
    passed = {**copy.deepcopy(record), "task_id": 3, "reward": 1.0}
    longer = copy.deepcopy(record)
    longer["task_id"] = 4
    longer["traj"].append({"role": "assistant", "content": "Is there anything else I can help with?",
                           "index": len(longer["traj"]) + 1})
    for name, rec in (("2", record), ("3", passed), ("4", longer)):
        (folder / f"{name}.json").write_text(json.dumps(rec))
    module = _label_profile()
    assert module.main([str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    trajs = sorted(load_paths([folder]), key=lambda t: t.task_id)
    labeller = Labeller()
    failed = [(t, labeller.label(t)) for t in trajs if t.score < 1]
    assert out["runs"] == 3 and out["scores"] == {"0": 2, "1": 1} and out["failed"] == len(failed) == 2
    assert sum(out["classes"].values()) == sum(out["first_signal_at"].values()) == 2
    steps = {(str(lab.failure_class.value), lab.first_signal.step) for _, lab in failed}
    assert out["distinct_class_step"] == len(steps)
    before_end = {(str(lab.failure_class.value), max(i for i, m in enumerate(t.messages) if m["role"] == "assistant")
                   - lab.first_signal.step) for t, lab in failed}
    assert out["distinct_class_steps_before_last_assistant"] == len(before_end)
    if len(steps) == 1:  # the appended reply left the first signal where it was: only the distance tells them apart
        assert len(before_end) == 2


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_label_profile_refuses_a_path_without_runs(tmp_path, capsys, make):
    path = tmp_path / "runs"
    if make == "empty":
        path.mkdir()
    assert _label_profile().main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_label_profile_on_runs_that_all_passed(tmp_path, capsys):
    record = json.loads((TRACE_FIXTURES / "agentrx_tau" / "tau_dataset" / "2.json").read_text())
    (tmp_path / "2.json").write_text(json.dumps({**record, "reward": 1.0}))
    assert _label_profile().main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("runs 1; scores {'1': 1}; failed 0\n") and "distinct answers" not in out
