"""BFCL v4 multi-turn as an environment: BFCL's simulators, turns, split and state checker, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.modules import load_file

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by scripts/setup.sh (--no-deps)")

from evoharness.envs import get_environment  # noqa: E402
from evoharness.envs.base import ToolError  # noqa: E402
from evoharness.envs.bfcl_env import ASK_USER, CATEGORIES, NO_MORE  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bfcl_ground_truth.py"


def test_split_is_fixed_per_scenario_across_categories():
    splits = {}
    for cat in CATEGORIES:
        env = get_environment(f"bfcl:{cat}")
        assert (len(env.list_tasks("dev")), len(env.list_tasks("heldout"))) == (140, 60)
        splits[cat] = {t.id.rsplit("_", 1)[1]: t.split for t in env.list_tasks("all")}
    assert all(s == splits["multi_turn_base"] for s in splits.values())


def test_turns_tools_and_scoring_of_one_task():
    env = get_environment("bfcl:multi_turn_base")
    task = env.get_task("multi_turn_base_0")
    names = {t["function"]["name"] for t in env.tools(task)}
    assert {"cd", "mv", "ls", ASK_USER} <= names
    params = next(t for t in env.tools(task) if t["function"]["name"] == "mv")["function"]["parameters"]
    assert params["type"] == "object" and "source" in params["properties"]
    state = env.reset(task)
    with pytest.raises(ToolError) as e:
        env.call_tool(state, "teleport", {})
    assert e.value.kind == "unknown_tool"
    with pytest.raises(ToolError) as e:
        env.call_tool(state, "cd", {"where": "x"})
    assert e.value.kind == "invalid_arguments"
    calls = env.ground_truth_calls(task)
    replies = []
    for c in calls:
        out = env.call_tool(state, c.name, c.args)
        if c.name == ASK_USER:
            replies.append(out)
    entry_turns = task.meta["turns"]
    assert len(replies) == entry_turns and replies[-1] == NO_MORE
    assert env.score(task, state, "Done.", []) == 1.0
    assert env.score(task, state, None, []) == 0.0  # not delivered
    # a fresh state that skips the work of the first turn fails that turn, by BFCL's state check
    state = env.reset(task)
    first_turn = calls[:next(i for i, c in enumerate(calls) if c.name == ASK_USER)]
    for c in calls[len(first_turn):]:
        try:
            env.call_tool(state, c.name, c.args)
        except ToolError:
            pass
    verdicts = env.turn_verdicts(task, state, "Done.")
    assert not verdicts["passed"] and verdicts["turns"][0]["error_type"] == "multi_turn:empty_turn_model_response"


def test_miss_param_turn_must_not_call():
    env = get_environment("bfcl:multi_turn_miss_param")
    task = env.get_task("multi_turn_miss_param_0")
    calls = env.ground_truth_calls(task)
    asks = [i for i, c in enumerate(calls) if c.name == ASK_USER]
    # put a harmless call into the turn whose ground truth is empty (turn 3): BFCL's irrelevance check fails it
    bad = calls[:asks[2] + 1] + [calls[0]] + calls[asks[2] + 1:]
    state = env.reset(task)
    for c in bad:
        try:
            env.call_tool(state, c.name, c.args)
        except ToolError:
            pass
    v = env.turn_verdicts(task, state, "Done.")
    assert not v["passed"] and v["turns"][3]["error_type"] == "multi_turn:irrelevance_error"


@pytest.mark.slow
def test_ground_truth_800_of_800_and_bfcl_checker_agrees(capsys):
    mod = load_file(SCRIPT, "bfcl_ground_truth")
    assert mod.main([]) == 0
    out = capsys.readouterr().out
    for cat in CATEGORIES:
        assert f"{cat}: ground truth 200/200; baselines: no call 0/200" in out
        assert "agrees on 400/400" in out


def test_task_prompt_is_the_first_user_turn():
    env = get_environment("bfcl:multi_turn_long_context")
    task = env.list_tasks("dev")[0]
    from bfcl_eval.utils import load_dataset_entry

    entry = next(e for e in load_dataset_entry("multi_turn_long_context", include_language_specific_hint=False)
                 if e["id"] == task.id)
    assert entry["question"][0][0]["content"] in task.prompt
    assert json.dumps(task.meta["involved_classes"]) == json.dumps(entry["involved_classes"])


@pytest.mark.slow
def test_sandboxed_rollouts_with_the_stand_in_models(tmp_path):
    import shutil

    from evoharness.cli import main

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "policies.yaml").write_text("max_steps: 40\n")
    tmp_path.chmod(0o755)
    out = tmp_path / "t.jsonl"
    assert main(["rollout", "--harness", str(harness), "--env", "bfcl:multi_turn_base", "--tasks", "3",
                 "--model", "scripted:oracle", "--sandbox", "bwrap", "-o", str(out)]) == 0
    trajs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(trajs) == 3 and all(t["score"] == 1.0 for t in trajs)  # the reference calls pass BFCL's checks
    asks = [c for m in trajs[0]["messages"] for c in m.get("tool_calls") or []
            if c["function"]["name"] == ASK_USER]
    assert len(asks) == get_environment("bfcl:multi_turn_base").get_task(trajs[0]["task_id"]).meta["turns"]
    assert main(["rollout", "--harness", str(harness), "--env", "bfcl:multi_turn_base", "--tasks", "3",
                 "--model", "scripted:weak", "--sandbox", "bwrap", "-o", str(out)]) == 0
    weak = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(weak) == 3 and all(t["score"] in (0.0, 1.0) for t in weak)
    assert not any(e["type"] == "harness_error" for t in weak for e in t["events"])  # ran, not crashed
