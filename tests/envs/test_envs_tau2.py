"""tau2 retail and airline: tau2's own data, split, tools and evaluation, through the real agent loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.agent.runner import run_rollout
from evoharness.agent.scripted import ScriptedModel
from evoharness.diagnosis.labeller import label_all
from evoharness.diagnosis.models import Lever
from evoharness.envs import get_environment
from evoharness.envs.base import ToolError
from evoharness.envs.tau2_user import STOP, ChatModelUser, ScriptedUser
from evoharness.errors import InputError
from evoharness.traces.models import Termination
from tests.agent.conftest import write_harness

pytest.importorskip("tau2")

ROOMY = {"max_steps": 30}
ORACLE_TASKS = ["retail_43", "retail_52", "airline_9", "airline_17",
                pytest.param("retail_48", marks=pytest.mark.slow), pytest.param("airline_12", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def retail():
    return get_environment("tau2:retail")


@pytest.fixture(scope="module")
def airline():
    return get_environment("tau2:airline")


def _split_file(domain: str) -> dict[str, list[str]]:
    from tau2.utils import DATA_DIR

    return json.loads((DATA_DIR / "tau2" / "domains" / domain / "split_tasks.json").read_text())


def test_tasks_follow_tau2s_own_train_test_split(retail, airline):
    for env, domain, n_dev, n_held in ((retail, "retail", 74, 40), (airline, "airline", 30, 20)):
        dev, held = env.list_tasks("dev"), env.list_tasks("heldout")
        assert (len(dev), len(held), len(env.list_tasks("all"))) == (n_dev, n_held, n_dev + n_held)
        split = _split_file(domain)
        assert {t.id for t in dev} == {f"{domain}_{i}" for i in split["train"]}
        assert {t.id for t in held} == {f"{domain}_{i}" for i in split["test"]}
        assert [t.id for t in env.list_tasks("dev")] == [t.id for t in dev]  # stable order


def test_prompt_has_the_policy_and_not_the_customers_scenario(retail):
    task = retail.get_task("retail_43")
    assert "<policy>" in task.prompt and "authenticate the user identity" in task.prompt
    assert "ask_user" in task.prompt
    scenario = retail._task(task).user_scenario.instructions
    assert scenario.reason_for_call[:40] not in task.prompt and scenario.known_info not in task.prompt
    assert task.meta == {"domain": "retail", "tau2_id": "43", "reward_basis": ["DB", "COMMUNICATE"]}


def test_tools_are_tau2s_plus_ask_user(retail, airline):
    task = retail.get_task("retail_43")
    names = [t["function"]["name"] for t in retail.tools(task)]
    assert {"find_user_id_by_name_zip", "exchange_delivered_order_items", "transfer_to_human_agents"} < set(names)
    assert names[-1] == "ask_user" and len(names) == len(set(names))
    schemas = {t["function"]["name"]: t["function"] for t in airline.tools(airline.get_task("airline_9"))}
    assert schemas["cancel_reservation"]["parameters"]["required"] == ["reservation_id"]


@pytest.mark.parametrize("task_id", ORACLE_TASKS)
def test_oracle_solves_tasks_through_the_agent_loop(tmp_path: Path, task_id: str):
    h = write_harness(tmp_path / "h", policies=ROOMY)
    env_spec = "tau2:" + task_id.split("_")[0]
    traj = run_rollout(h, env_spec, task_id, "scripted:oracle", seed=0)
    assert traj.termination == Termination.delivered
    assert traj.score == 1.0, [e.detail for e in traj.events]
    n_calls = sum(len(m.get("tool_calls") or []) for m in traj.messages)
    assert n_calls == len(get_environment(env_spec).ground_truth_calls(get_environment(env_spec).get_task(task_id)))


def test_weak_model_fails_and_the_labeller_sorts_the_failures(tmp_path: Path, retail):
    h = write_harness(tmp_path / "h", policies={"max_steps": 12})
    trajs = [run_rollout(h, "tau2:retail", t, "scripted:weak", seed=s)
             for t in ("retail_43", "retail_52") for s in range(3)]
    labels = label_all(trajs, None)
    classes = {lab.failure_class for lab in labels}
    # seeded, so stable: some rollouts solve the task, others fail by friction (F2) and by loops (F3)
    assert {"healthy", "F2", "F3"} <= classes, classes
    for t, lab in zip(trajs, labels, strict=True):
        assert (lab.failure_class == "healthy") == (t.score == 1.0)
        if lab.lever == Lever.harness:
            assert t.score == 0.0 and lab.first_signal is not None
    assert any(e.type == "invalid_arguments" for t in trajs for e in t.events)  # tau2 tools reject bad names


def test_tool_errors_have_the_right_kind(retail):
    state = retail.reset(retail.get_task("retail_43"))
    cases = [
        ("no_such_tool", {}, "unknown_tool"),
        ("get_order_details", {"orderId": "#W2378156"}, "invalid_arguments"),   # wrong name
        ("get_order_details", {}, "invalid_arguments"),                          # missing
        ("get_order_details", {"order_id": 2378156}, "invalid_arguments"),       # wrong type
        ("get_order_details", {"order_id": "#W0000000"}, "tool_error"),          # the tool raised
        ("ask_user", {"text": "hi"}, "invalid_arguments"),
    ]
    for name, args, kind in cases:
        with pytest.raises(ToolError) as e:
            retail.call_tool(state, name, args)
        assert e.value.kind == kind, (name, args, e.value)
    with pytest.raises(ToolError) as e:
        retail.call_tool(state, "get_order_details", {"order_id": "#W0000000"})
    assert e.value.message == "Order not found"      # tau2's own error text, without "Error: "
    # only the call that reached the tool is in tau2's log (as tau2 would have run it)
    assert [m.tool_calls[0].name for m in state.trajectory if getattr(m, "tool_calls", None)] == \
        ["get_order_details", "get_order_details"]


def test_rollouts_do_not_share_db_state(retail):
    task = retail.get_task("retail_59")
    a, b = retail.reset(task), retail.reset(task)
    before = b.env.get_db_hash()
    first = retail.ground_truth_calls(task)[0]
    assert first.name == "find_user_id_by_name_zip"
    assert retail.call_tool(a, first.name, first.args) == retail.call_tool(b, first.name, first.args)
    cancel = next(c for c in retail.ground_truth_calls(task) if c.name == "cancel_pending_order")
    out = json.loads(retail.call_tool(a, cancel.name, cancel.args))
    assert out["status"] == "cancelled"
    assert a.env.get_db_hash() != before
    assert b.env.get_db_hash() == before == retail.reset(task).env.get_db_hash()
    order = json.loads(retail.call_tool(b, "get_order_details", {"order_id": cancel.args["order_id"]}))
    assert order["status"] == "pending"


def _solve(env, task):
    state = env.reset(task)
    outs = []
    for c in env.ground_truth_calls(task):
        try:
            outs.append(env.call_tool(state, c.name, c.args))
        except ToolError as e:
            outs.append(e.message)
    return state, "Here is what I found:\n" + "\n".join(outs)


def test_score_matches_tau2s_environment_evaluator(retail):
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    def constructor(solo_mode: bool = False):
        return retail._fresh_env(retail._task(task))

    task = retail.get_task("retail_52")
    good, answer = _solve(retail, task)
    partial = retail.reset(task)
    calls = retail.ground_truth_calls(task)
    for c in calls[:-1]:           # everything but the final write
        retail.call_tool(partial, c.name, c.args)
    for state, expected in ((good, 1.0), (partial, 0.0)):
        info = retail.reward_info(task, state, answer)
        tau2 = EnvironmentEvaluator.calculate_reward(constructor, retail._task(task), state.trajectory)
        assert info["breakdown"]["DB"] == tau2.reward == expected
        assert retail.score(task, state, answer, []) == expected


def test_scoring_rules(retail):
    task = retail.get_task("retail_44")            # communicate_info: ["17.99"]
    state, answer = _solve(retail, task)
    assert retail.score(task, state, answer, []) == 1.0
    assert retail.score(task, state, None, []) == 0.0                  # no agent stop: tau2 scores 0
    assert retail.reward_info(task, state, "Done.")["breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}
    # what the agent told the customer through ask_user counts as communicated
    retail.call_tool(state, "ask_user", {"message": "The price difference is 17.99 dollars."})
    assert retail.score(task, state, "Done.", []) == 1.0


def test_scripted_user_answers_from_the_scenario(retail):
    task = retail.get_task("retail_43")
    scenario = retail._task(task).user_scenario.instructions
    state = retail.reset(task)
    first = retail.call_tool(state, "ask_user", {"message": "Hi! How can I help you today?"})
    assert scenario.reason_for_call.strip()[:60] in first and scenario.known_info.strip() in first
    assert retail.call_tool(state, "ask_user", {"message": "Could you give me your zip code?"}) == \
        scenario.known_info.strip()
    assert retail.call_tool(state, "ask_user", {"message": "Shall I proceed (yes/no)?"}) == "Yes, please go ahead."
    bye = retail.call_tool(state, "ask_user", {"message": "Done. Is there anything else I can help with?"})
    assert STOP in bye and state.user.stopped
    with pytest.raises(ToolError) as e:
        retail.call_tool(state, "ask_user", {"message": "Hello?"})
    assert e.value.kind == "tool_error"


def test_a_transferred_customer_cannot_be_asked(retail):
    state = retail.reset(retail.get_task("retail_43"))
    assert retail.call_tool(state, "transfer_to_human_agents", {"summary": "wants a refund"}) == "Transfer successful"
    with pytest.raises(ToolError, match="transferred"):
        retail.call_tool(state, "ask_user", {"message": "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT."})


def test_chat_model_user_uses_tau2s_prompt_with_roles_flipped(retail):
    task = retail._task(retail.get_task("retail_43"))
    model = ScriptedModel(["Hi, I want to exchange a keyboard.", f"Thanks, bye! {STOP}"])
    session = ChatModelUser(model).session(task.user_scenario)
    assert session.reply("Hi! How can I help you today?") == "Hi, I want to exchange a keyboard."
    assert not session.stopped
    session.reply("All done.")
    assert session.stopped
    system, *turns = model.calls[1]
    assert "User Simulation Guidelines" in system.content and "<scenario>" in system.content
    assert task.user_scenario.instructions.known_info in system.content
    assert [type(m).__name__ for m in turns] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert turns[0].content == "Hi! How can I help you today?"
    assert isinstance(ScriptedUser().session(task.user_scenario).reply("Hi"), str)


def test_specs_and_bad_input():
    assert get_environment("tau2:retail?user=scripted").user_spec == "scripted"
    env = get_environment("tau2:retail?user=openai:http://127.0.0.1:9/v1#m")
    assert env.user_spec == "openai:http://127.0.0.1:9/v1#m"
    bad_specs = ("tau2:", "tau2:telecom", "tau2:retail?user=", "tau2:retail?model=x", "tau2:retail?user=nonesuch",
                 "tau2:retail?user=openai:http://127.0.0.1:9/v1")
    for bad in bad_specs:   # rejected up front, before any rollout
        with pytest.raises(InputError):
            get_environment(bad)
    with pytest.raises(InputError):
        get_environment("tau2:retail").get_task("retail_9999")


def test_scoring_loads_no_llm_client():
    """A fresh interpreter scores an oracle rollout without importing an LLM client (litellm, tau2's
    registry, its NL-assertion judge or user simulator); also reports the import cost of the env."""
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from evoharness.envs import get_environment\n"
        "env = get_environment('tau2:retail'); task = env.get_task('retail_52'); s = env.reset(task)\n"
        "load = time.perf_counter() - t\n"
        "for c in env.ground_truth_calls(task): env.call_tool(s, c.name, c.args)\n"
        "print(env.score(task, s, 'done', []), round(load, 2))\n"
        "bad = [m for m in ('litellm', 'openai', 'tau2.registry', 'tau2.evaluator.evaluator_nl_assertions',"
        " 'tau2.user.user_simulator') if m in sys.modules]\n"
        "print(bad)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    score_line, bad_line = out.stdout.strip().splitlines()
    assert score_line.split()[0] == "1.0"
    assert bad_line == "[]"
    assert "No .env file found" not in out.stderr     # tau2's import-time logging is silenced


def test_agent_talks_to_the_customer_through_the_loop(tmp_path: Path, airline):
    """airline_0: the customer wants a refund the policy forbids; the right outcome is an untouched DB."""
    assert airline.ground_truth_calls(airline.get_task("airline_0")) == []
    greet = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "ask_user", "arguments": json.dumps({"message": "Hi! How can I help you today?"})}}]}
    agent = ScriptedModel([greet, "I am sorry, this reservation cannot be cancelled with a refund."])
    h = write_harness(tmp_path / "h", policies=ROOMY)
    traj = run_rollout(h, "tau2:airline", "airline_0", "scripted:oracle", seed=0, model=agent)
    reply = next(m for m in traj.messages if m["role"] == "tool")["content"]
    assert "cancel reservation EHGLP3" in reply                  # the scripted customer's opening
    assert traj.termination == Termination.delivered and traj.score == 1.0


def test_a_failing_customer_model_fails_the_rollout_with_the_reason(retail):
    class Down:
        def invoke(self, messages, tools=None):
            raise ConnectionError("user endpoint unreachable")

    task = retail.get_task("retail_43")
    state = retail.reset(task)
    state.user = ChatModelUser(Down()).session(retail._task(task).user_scenario)
    with pytest.raises(RuntimeError, match="tau2 user simulator failed: ConnectionError: user endpoint"):
        retail.call_tool(state, "ask_user", {"message": "Hi!"})


def test_repeated_cancellations_are_capped_before_the_db_explodes(airline):
    """tau2's cancel_reservation doubles the payment history on every repeat; a looping agent is stopped
    at the third, after tau2's own (score-deciding) behaviour for the second."""
    task = airline.get_task("airline_9")
    cancel = next(c for c in airline.ground_truth_calls(task) if c.name == "cancel_reservation")
    state = airline.reset(task)
    sizes = [len(json.loads(airline.call_tool(state, cancel.name, cancel.args))["payment_history"]) for _ in range(2)]
    assert sizes[1] == 2 * sizes[0]                       # tau2's behaviour, kept
    assert airline.score(task, state, "Cancelled.", []) == 0.0
    with pytest.raises(ToolError) as e:
        airline.call_tool(state, cancel.name, cancel.args)
    assert e.value.kind == "tool_error" and "refused" in e.value.message
    for other in airline.list_tasks("all"):               # no expected solution cancels one reservation twice
        ids = [c.args["reservation_id"] for c in airline.ground_truth_calls(other) if c.name == "cancel_reservation"]
        assert len(ids) == len(set(ids)), other.id
