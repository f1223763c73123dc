"""Scripted chat models shipped in the package. They are OFFLINE STAND-INS, not real models.

``ScriptedModel(outputs=[...])`` replays fixed replies (``AIMessage``, a string = a text reply,
or an OpenAI assistant dict), for unit tests. Running past the script raises ``ScriptExhausted``.

``WeakScriptedModel(seed)`` (model spec ``scripted:weak``) imitates the *process* failures of a
small model on a task whose reference solution it is given (``bind_task(task, ground_truth)``:
the environment's ground-truth tool calls). Its intended actions are those calls; it corrupts
them by the seeded failure modes below. Every random draw is made up front from
``sha256("weak:{seed}:{task_id}:{rollout}")``, so the same seed makes the same choices under any
harness, and a harness change only changes how the model *reacts*. ``scripted:oracle`` is the
same model with every rate 0 (follows the ground truth, delivers the tool results).

Process failure modes (each reads a harness signal a real model would see):

=================  ==============================================  ======================================
mode (rate)        what it does                                    harness signal that repairs it
=================  ==============================================  ======================================
malformed (0.30    each tool call independently: half the time     a system prompt (lessons) that says
per call; 0.08     Python-literal arguments (not JSON), half the   to pass tool arguments as JSON (regex
with a format      time one argument under a wrong name. After a   ``json`` and ``argument|parameter``)
lesson)            rejection it fixes the call with p=0.35 per     lowers the rate; ``repair_tool_calls``
                   try, else resends the same malformed call.      (or repair middleware) fixes the call.
repeat (0.25 per   after one intended call succeeds, resends the   a tool result saying "blocked" (loop
rollout)           identical call every step.                      guard) or a user message asking for the
                                                                   "final answer" (nudge): it moves on.
stall (0.25 per    after the last action, keeps re-checking with   a user message asking for the "final
rollout)           read-only calls instead of answering.           answer" (checkpoint nudge), or a block.
forget (0.25 per   ends with an empty message (no final answer).   a user message asking for the "final
rollout)                                                           answer" (exit gate): it delivers.
=================  ==============================================  ======================================

Content failure modes (no harness fixes them; the draws ignore the harness):

- wrong_args (0.15 per rollout): one argument of one intended call is wrong (a date shifted by a
  day, a string altered, a number off by one) -- the call "succeeds" on the wrong thing.
- wrong_answer (0.15 per rollout): the final answer is a vague summary that quotes no tool result.

A delivered answer otherwise is ``"Here is what I found:"`` followed by the successful tool results.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from evoharness.agent.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from evoharness.agent.models import to_messages
from evoharness.envs.base import TaskSpec, ToolCallSpec

WEAK_RATES: dict[str, float] = {
    "malformed": 0.30, "malformed_with_lesson": 0.08, "fix_after_rejection": 0.35,
    "repeat": 0.25, "stall": 0.25, "forget": 0.25, "wrong_args": 0.15, "wrong_answer": 0.15,
}
ORACLE_RATES: dict[str, float] = {k: 0.0 for k in WEAK_RATES} | {"fix_after_rejection": 1.0}
FORMAT_LESSON = re.compile(r"json", re.I), re.compile(r"argument|parameter", re.I)
READ_ONLY = re.compile(r"^(get|search|list|read|find|check|lookup|look_up)_?", re.I)
VAGUE_ANSWER = "I looked into this and took care of the request."


class ScriptExhausted(RuntimeError):
    """A ScriptedModel was asked for more replies than it was given."""


class ScriptedModel:
    """Deterministic fixed replies, in order. ``calls`` records the messages each invoke saw."""

    def __init__(self, outputs: list[AIMessage | str | dict[str, Any]]) -> None:
        self.outputs = list(outputs)
        self.calls: list[list[BaseMessage]] = []

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        self.calls.append(list(messages))
        if len(self.calls) > len(self.outputs):
            raise ScriptExhausted(f"script of {len(self.outputs)} replies exhausted")
        out = self.outputs[len(self.calls) - 1]
        if isinstance(out, str):
            return AIMessage(out)
        if isinstance(out, dict):
            msg = to_messages([out])[0]
            assert isinstance(msg, AIMessage)
            return msg
        return out


def perturb_one_argument(actions: list[ToolCallSpec], wrong_args: bool, rng: random.Random) -> None:
    """A wrong-argument mistake: one argument of one action (in a seeded order) changed in place.

    The order is drawn whether or not the mistake is made, so later draws do not depend on it."""
    order = list(range(len(actions)))
    rng.shuffle(order)
    if not wrong_args:
        return
    for i in order:
        keys = sorted(actions[i].args)
        if keys:
            k = keys[rng.randrange(len(keys))]
            new, ok = _perturb(actions[i].args[k])
            if ok:
                actions[i].args[k] = new
                return


def _perturb(value: Any) -> tuple[Any, bool]:
    if isinstance(value, bool) or value is None:
        return value, False
    if isinstance(value, (int, float)):
        return value + 1, True
    if isinstance(value, str):
        m = re.fullmatch(r"(\d{4}-\d{2}-)(\d{2})(.*)", value)
        if m:
            day = int(m.group(2))
            return f"{m.group(1)}{(day % 28) + 1:02d}{m.group(3)}", True
        if "@" in value:
            return "x" + value, True
        return value + " (2)", True
    if isinstance(value, list) and value:
        first, ok = _perturb(value[0])
        return [first, *value[1:]], ok
    return value, False


def _wrong_name(key: str) -> str:
    parts = key.split("_")
    return parts[0] + "".join(p.title() for p in parts[1:]) if len(parts) > 1 else key + "_value"


@dataclass
class _Plan:
    actions: list[ToolCallSpec]
    u_malformed: list[float]
    u_kind: list[float]
    u_fix: list[float]
    repeat_at: int | None
    stall: bool
    forget: bool
    wrong_answer: bool
    stall_calls: list[ToolCallSpec] = field(default_factory=list)


class WeakScriptedModel:
    """The seeded weak model (see the module docstring). One instance per rollout."""

    def __init__(self, seed: int = 0, rates: dict[str, float] | None = None, name: str = "scripted:weak") -> None:
        self.seed, self.name = seed, name
        self.rates = {**WEAK_RATES, **(rates or {})}
        self.plan: _Plan | None = None

    # ---- set-up ---------------------------------------------------------------------------

    def bind_task(self, task: TaskSpec, ground_truth: list[ToolCallSpec], rollout: int = 0) -> None:
        digest = hashlib.sha256(f"weak:{self.seed}:{task.id}:{rollout}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        n, r = len(ground_truth), self.rates
        actions = [ToolCallSpec(name=c.name, args=json.loads(json.dumps(c.args, default=str))) for c in ground_truth]
        u_mal, u_kind = [rng.random() for _ in range(n)], [rng.random() for _ in range(n)]
        u_fix = [rng.random() for _ in range(64)]
        repeat = rng.random() < r["repeat"]
        repeat_at = rng.randrange(n) if n else None
        stall, forget = rng.random() < r["stall"], rng.random() < r["forget"]
        wrong_args, wrong_answer = rng.random() < r["wrong_args"], rng.random() < r["wrong_answer"]
        perturb_one_argument(actions, wrong_args, rng)
        stall_calls = [a for a in actions if READ_ONLY.match(a.name)]
        self.plan = _Plan(actions, u_mal, u_kind, u_fix, repeat_at if repeat else None,
                          stall and bool(stall_calls), forget, wrong_answer, stall_calls)
        self.i = 0                    # next intended action
        self.pending: dict[str, Any] | None = None   # last emitted call: {"id","action","malformed"}
        self.looping = False
        self.stall_n = self.fix_n = self.call_n = 0
        self.forgot = False
        self.lesson: bool | None = None

    # ---- reading the conversation ---------------------------------------------------------

    @staticmethod
    def _since_last_turn(messages: list[BaseMessage]) -> list[BaseMessage]:
        for j in range(len(messages) - 1, -1, -1):
            if isinstance(messages[j], AIMessage):
                return messages[j + 1:]
        return []

    def invoke(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None = None) -> AIMessage:
        if self.plan is None:
            raise RuntimeError("WeakScriptedModel needs bind_task(task, ground_truth) before invoke")
        if self.lesson is None:
            system = " ".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
            self.lesson = all(p.search(system) for p in FORMAT_LESSON)
        new = self._since_last_turn(messages)
        told = any(isinstance(m, HumanMessage) and "final answer" in str(m.content).lower() for m in new)
        replies = {m.tool_call_id: str(m.content) for m in new if isinstance(m, ToolMessage)}
        p, plan = self.pending, self.plan
        reply = replies.get(p["id"], "") if p else ""
        blocked = "blocked" in reply.lower()
        failed = reply.startswith("Error")

        if p is not None and p["malformed"] and (failed or blocked) and not told:
            # it tried a malformed call and was told so: fix it, or stubbornly resend it
            fix = plan.u_fix[self.fix_n % len(plan.u_fix)] < self.rates["fix_after_rejection"]
            self.fix_n += 1
            return self._emit(p["action"], malformed=not fix, kind=p["kind"])
        if p is not None and p["phase"] == "act" and not (p["malformed"] and (failed or blocked)):
            if plan.repeat_at == self.i and not self.looping and not failed:
                self.looping = True
            elif self.looping and (blocked or told):
                self.looping = False
                self.i += 1
            elif not self.looping:
                self.i += 1
            if self.looping:
                return self._emit(plan.actions[self.i], malformed=False, kind=0.0)
        if self.i < len(plan.actions):
            a = self.i
            rate = self.rates["malformed_with_lesson" if self.lesson else "malformed"]
            return self._emit(plan.actions[a], malformed=plan.u_malformed[a] < rate, kind=plan.u_kind[a])
        if plan.stall and not told and not blocked:
            call = plan.stall_calls[self.stall_n % len(plan.stall_calls)]
            self.stall_n += 1
            return self._emit(call, malformed=False, kind=0.0, phase="stall")
        self.pending = None
        if plan.forget and not self.forgot and not told:
            self.forgot = True
            return AIMessage("")
        return AIMessage(self._answer(messages))

    # ---- producing output -----------------------------------------------------------------

    def _emit(self, action: ToolCallSpec, malformed: bool, kind: float, phase: str = "act") -> AIMessage:
        self.call_n += 1
        cid = f"call_{self.call_n}"
        self.pending = {"id": cid, "action": action, "malformed": malformed, "kind": kind, "phase": phase}
        args = dict(action.args)
        if malformed and kind >= 0.5 and args:
            k = sorted(args)[0]
            args[_wrong_name(k)] = args.pop(k)
            return AIMessage("", tool_calls=[{"name": action.name, "args": args, "id": cid, "type": "tool_call"}])
        if malformed:
            raw = repr(args) if args else "{"
            return AIMessage("", invalid_tool_calls=[{"name": action.name, "args": raw, "id": cid,
                                                       "error": "not JSON", "type": "invalid_tool_call"}])
        return AIMessage("", tool_calls=[{"name": action.name, "args": args, "id": cid, "type": "tool_call"}])

    def _answer(self, messages: list[BaseMessage]) -> str:
        if self.plan is not None and self.plan.wrong_answer:
            return VAGUE_ANSWER
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage)
                   and not str(m.content).startswith(("Error", "Blocked"))]
        seen: list[str] = []
        for r in results:
            if r not in seen:
                seen.append(r)
        return "Here is what I found:\n" + "\n".join(seen) if seen else "I could not find anything."


def oracle_model(seed: int = 0) -> WeakScriptedModel:
    """Follows the ground truth with no failure (every rate 0)."""
    return WeakScriptedModel(seed, rates=ORACLE_RATES, name="scripted:oracle")
