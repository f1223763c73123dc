"""The observability / benchmark formats (ATIF, tau2 results, OTLP, LangSmith) on samples their own
libraries wrote (tests/fixtures/traces/<format>/make_sample.py), and on bad input as a user meets it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.diagnosis.labeller import label_all
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _tool_answers_call(t) -> None:
    """Every tool message answers an earlier assistant tool call of the same id."""
    called = set()
    for m in t.messages:
        for c in m.get("tool_calls") or []:
            called.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, m


def test_atif_harbor_trial_is_joined_with_its_reward():
    path = FIXTURES / "atif" / "trial-1" / "agent" / "trajectory.json"
    assert detect_format(path) == "atif"
    [t] = load_paths([path])
    assert (t.task_id, t.score, t.termination, t.model) == ("hello-world", 1.0, "delivered", "openai/gpt-5-mini")
    assert t.final_answer == "hello.txt now contains 'Hello, world!'."
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert t.messages[2]["tool_calls"][0]["function"] == {
        "name": "bash_command", "arguments": json.dumps({"keystrokes": "echo 'Hello, world!' > /hello.txt\n"})}
    assert t.messages[3]["content"] == "bash: /hello.txt: Permission denied"
    assert [(e.type, e.step) for e in t.events] == [("tool_error", 3)]
    assert (t.usage.steps, t.usage.prompt_tokens, t.usage.completion_tokens) == (3, 2677, 142)
    _tool_answers_call(t)


def test_atif_directory_skips_harbor_result_and_labels_unscored_multi_agent():
    trajs = {t.id: t for t in load_paths([FIXTURES / "atif"])}
    assert set(trajs) == {"atif:trial-1-session", "atif:planner-7"}
    t = trajs["atif:planner-7"]
    assert t.score is None and t.final_answer is None and t.termination == "aborted"
    assert {m.get("name") for m in t.messages if m["role"] == "assistant"} == {"planner"}
    assert [e.type for e in t.events] == ["tool_infra_error"]  # "pager service unavailable (503)"
    [lab] = label_all([t])
    assert lab.failure_class != "healthy"


def test_tau2_results_one_trajectory_per_simulation():
    path = FIXTURES / "tau2" / "results.json"
    assert detect_format(path) == "tau2"
    trajs = list(load_paths([path]))
    assert [(t.task_id, t.rollout, t.score, t.termination) for t in trajs] == [
        ("retail_0", 0, 1.0, "delivered"), ("retail_1", 0, 0.0, "delivered"), ("retail_0", 1, 0.0, "step_budget")]
    full = trajs[0]
    expected = json.loads(path.read_text())["tasks"][0]["evaluation_criteria"]["actions"]
    calls = [c["function"] for m in full.messages for c in m.get("tool_calls") or []]
    assert [c["name"] for c in calls] == [a["name"] for a in expected]
    assert json.loads(calls[0]["arguments"]) == expected[0]["arguments"]
    assert full.model == "gpt-4.1-mini" and full.usage.prompt_tokens > 0 and full.usage.wall_seconds == 1.5
    scenario = json.loads(path.read_text())["tasks"][0]["user_scenario"]["instructions"]
    assert scenario["reason_for_call"] in full.meta["user_instruction"]  # the simulated user's task, for class E
    assert scenario["known_info"] in full.meta["user_instruction"]
    _tool_answers_call(full)
    assert trajs[2].final_answer is None and trajs[2].events[-1].type == "budget_exhausted"
    labels = label_all(trajs)
    assert [lab.failure_class == "healthy" for lab in labels] == [True, False, False]


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d["simulations"][1].update(messages="oops"), "simulations[1]"),
    (lambda d: d["simulations"][2]["reward_info"].update(reward="high"), "simulations[2]"),
])
def test_tau2_bad_simulation_names_file_and_record(tmp_path, capsys, mutate, where):
    data = json.loads((FIXTURES / "tau2" / "results.json").read_text())
    mutate(data)
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        list(load_paths([bad]))
    assert e.value.where == where
    assert main(["import", str(bad), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and str(bad) in err[0] and where in err[0]
    assert main(["import", str(bad), "-o", str(tmp_path / "out.jsonl"), "--skip-invalid"]) == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


def test_atif_bad_step_and_bad_harbor_result(tmp_path):
    trial = tmp_path / "t"
    shutil.copytree(FIXTURES / "atif" / "trial-1", trial)
    (trial / "result.json").write_text('{"verifier_result": {"rewards": {"reward": "yes"}}}')
    with pytest.raises(InputError, match="result.json"):
        list(load_paths([trial]))
    data = json.loads((FIXTURES / "atif" / "multi-agent.json").read_text())
    data["steps"][1]["source"] = "robot"
    (tmp_path / "m.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="step 1: 'source'"):
        list(load_paths([tmp_path / "m.json"]))


def test_otlp_genai_file_exporter_lines_two_traces_two_trajectories():
    path = FIXTURES / "otlp" / "genai.jsonl"
    assert detect_format(path) == "otlp"
    ok, failed = load_paths([path])
    assert ok.meta["dialect"] == "gen_ai" and ok.id.startswith("otlp:") and failed.id != ok.id
    assert [m["role"] for m in ok.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert ok.messages[2]["name"] == "weather-bot"
    assert ok.messages[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert ok.messages[3] == {"role": "tool", "tool_call_id": "call_Paris", "content": "Paris: 18C, light rain"}
    assert ok.final_answer == "In Paris: 18C with light rain." and ok.termination == "delivered"
    assert (ok.usage.prompt_tokens, ok.usage.completion_tokens, ok.usage.steps) == (291, 30, 2)
    assert ok.model == "gpt-4o-mini" and ok.score is None
    # the second conversation: the tool failed (503), then the model call failed; the agent span failed
    assert failed.termination == "error" and failed.final_answer is None
    assert {e.type for e in failed.events} == {"tool_infra_error", "model_error", "harness_error"}
    _tool_answers_call(ok)
    _tool_answers_call(failed)


def test_otlp_openinference_from_a_langgraph_agent():
    trajs = list(load_paths([FIXTURES / "otlp" / "openinference.jsonl"]))
    assert len(trajs) == 2 and all(t.meta["dialect"] == "openinference" for t in trajs)
    good, bad = trajs
    assert [m["role"] for m in good.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert good.messages[3]["content"] == "order 42: shipped on 2026-01-03"
    assert good.final_answer == "Your order 42 shipped on 2026-01-03."
    assert (good.usage.prompt_tokens, good.usage.completion_tokens) == (190, 28)
    assert [(e.type, e.step) for e in bad.events] == [("tool_error", 3)]
    _tool_answers_call(good)


def test_langsmith_runs_feedback_is_the_score():
    path = FIXTURES / "langsmith" / "runs.json"
    assert detect_format(path) == "langsmith"
    good, bad = load_paths([path])
    assert (good.score, bad.score) == (1.0, 0.0)
    assert [m["role"] for m in good.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert good.messages[2]["name"] == "order-bot" and good.messages[3]["tool_call_id"] == "call_a1"
    assert good.final_answer == "Your order 42 shipped on 2026-01-03." and good.usage.prompt_tokens == 190
    assert [(e.type, e.step) for e in bad.events] == [("tool_error", 3)]
    labels = label_all([good, bad])
    assert [lab.failure_class == "healthy" for lab in labels] == [True, False]


def test_langsmith_nested_tree_separate_feedback_and_jsonl(tmp_path):
    runs = json.loads((FIXTURES / "langsmith" / "runs.json").read_text())
    (tmp_path / "runs.jsonl").write_text("\n".join(json.dumps(r) for r in runs))
    assert [t.score for t in load_paths([tmp_path / "runs.jsonl"])] == [1.0, 0.0]
    by_id = {r["id"]: {**r, "child_runs": []} for r in runs}
    roots = []
    for r in by_id.values():
        (by_id[r["parent_run_id"]]["child_runs"] if r["parent_run_id"] else roots).append(r)
    for r in roots:
        r["feedback_stats"] = None
    f = tmp_path / "tree.json"
    f.write_text(json.dumps({"runs": roots, "feedback": [{"run_id": roots[0]["id"], "key": "ok", "score": 0.5}]}))
    a, b = load_paths([f])
    assert (a.score, b.score) == (0.5, None) and a.final_answer == "Your order 42 shipped on 2026-01-03."


def test_otlp_and_langsmith_bad_input_one_error_line(tmp_path, capsys):
    bad = tmp_path / "spans.jsonl"
    lines = (FIXTURES / "otlp" / "genai.jsonl").read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1][:50], *lines[2:]]))
    assert main(["import", str(bad), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and f"{bad}:line 2" in err[0]
    runs = json.loads((FIXTURES / "langsmith" / "runs.json").read_text())
    runs[3] = {"what": "not a run"}
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    assert main(["import", str(tmp_path / "runs.json"), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "record 3" in err[0]
    assert main(["import", str(tmp_path / "runs.json"), "-o", str(tmp_path / "o.jsonl"), "--skip-invalid"]) == 0
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 2


def test_diagnose_reads_every_format_in_one_directory(capsys):
    """The README's one command on a directory of every format (generators, licences, ground truth skipped)."""
    assert main(["diagnose", str(FIXTURES), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # ATIF, tau2 simulations, OTLP traces, LangSmith traces, AgentRx tau, mini-swe-agent v2 (two styles), SWE-agent
    # (two rewritten runs, one real: swe_agent_real), AutoGen AgentChat, an AG2 chat history (a named message list),
    # tau-bench retail records (tau_retail/runs.json, ids "runs:<task>:<trial>"), SWE-rebench OpenHands records
    # (swe_rebench_openhands, ids their trajectory_id), OpenHands' own output.jsonl (its evaluation files skipped),
    # classic and V1 SDK events, nebius' SWE-agent rows (nebius_swe_agent/sample.jsonl, ids "sample:<instance>:<n>")
    assert out["n"] == 2 + 3 + 4 + 2 + 1 + 4 + (2 + 1) + 2 + 1 + 10 + 2 + (3 + 3) + 3
    ids = {t["id"].split(":")[0] for t in out["trajectories"]}
    assert ids == {"atif", "tau2", "otlp", "langsmith", "agentrx-tau", "mini-swe-agent", "swe-agent", "autogen",
                   "agentrx", "runs", "chatcmpl-0001", "chatcmpl-0002", "openhands", "sample"}


@pytest.mark.parametrize(("sample", "n", "source_format"), [
    ("agentrx_tau", 1, "agentrx-tau"), ("mini_swe_v2", 4, "mini-swe-agent"), ("swe_agent", 2, "swe-agent"),
    ("nebius_swe_agent", 3, "nebius-swe-agent")])
def test_import_and_label_read_the_held_back_formats_by_detection(tmp_path, capsys, sample, n, source_format):
    """The held-back sets' formats (issue 13) through the commands a user runs, with no --format."""
    trajs, labels = tmp_path / "t.jsonl", tmp_path / "l.jsonl"
    assert main(["import", str(FIXTURES / sample), "--out", str(trajs)]) == 0
    assert main(["label", str(FIXTURES / sample), "--out", str(labels)]) == 0
    imported = [json.loads(line) for line in trajs.read_text().splitlines()]
    assert len(imported) == n and {t["meta"]["source_format"] for t in imported} == {source_format}
    assert all(t["score"] in (0.0, 1.0) for t in imported)  # each joined with its reward / SWE-bench verdict
    assert len(labels.read_text().splitlines()) == n
