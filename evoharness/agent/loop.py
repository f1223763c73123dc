"""The reference tool-calling agent: one rollout of a harness on one task with one model.

Per step: (checkpoint nudge) -> ``before_model`` -> model -> ``after_model`` -> for each tool
call: parse (repair if ``repair_tool_calls``) -> ``before_tool`` -> loop guard -> run ->
``after_tool``. A turn without tool calls ends the rollout: non-empty text is the final answer;
the exit gate and ``on_finish`` may push back once or twice first. ``max_steps`` model calls
at most (then ``step_budget``). Harness problems become a failed trajectory (``harness_error``).
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from typing import Any

from evoharness.agent.harness import Harness
from evoharness.agent.hooks import MAX_FINISH_PUSHBACKS, HookCrash, call_hook
from evoharness.agent.messages import plain_copy
from evoharness.agent.models import ChatModel, to_messages, to_openai
from evoharness.agent.repair import repair_arg_names, repair_json
from evoharness.envs.base import Environment, TaskSpec, ToolError
from evoharness.traces.models import Event, EventType, Termination, Usage

NUDGE = ("Checkpoint: you have used {steps} of {max_steps} steps. If you already have what you need, "
         "stop calling tools and reply with your final answer now.")
EXIT_GATE = ("Exit gate: you stopped without a final answer. Reply now with your final answer to the task "
             "as plain text (no tool call).")
LOOP_BLOCK = ("Blocked by loop guard: you already made this exact call {n} times. Do not repeat it; "
              "take a different step or reply with your final answer.")
FORMAT_ERROR = ("Error: the arguments of your call to `{name}` are not a valid JSON object: {raw!r}. "
                "Call the tool again with a JSON object of arguments.")


class RolloutResult:
    """What one run of the loop produced (the runner wraps it into a Trajectory)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.events: list[Event] = []
        self.final_answer: str | None = None
        self.termination = Termination.aborted
        self.usage = Usage()
        self.state: Any = None

    def event(self, kind: str, detail: str = "", **data: Any) -> None:
        step = max(len(self.messages) - 1, 0)
        self.events.append(Event(type=str(kind), step=step, detail=detail[:500], data=data))


def _canon(name: str, args: dict[str, Any]) -> str:
    return name + ":" + json.dumps(args, sort_keys=True, default=str)


class _Converted:
    """``to_messages`` for one rollout's model calls, each of which sends the whole conversation: the messages a
    call starts with that the previous call also started with (equal to a copy kept of them: a hook may return
    its own list, or change one it returned before) keep their converted messages, only the rest is converted.
    The model gets the same message objects for the same messages, call after call."""

    def __init__(self) -> None:
        self.raw: list[Any] = []  # copies of the messages last converted
        self.out: list[Any] = []

    def __call__(self, messages: list[Any]) -> list[Any]:
        same = 0
        for old, new in zip(self.raw, messages, strict=False):
            if old != new:
                break
            same += 1
        fresh = to_messages(messages[same:])
        self.raw = self.raw[:same] + plain_copy(messages[same:])
        self.out = self.out[:same] + fresh
        return list(self.out)


class _Copies:
    """What hooks are handed of the conversation, without a deep copy of all of it per hook call (quadratic over a
    rollout: 40 turns and a few hooks copied ~3,000 messages). It keeps one private copy of each message, made when the
    message is first handed out; each call gets a new list of those copies (a hook's own list: append, delete or
    reorder it freely), after the copies are compared with the conversation (C-level dict equality, no copying) and
    any that a hook edited in place -- then or through a reference it kept -- are copied afresh. So a hook that mutates
    what it is given changes neither the loop's conversation nor what a later hook is handed. The conversation may
    grow, and a message of it may even change: a copy is made of what is new or differs."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def __call__(self, messages: list[Any]) -> list[Any]:
        kept = self.kept
        del kept[len(messages):]
        for i, (mine, theirs) in enumerate(zip(kept, messages, strict=False)):
            if mine != theirs:
                kept[i] = copy.deepcopy(theirs)
        kept.extend(copy.deepcopy(m) for m in messages[len(kept):])
        return list(kept)


class Agent:
    def __init__(self, harness: Harness, env: Environment, model: ChatModel) -> None:
        self.h, self.env, self.model = harness, env, model

    def run(self, task: TaskSpec, result: RolloutResult) -> RolloutResult:
        """Run to the end, filling ``result`` as it goes (so a crash keeps what happened so far)."""
        start = time.monotonic()
        try:
            self._run(task, result)
        finally:
            result.usage.wall_seconds = round(time.monotonic() - start, 4)
        return result

    def _ctx(self, task: TaskSpec, r: RolloutResult, scratch: dict[str, Any]) -> dict[str, Any]:
        return {"step": r.usage.steps, "max_steps": self.h.policies["max_steps"], "task": task.prompt,
                "task_id": task.id, "policies": self.h.policies, "tools": sorted(self.schemas),
                "messages": self._ctx_messages(r.messages), "scratch": scratch}

    def _run(self, task: TaskSpec, r: RolloutResult) -> None:
        pol = self.h.policies
        r.state = self.env.reset(task)
        env_tools = self.env.tools(task)
        self.schemas = {t["function"]["name"]: t["function"] for t in env_tools}
        self.schemas.update({t.name: t.schema()["function"] for t in self.h.tools})
        harness_tools = {t.name: t for t in self.h.tools}
        tool_list = [{"name": n, "description": s.get("description", "")} for n, s in self.schemas.items()]
        all_schemas = env_tools + [t.schema() for t in self.h.tools]
        r.messages = [{"role": "system", "content": self.h.render_system(task.prompt, tool_list)},
                      {"role": "user", "content": task.prompt}]
        scratch: dict[str, Any] = {}
        converted = _Converted()
        # Two sets of copies: a before_model hook's payload and its ctx["messages"] are independent, as before.
        self._ctx_messages, payload = _Copies(), _Copies()
        counts: Counter[str] = Counter()
        pushbacks = 0
        hooks = self.h.hooks
        while True:
            if r.usage.steps >= pol["max_steps"]:
                r.event(EventType.budget_exhausted, f"{pol['max_steps']} steps used without a final answer")
                r.termination = Termination.step_budget
                return
            nudge = pol["checkpoint_nudge"]
            if nudge["enabled"] and r.usage.steps and r.usage.steps % nudge["every"] == 0 \
                    and r.messages[-1]["role"] != "user":
                r.messages.append({"role": "user", "content": NUDGE.format(steps=r.usage.steps,
                                                                           max_steps=pol["max_steps"])})
                r.event(EventType.middleware_action, "checkpoint nudge", action="checkpoint_nudge")
            send = r.messages
            for hk in hooks["before_model"]:
                given = payload(send) if send is r.messages else copy.deepcopy(send)  # another hook's list: rare
                new = call_hook(hk, given, self._ctx(task, r, scratch))
                if new is not None and new != send:
                    send = new
                    r.event(EventType.middleware_action, f"{hk.module}: before_model", hook=hk.name, module=hk.module)
            ai = self.model.invoke(converted(send), tools=all_schemas)
            r.usage.steps += 1
            um = getattr(ai, "usage_metadata", None) or {}
            r.usage.prompt_tokens += int(um.get("input_tokens", 0) or 0)
            r.usage.completion_tokens += int(um.get("output_tokens", 0) or 0)
            msg = to_openai(ai)
            for hk in hooks["after_model"]:
                new = call_hook(hk, copy.deepcopy(msg), self._ctx(task, r, scratch))
                if new is not None and new != msg:
                    msg = new
                    r.event(EventType.middleware_action, f"{hk.module}: after_model", hook=hk.name, module=hk.module)
            r.messages.append(msg)
            calls = msg.get("tool_calls") or []
            if not calls:
                answer = (msg.get("content") or "").strip() or None
                push = None
                if answer is None and pol["exit_gate"]["enabled"]:
                    push = EXIT_GATE
                for hk in hooks["on_finish"]:
                    out = call_hook(hk, answer, self._ctx(task, r, scratch))
                    if isinstance(out, str) and out.strip():
                        push = out
                if push and pushbacks < MAX_FINISH_PUSHBACKS:
                    pushbacks += 1
                    r.messages.append({"role": "user", "content": push})
                    r.event(EventType.middleware_action, "exit gate: pushed back", action="exit_gate")
                    continue
                r.final_answer = answer
                r.termination = Termination.delivered if answer is not None else Termination.aborted
                return
            for tc in calls:
                self._one_call(task, r, tc, counts, harness_tools, scratch)

    def _one_call(self, task: TaskSpec, r: RolloutResult, tc: dict[str, Any], counts: Counter[str],
                  harness_tools: dict[str, Any], scratch: dict[str, Any]) -> None:
        pol, hooks = self.h.policies, self.h.hooks
        fn = tc.get("function") or {}
        name, raw, call_id = fn.get("name") or "", fn.get("arguments") or "", tc.get("id") or ""

        def reply(text: str) -> None:
            r.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict) and pol["repair_tool_calls"]:
            args = repair_json(raw)
            if args is not None:
                r.event(EventType.middleware_action, f"repaired JSON arguments of {name}", action="repair_json",
                        call_id=call_id)
        if not isinstance(args, dict):
            r.event(EventType.format_rejected, f"{name}: arguments are not a JSON object", tool=name, raw=raw[:200],
                    call_id=call_id)
            reply(FORMAT_ERROR.format(name=name, raw=raw[:200]))
            return
        if name not in self.schemas:
            r.event(EventType.unknown_tool, f"no tool named {name!r}", tool=name, call_id=call_id)
            reply(f"Error: unknown tool `{name}`. Available tools: {', '.join(sorted(self.schemas))}.")
            return
        if pol["repair_tool_calls"]:
            args, renames = repair_arg_names(args, self.schemas[name])
            if renames:
                r.event(EventType.middleware_action, f"renamed arguments of {name}: {renames}",
                        action="repair_arg_names", renames=renames, call_id=call_id)
        call = {"id": call_id, "name": name, "arguments": args}
        for hk in hooks["before_tool"]:
            out = call_hook(hk, copy.deepcopy(call), self._ctx(task, r, scratch))
            if isinstance(out, str):
                r.event(EventType.blocked_call, f"{hk.module}: {out}", tool=name, module=hk.module, call_id=call_id)
                reply(out)
                return
            if isinstance(out, dict) and {**call, **out} != call:
                call = {**call, **out}
                r.event(EventType.middleware_action, f"{hk.module}: before_tool", hook=hk.name, module=hk.module)
        key = _canon(call["name"], call["arguments"])
        counts[key] += 1
        guard = pol["loop_guard"]
        if guard["enabled"] and counts[key] > guard["max_repeats"]:
            r.event(EventType.blocked_call, f"loop guard: {call['name']} repeated {counts[key]} times",
                    tool=call["name"], action="loop_guard", call_id=call_id)
            reply(LOOP_BLOCK.format(n=counts[key] - 1))
            return
        result = self._execute(r, call, harness_tools)
        for hk in hooks["after_tool"]:
            out = call_hook(hk, copy.deepcopy(call), result, self._ctx(task, r, scratch))
            if isinstance(out, str) and out != result:
                result = out
                r.event(EventType.middleware_action, f"{hk.module}: after_tool", hook=hk.name, module=hk.module)
        reply(result)

    def _execute(self, r: RolloutResult, call: dict[str, Any], harness_tools: dict[str, Any]) -> str:
        name, args = call["name"], call["arguments"]
        if name in harness_tools:
            try:
                return str(harness_tools[name].function(**args))
            except TypeError as e:
                r.event(EventType.invalid_arguments, f"{name}: {e}", tool=name)
                return f"Error: invalid arguments for `{name}`: {e}"
            except Exception as e:  # noqa: BLE001 -- a failing harness tool is a tool error the model sees
                r.event(EventType.tool_error, f"{name}: {type(e).__name__}: {e}", tool=name)
                return f"Error: {type(e).__name__}: {e}"
        try:
            return self.env.call_tool(r.state, name, args)
        except ToolError as e:
            kind = {"invalid_arguments": EventType.invalid_arguments,
                    "unknown_tool": EventType.unknown_tool}.get(e.kind, EventType.tool_error)
            r.event(kind, f"{name}: {e.message}", tool=name)
            return f"Error: {e.message}"


__all__ = ["Agent", "HookCrash", "RolloutResult"]
