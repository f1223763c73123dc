"""The reference agent loop driven by fixed scripted replies on the synthetic environment."""

from __future__ import annotations

from evoharness.agent.messages import AIMessage, HumanMessage, SystemMessage
from evoharness.agent.runner import run_rollout
from evoharness.agent.scripted import ScriptedModel
from evoharness.traces.models import Termination
from tests.agent.conftest import FORMAT_LESSON

TASK = "status_A-100"  # "What is the status of order A-100?" -> shipped


def call(name: str, args: str, cid: str = "c1") -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]}


def run(harness_dir, outputs, task=TASK):
    model = ScriptedModel(outputs)
    traj = run_rollout(harness_dir, "synthetic", task, "scripted:test", seed=0, harness_commit="abc", model=model)
    return traj, model


def kinds(traj) -> list[str]:
    return [e.type for e in traj.events]


def test_delivered_rollout_is_scored_and_recorded(harness):
    h = harness(lessons=FORMAT_LESSON)
    traj, model = run(h, [call("get_order", '{"order_id": "A-100"}'), "Order A-100 is shipped."])
    assert traj.termination == Termination.delivered and traj.score == 1.0
    assert traj.final_answer == "Order A-100 is shipped."
    assert [m["role"] for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert '"status": "shipped"' in traj.messages[3]["content"]
    assert traj.usage.steps == 2 and traj.harness_commit == "abc" and traj.task.startswith("What is the status")
    first = model.calls[0]
    assert isinstance(first[0], SystemMessage) and isinstance(first[1], HumanMessage)
    assert "JSON object" in first[0].content and "get_order" in first[0].content  # lessons and tools rendered


def test_malformed_call_is_rejected_then_repaired_by_policy(harness):
    bad = call("get_order", "{'order_id': 'A-100'}")
    traj, _ = run(harness("plain"), [bad, "I could not."])
    assert "format_rejected" in kinds(traj) and traj.score == 0.0
    traj, _ = run(harness("fixed", policies={"repair_tool_calls": True}), [bad, "It is shipped."])
    assert "format_rejected" not in kinds(traj) and "middleware_action" in kinds(traj)
    assert traj.score == 1.0


def test_wrong_argument_names_are_invalid_unless_repaired(harness):
    bad = call("get_order", '{"orderId": "A-100"}')
    traj, _ = run(harness("plain"), [bad, "no idea"])
    assert "invalid_arguments" in kinds(traj)
    traj, _ = run(harness("fixed", policies={"repair_tool_calls": True}), [bad, "shipped"])
    assert "invalid_arguments" not in kinds(traj) and traj.score == 1.0


def test_loop_guard_blocks_repeats(harness):
    same = [call("get_order", '{"order_id": "A-100"}', f"c{i}") for i in range(3)]
    traj, _ = run(harness(policies={"loop_guard": {"enabled": True, "max_repeats": 2}}), [*same, "shipped"])
    assert kinds(traj).count("blocked_call") == 1
    assert traj.messages[-2]["content"].startswith("Blocked by loop guard")


def test_step_budget_and_checkpoint_nudge(harness):
    loop = [call("list_orders", '{"customer": "Ada Lovelace"}', f"c{i}") for i in range(5)]
    traj, model = run(harness(policies={"max_steps": 5, "checkpoint_nudge": {"enabled": True, "every": 2}}), loop)
    assert traj.termination == Termination.step_budget and traj.final_answer is None
    assert "budget_exhausted" in kinds(traj)
    nudges = [m for m in traj.messages if m["role"] == "user" and m["content"].startswith("Checkpoint")]
    assert len(nudges) == 2
    assert any("final answer" in str(m.content) for m in model.calls[2])


def test_empty_ending_is_not_delivery_and_exit_gate_pushes_back(harness):
    traj, _ = run(harness("plain"), [call("get_order", '{"order_id": "A-100"}'), ""])
    assert traj.final_answer is None and traj.termination == Termination.aborted and traj.score == 0.0
    gated = harness("gated", policies={"exit_gate": {"enabled": True}})
    traj, _ = run(gated, [call("get_order", '{"order_id": "A-100"}'), "", "shipped"])
    assert traj.final_answer == "shipped" and traj.score == 1.0
    assert any(m["content"].startswith("Exit gate") for m in traj.messages if m["role"] == "user")


def test_unknown_tool_and_harness_tool(harness):
    tool = 'def shout(text: str) -> str:\n    """Upper-case a text."""\n    return text.upper()\n\nTOOLS = [shout]\n'
    h = harness(files={"tools/shout.py": tool})
    traj, model = run(h, [call("teleport", "{}"), call("shout", '{"text": "hi"}', "c2"), "done"])
    assert "unknown_tool" in kinds(traj)
    assert traj.messages[5]["content"] == "HI"
    assert "shout" in model.calls[0][0].content


def test_middleware_hooks_rewrite_and_block(harness):
    mw = '''
import ast, json

def after_model(message, ctx):
    for tc in message.get("tool_calls") or []:
        try:
            json.loads(tc["function"]["arguments"])
        except ValueError:
            tc["function"]["arguments"] = json.dumps(ast.literal_eval(tc["function"]["arguments"]))
    return message

def before_tool(call, ctx):
    if call["name"] == "send_message":
        return "Blocked: sending is disabled in this harness."
    return None

def on_finish(answer, ctx):
    ctx["scratch"]["n"] = ctx["scratch"].get("n", 0) + 1
    return "Say the status." if answer is None and ctx["scratch"]["n"] == 1 else None
'''
    h = harness(files={"middleware/fix.py": mw, "middleware/noop.py": "def hook(event):\n    return None\n"})
    outs = [call("get_order", "{'order_id': 'A-100'}"), call("send_message", '{"to": "x", "body": "y"}', "c2"), "",
            "shipped"]
    traj, _ = run(h, outs)
    assert "format_rejected" not in kinds(traj)
    assert "blocked_call" in kinds(traj) and traj.score == 1.0
    assert traj.messages[-2] == {"role": "user", "content": "Say the status."}


def test_missing_optional_files_take_defaults(harness):
    h = harness(prompt=None)
    (h / "lessons.md").unlink()
    traj, model = run(h, [AIMessage("nothing")])
    assert traj.termination == Termination.delivered
    assert "at most 12 steps" in model.calls[0][0].content


def test_repair_gives_up_on_garbage(harness):
    from evoharness.agent.repair import repair_arg_names, repair_json

    assert repair_json("{'a': 1, 'b': [True, None]}") == {"a": 1, "b": [True, None]}
    assert repair_json('{"a": "x"') == {"a": "x"}
    assert repair_json("call get_order now") is None
    schema = {"parameters": {"properties": {"order_id": {}, "note": {}}}}
    fixed, renames = repair_arg_names({"orderId": "A", "zzz": 1}, schema)
    assert fixed == {"order_id": "A", "zzz": 1} and renames == {"orderId": "order_id"}
    traj, _ = run(harness(policies={"repair_tool_calls": True}), [call("get_order", "get A-100 please"), "?"])
    assert [e.type for e in traj.events] == ["format_rejected"]


def test_hooks_that_mutate_what_they_are_given_never_change_the_loops_conversation(harness):
    # Each hook checks that it is handed the true conversation, then vandalises its payload and ctx["messages"]
    # (nested dicts, the lists, and a message kept from an earlier call and edited later). A vandalism that
    # reached the loop's state would show in the recorded trajectory, in what the model was sent, or in what a
    # later hook is handed (the hook raises: a harness_error, not a delivered rollout).
    mw = '''
MARK = "VANDALISED"

def _clean(where, messages):
    if MARK in repr(messages):
        raise AssertionError(where + " was handed an edit a hook made to its own copy")

def before_model(messages, ctx):
    _clean("before_model payload", messages)
    _clean("before_model ctx", ctx["messages"])
    if ctx["messages"] != messages:
        raise AssertionError("ctx messages differ from what is about to be sent")
    for kept in ctx["scratch"].get("kept", []):
        kept["content"] = MARK  # a message dict kept from an earlier call
    ctx["scratch"]["kept"] = [ctx["messages"][-1], messages[0]]
    messages[0]["content"] = MARK
    messages.append({"role": "user", "content": MARK})
    ctx["messages"][1]["content"] = MARK
    ctx["messages"].append({"role": "user", "content": MARK})
    return None

def after_model(message, ctx):
    _clean("after_model ctx", ctx["messages"])
    for m in ctx["messages"]:
        for tc in m.get("tool_calls") or []:
            tc["function"]["arguments"] = MARK
        m["content"] = MARK
    ctx["messages"].clear()
    return None

def before_tool(call, ctx):
    _clean("before_tool ctx", ctx["messages"])
    ctx["messages"][-1]["tool_calls"][0]["function"]["name"] = MARK
    del ctx["messages"][0]
    return None

def after_tool(call, result, ctx):
    _clean("after_tool ctx", ctx["messages"])
    ctx["messages"][-1]["content"] = MARK
    return None

def on_finish(answer, ctx):
    _clean("on_finish ctx", ctx["messages"])
    ctx["messages"][-1]["content"] = MARK
    return None
'''
    h = harness(files={"middleware/vandal.py": mw})
    traj, model = run(h, [call("get_order", '{"order_id": "A-100"}'), call("get_order", '{"order_id": "B-2"}', "c2"),
                          "It shipped."])
    assert traj.termination == Termination.delivered and traj.score == 1.0, [e.detail for e in traj.events]
    assert "VANDALISED" not in repr(traj.messages)
    assert all("VANDALISED" not in repr(m.content) + repr(getattr(m, "tool_calls", "")) for c in model.calls for m in c)
    assert [m["role"] for m in traj.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                   "assistant"]
