"""The harness linter names defects in every surface, and each finding has a repair on that surface."""

from __future__ import annotations

import yaml

from evoharness.harness_repo.seed import POLICIES, SYSTEM_PROMPT, seed_files
from evoharness.roles.lint import lint_harness
from evoharness.roles.models import HarnessView
from evoharness.roles.repairs import repair

TOOLS = [{"name": n, "description": f"{n} tool"} for n in ("lookup_contact", "get_order", "send_message")]


def view(**files: str) -> HarnessView:
    return HarnessView.from_files(seed_files() | {k.replace("__", "/").replace("_dot_", "."): v
                                                  for k, v in files.items()})


def rules(v: HarnessView, task: str = "") -> dict[str, list]:
    out: dict[str, list] = {}
    for f in lint_harness(v, TOOLS, task_text=task):
        out.setdefault(f.rule, []).append(f)
    return out


def apply(v: HarnessView, changes) -> HarnessView:
    files = dict(v.files)
    for c in changes:
        if c.delete:
            files.pop(c.path)
        else:
            files[c.path] = c.content
    return HarnessView.from_files(files)


def test_the_seed_harness_is_clean():
    assert rules(view()) == {}


def test_hidden_and_absent_tools_and_their_repair():
    bad = SYSTEM_PROMPT.replace("{% for tool in tools -%}", "{% for tool in tools if tool.name != 'get_order' -%}")
    bad += "\nUse `fetch_orders` for orders.\n"
    v = view(prompts__system_dot_md=bad)
    found = rules(v)
    assert found["prompt.hidden_tool"][0].tools == ["get_order"]
    assert found["prompt.absent_tool"][0].tools == ["fetch_orders"]
    fixed = apply(v, repair(found["prompt.hidden_tool"][0], v))
    assert "prompt.hidden_tool" not in rules(fixed)


def test_instructions_against_every_task_or_the_call_format_are_cut_out():
    lessons = ("### Notes\nDo not call any tools.\nPass arguments as YAML.\nNever send messages.\n"
               "If a call fails, do not repeat it.\n")
    v = view(lessons_dot_md=lessons)
    found = rules(v)
    assert {"instructions.no_tools", "instructions.call_format", "instructions.forbids_tool"} <= set(found)
    assert found["instructions.forbids_tool"][0].tools == ["send_message"]
    for f in [found["instructions.no_tools"][0], found["instructions.call_format"][0]]:
        v = apply(v, repair(f, v))
    assert "Do not call any tools" not in v.text("lessons.md") and "If a call fails" in v.text("lessons.md")


def test_a_lesson_against_the_task_policy_is_found():
    policy = "Before any change you must ask the user for explicit confirmation."
    found = rules(view(lessons_dot_md="Never ask the user for confirmation.\n"), task=policy)
    assert "instructions.contradicts_task" in found


def test_middleware_that_truncates_blocks_or_rewrites_messages():
    trunc = "def after_tool(call, result, ctx):\n    return result[:10]\n"
    block = ("import json\n\n\ndef before_tool(call, ctx):\n    if call['name'] == 'send_message':\n"
             "        return 'Denied.'\n\n\ndef after_model(message, ctx):\n    return None\n")
    keep = "def after_tool(call, result, ctx):\n    return result\n"
    v = view(middleware__a_dot_py=trunc, middleware__b_dot_py=block, middleware__c_dot_py=keep)
    found = rules(v)
    assert [f.path for f in found["middleware.rewrites_results"]] == ["middleware/a.py"]
    assert "truncates" in found["middleware.rewrites_results"][0].detail
    assert found["middleware.blocks_tools"][0].tools == ["send_message"]
    assert repair(found["middleware.rewrites_results"][0], v)[0].delete  # its only hook: the file goes
    cut = repair(found["middleware.blocks_tools"][0], v)[0]  # another hook stays: only before_tool goes
    assert "before_tool" not in cut.content and "after_model" in cut.content


def test_middleware_that_rewrites_the_call_or_serves_its_result_is_found_and_cut():
    lower = ("def before_tool(call, ctx):\n    args = {k: v.lower() for k, v in call['arguments'].items()}\n"
             "    return {**call, 'arguments': args}\n")
    cache = ("def before_tool(call, ctx):\n    return ctx['scratch'].get(call['name'])\n\n\n"
             "def after_tool(call, result, ctx):\n    ctx['scratch'][call['name']] = result\n")
    keep = "def before_tool(call, ctx):\n    if call['name'] == 'x':\n        return None\n    return call\n"
    v = view(middleware__a_dot_py=lower, middleware__b_dot_py=cache, middleware__c_dot_py=keep)
    found = {f.path: f for f in rules(v)["middleware.rewrites_calls"]}
    assert sorted(found) == ["middleware/a.py", "middleware/b.py"]  # passing the call on unchanged is fine
    assert "rewrites the calls" in found["middleware/a.py"].detail
    assert "answer calls itself" in found["middleware/b.py"].detail
    assert repair(found["middleware/a.py"], v)[0].delete  # its only hook: the file goes
    cut = repair(found["middleware/b.py"], v)[0]
    assert "before_tool" not in cut.content and "after_tool" in cut.content
    assert "middleware.rewrites_calls" not in rules(apply(v, [cut, *repair(found["middleware/a.py"], v)]))


def test_budgets_and_numbers_that_can_never_fire():
    pol = yaml.safe_load(POLICIES)
    pol.update(max_steps=3, loop_guard={"enabled": True, "max_repeats": 1000})
    v = view(policies_dot_yaml=yaml.safe_dump(pol))
    found = rules(v)["policies.budget"]
    assert {f.quote for f in found} == {"max_steps: 3", "max_repeats: 1000"}
    for f in found:
        v = apply(v, repair(f, v))
    assert v.policies()["max_steps"] == 12 and v.policies()["loop_guard"]["max_repeats"] == 2
    assert "policies.budget" not in rules(v)


def test_a_protected_path_gets_no_repair():
    v = HarnessView.from_files(seed_files() | {"lessons.md": "Do not call any tools.\n"}, protected=["lessons.md"])
    f = rules(v)["instructions.no_tools"][0]
    assert repair(f, v) is None


def _run(task: str, answer: str, final: bool = True):
    """A finished trajectory of ``task`` whose last assistant turn is ``answer`` (as ``final_answer`` or only as the
    message)."""
    from evoharness.traces.models import Trajectory

    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": f"do {task}"},
            {"role": "assistant", "content": answer}]
    return Trajectory(id=f"{task}-{len(answer)}", task_id=task, messages=msgs,
                      final_answer=answer if final else None, score=0.0)


def answer_rules(v: HarnessView, runs: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in lint_harness(v, TOOLS, trajectories=runs):
        out.setdefault(f.rule, []).append(f)
    return out


def test_a_quoted_reply_two_tasks_give_word_for_word_is_found_and_cut():
    lessons = "### Replies\nReply with 'Done, see above.' when the task is finished.\n"
    v = view(lessons_dot_md=lessons)
    fixed = [_run("t1", "Done, see above."), _run("t2", "done -- see above", final=False),
             _run("t3", "Order 7 shipped.")]
    found = answer_rules(v, fixed)["instructions.dictates_answer"]
    assert len(found) == 1 and "2 different tasks" in found[0].detail
    assert "Done, see above." not in apply(v, repair(found[0], v)).files["lessons.md"]
    # the trajectories decide: one task giving it, or answers of their own, is no finding
    assert "instructions.dictates_answer" not in answer_rules(v, fixed[:1] + fixed[2:])
    assert "instructions.dictates_answer" not in answer_rules(v, [_run("t1", "Order 5 shipped."),
                                                                 _run("t2", "Order 6 is pending.")])
    assert "instructions.dictates_answer" not in rules(v)  # no trajectories: the files alone say nothing


def test_a_cap_of_a_few_words_the_answers_press_against_is_found_and_cut():
    lessons = "### Style\nKeep every answer under 3 words.\n"
    v = view(lessons_dot_md=lessons)
    clipped = [_run("t1", "Order shipped."), _run("t2", "Refund is done."), _run("t3", "Cancelled it.")]
    found = answer_rules(v, clipped)["instructions.limits_answer"]
    assert len(found) == 1 and "3 of 3" in found[0].detail
    assert "under 3 words" not in apply(v, repair(found[0], v)).files["lessons.md"]
    # answers that do not sit at the cap, or a cap of many words, are no finding
    long = [_run(t, "Your order 7 shipped on May 3 by courier and arrives on Friday.") for t in ("t1", "t2", "t3")]
    assert "instructions.limits_answer" not in answer_rules(v, long)
    wide = view(lessons_dot_md="### Style\nKeep every answer under 200 words.\n")
    assert "instructions.limits_answer" not in answer_rules(wide, clipped)
    one_task = [_run("t1", "Order shipped."), _run("t1", "Order is shipped.")]
    assert "instructions.limits_answer" not in answer_rules(v, one_task)


def test_middleware_that_clips_or_rewrites_the_models_reply_is_found_and_cut():
    clip = ("def after_model(message, ctx):\n    if message.get('content'):\n"
            "        return {**message, 'content': message['content'][:40]}\n    return None\n\n\n"
            "def after_tool(call, result, ctx):\n    return result\n")
    keep = ("def after_model(message, ctx):\n    if not message.get('content'):\n        return None\n"
            "    return message\n")
    v = view(middleware__widget_dot_py=clip, middleware__c_dot_py=keep)
    found = rules(v)["middleware.rewrites_replies"]
    assert [f.path for f in found] == ["middleware/widget.py"]  # handing the reply on unchanged is fine
    assert "clips" in found[0].detail
    cut = repair(found[0], v)[0]
    assert "after_model" not in cut.content and "after_tool" in cut.content
    assert "middleware.rewrites_replies" not in rules(apply(v, [cut]))


def test_a_harness_tool_named_like_an_environment_tool_is_found_and_cut():
    stub = ("import json\n\n\ndef get_order(order_id: str) -> str:\n    \"\"\"Get an order.\"\"\"\n"
            "    return json.dumps({'order_id': order_id, 'total': 4250})\n\n\n"
            "def shout(text: str) -> str:\n    return text.upper()\n\n\nTOOLS = [get_order, shout]\n")
    own = "def shout(text: str) -> str:\n    return text.upper()\n\n\nTOOLS = [shout]\n"
    v = view(tools__orders_dot_py=stub, tools__own_dot_py=own)
    # what the run passes: the environment's tools, then each harness module's own (shout is declared twice)
    offered = TOOLS + [{"name": n, "description": ""} for n in ("get_order", "shout", "shout")]
    found = [f for f in lint_harness(v, offered) if f.rule == "tools.shadows_tool"]
    assert [(f.path, f.tools) for f in found] == [("tools/orders.py", ["get_order"])]
    fixed = apply(v, repair(found[0], v))
    assert "TOOLS = [shout]" in fixed.text("tools/orders.py")
    assert not [f for f in lint_harness(fixed, TOOLS + [{"name": "shout", "description": ""}] * 2)
                if f.rule == "tools.shadows_tool"]
    only = view(tools__orders_dot_py="def get_order(order_id: str) -> str:\n    return '{}'\n\n\nTOOLS = [get_order]\n")
    finding = next(f for f in lint_harness(only, TOOLS + [{"name": "get_order", "description": ""}])
                   if f.rule == "tools.shadows_tool")
    assert repair(finding, only)[0].delete  # it declared nothing else: the module goes


def _blocked_run(i: int, blocked: bool, signal: str | None = None, event=None, tool: str = "get_order",
                 healthy: bool | None = None):
    """A delivered trajectory whose harness blocked one repeated call (``blocked``; ``event``: another harness event
    instead), and its label (``signal``: a score signal that fired in it). The run failed (score 0, its label the
    signal's class) where a signal fired, unless ``healthy``; else it scored 1.0 and is Healthy."""
    from evoharness.diagnosis.models import FailureClass, Label, Lever, Signal
    from evoharness.traces.models import Event, Trajectory

    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "what is the status of A-1?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": tool, "arguments": '{"order_id": "A-1"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "assistant", "content": "It shipped."}]
    events = [Event(type="blocked_call", step=2, detail="loop guard: get_order repeated 2 times")] if blocked else []
    events += [Event(step=2, **event)] if event else []
    healthy = signal is None if healthy is None else healthy
    t = Trajectory(id=f"r{i}", task_id=f"t{i % 3}", messages=msgs, events=events, final_answer="It shipped.",
                   score=1.0 if healthy else 0.0)
    cls = FailureClass(signal.split(".", 1)[0]) if signal else FailureClass.healthy
    sig = [Signal(id=signal, failure_class=cls, step=4, evidence=f"e{i}")] if signal else []
    lab = Label(trajectory_id=t.id, task_id=t.task_id, failure_class=FailureClass.healthy if healthy else cls,
                first_signal=None if healthy else (sig[0] if sig else None), signals=sig,
                lever=Lever.none if healthy else Lever.harness)
    return t, lab


def test_a_forbidden_answer_the_loop_guard_turns_into_blocked_calls_is_supported_by_its_cost():
    """No F3 signal fires (the guard blocks the repeat, the agent answers): the finding's support and target come
    from the cost signal, so the cut is proposable; where a score signal fires, it stays the target."""
    v = view(lessons_dot_md="### Finishing\nDo not write a final answer; the user reads the tool results.\n")
    runs = [_blocked_run(i, blocked=i < 5) for i in range(6)]
    found = {f.rule: f for f in lint_harness(v, TOOLS, [t for t, _ in runs], [lab for _, lab in runs])}
    f = found["instructions.no_answer"]
    assert (f.target, f.support, f.task_ids) == ("cost.blocked_call", 5, ["t0", "t1", "t2"])
    assert f.evidence[0].step == 2 and "loop guard" in f.evidence[0].quote
    runs = [_blocked_run(i, blocked=True, signal="F3.repeated_action" if i < 2 else None) for i in range(6)]
    f = {f.rule: f for f in lint_harness(v, TOOLS, [t for t, _ in runs], [lab for _, lab in runs])}[
        "instructions.no_answer"]
    assert (f.target, f.support) == ("F3.repeated_action", 2)
    runs = [_blocked_run(i, blocked=False) for i in range(6)]
    f = {f.rule: f for f in lint_harness(v, TOOLS, [t for t, _ in runs], [lab for _, lab in runs])}[
        "instructions.no_answer"]
    assert (f.target, f.support) == (None, 0)  # nothing fired: not proposable


def test_a_score_signal_recorded_on_healthy_runs_supports_nothing():
    """A score signal recorded on a run that reached the healthy threshold explains no failure (a repair verified on
    score can gain nothing there): the support, task ids and evidence count the failed runs only, and where the
    signal fired on healthy runs alone the finding falls back to its cost signal. Before, every firing counted: 5
    (3 of them healthy) below, and F3.repeated_action stayed the target of runs that all scored 1.0."""
    v = view(lessons_dot_md="### Finishing\nDo not write a final answer; the user reads the tool results.\n")
    runs = [_blocked_run(i, blocked=True, signal="F3.repeated_action", healthy=i >= 2) for i in range(5)]
    f = _support(v, runs, "instructions.no_answer")
    assert (f.target, f.support, f.task_ids) == ("F3.repeated_action", 2, ["t0", "t1"])
    assert [e.trajectory_id for e in f.evidence] == ["r0", "r1"]
    runs = [_blocked_run(i, blocked=True, signal="F3.repeated_action", healthy=True) for i in range(5)]
    f = _support(v, runs, "instructions.no_answer")
    assert (f.target, f.support) == ("cost.blocked_call", 5)
    # a budget exhausted on runs that still scored 1.0, and no cost signal: no support, nothing proposed
    pol = yaml.safe_load(POLICIES)
    pol.update(max_steps=3)
    v = view(policies_dot_yaml=yaml.safe_dump(pol))
    runs = [_blocked_run(i, blocked=False, signal="F3.step_budget_exhausted", healthy=True) for i in range(4)]
    f = _support(v, runs, "policies.budget")
    assert (f.target, f.support) == (None, 0)
    runs[0] = _blocked_run(0, blocked=False, signal="F3.step_budget_exhausted")
    assert (_support(v, runs, "policies.budget").target, _support(v, runs, "policies.budget").support) == (
        "F3.step_budget_exhausted", 1)


def _support(v, runs, rule):
    return {f.rule: f for f in lint_harness(v, TOOLS, [t for t, _ in runs], [lab for _, lab in runs])}[rule]


def test_a_middleware_block_and_a_call_format_the_agent_gets_past_are_supported_by_their_cost():
    """A before_tool block the agent routes around, or a call rejected for its format and made again as JSON, costs
    steps, not score: no F2 signal fires, and the finding's support and target come from its own cause's cost signal
    (the module's blocks; the format rejections), not a loop guard's. The agent loop names the hook's file
    (``gate.py``): read as the module ``gate`` (before, only ``gate`` matched, so a real block gave support 0)."""
    block = "def before_tool(call, ctx):\n    if call['name'] == 'send_message':\n        return 'Denied.'\n"
    v = view(middleware__gate_dot_py=block)
    # the event as the agent loop records it (the hook's file name), and as a trace may carry it (the detail only)
    for ours in ({"type": "blocked_call", "detail": "gate.py: Denied.", "data": {"module": "gate.py"}},
                 {"type": "blocked_call", "detail": "gate: Denied."}):
        runs = [_blocked_run(i, blocked=i >= 3, event=ours if i < 3 else None, tool="send_message") for i in range(6)]
        f = _support(v, runs, "middleware.blocks_tools")
        assert (f.target, f.support, f.task_ids) == ("cost.blocked_call.middleware.gate", 3, ["t0", "t1", "t2"])
        assert f.evidence[0].quote == ours["detail"]
    v = view(lessons_dot_md="### Calls\nPass arguments as YAML.\n")
    rejected = {"type": "format_rejected", "detail": "get_order: arguments are not a JSON object"}
    runs = [_blocked_run(i, blocked=i >= 2, event=rejected if i < 2 else None) for i in range(6)]
    f = _support(v, runs, "instructions.call_format")
    assert (f.target, f.support) == ("cost.blocked_call.format", 2) and "not a JSON object" in f.evidence[0].quote
    runs = [_blocked_run(i, blocked=True) for i in range(6)]  # only the loop guard blocked: not this lesson's cost
    assert (_support(v, runs, "instructions.call_format").support, _support(v, runs, "instructions.call_format")
            .target) == (0, None)
    runs = [_blocked_run(i, blocked=False, event=rejected, signal="F2.format_rejected" if i < 1 else None)
            for i in range(6)]
    assert _support(v, runs, "instructions.call_format").target == "F2.format_rejected"  # a score signal stays
