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
