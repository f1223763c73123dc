"""A small fluent builder for hand-written trajectories (tests, docs, examples).

    t = (TraceBuilder("t1").user("find order 42")
         .call("get_order", {"id": 42}).result("order 42: shipped")
         .say("Order 42 has shipped.").deliver("Order 42 has shipped.").build(score=1.0))
"""

from __future__ import annotations

import json
from typing import Any

from evoharness.traces.models import Event, Termination, Trajectory, Usage


class TraceBuilder:
    def __init__(self, task_id: str = "task", id: str | None = None, task: str | None = None) -> None:
        self.task_id = task_id
        self.id = id or f"{task_id}#0"
        self.task = task
        self.messages: list[dict[str, Any]] = []
        self.events: list[Event] = []
        self.final_answer: str | None = None
        self.termination = Termination.aborted
        self._calls = 0
        self._last_call: str | None = None

    @property
    def step(self) -> int:
        return len(self.messages)

    def system(self, text: str) -> TraceBuilder:
        self.messages.append({"role": "system", "content": text})
        return self

    def user(self, text: str) -> TraceBuilder:
        if self.task is None:
            self.task = text
        self.messages.append({"role": "user", "content": text})
        return self

    def call(self, name: str, args: dict[str, Any] | str | None = None, result: str | None = None) -> TraceBuilder:
        """An assistant turn with one tool call; ``args`` as a str is used verbatim (may be malformed)."""
        self._calls += 1
        self._last_call = f"call_{self._calls}"
        raw = args if isinstance(args, str) else json.dumps(args or {})
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": self._last_call, "type": "function", "function": {"name": name, "arguments": raw}}]})
        if result is not None:
            self.result(result)
        return self

    def result(self, text: str) -> TraceBuilder:
        self.messages.append({"role": "tool", "tool_call_id": self._last_call, "content": text})
        return self

    def say(self, text: str) -> TraceBuilder:
        self.messages.append({"role": "assistant", "content": text})
        return self

    def event(self, type: str, detail: str = "", step: int | None = None, **data: Any) -> TraceBuilder:
        self.events.append(Event(type=type, step=self.step - 1 if step is None else step, detail=detail, data=data))
        return self

    def deliver(self, answer: str) -> TraceBuilder:
        if not self.messages or self.messages[-1].get("content") != answer:
            self.say(answer)
        self.final_answer = answer
        self.termination = Termination.delivered
        return self

    def end(self, termination: Termination | str) -> TraceBuilder:
        self.termination = Termination(termination)
        return self

    def build(self, score: float | None = None, **fields: Any) -> Trajectory:
        steps = sum(1 for m in self.messages if m["role"] == "assistant")
        return Trajectory(
            id=self.id, task_id=self.task_id, task=self.task, messages=list(self.messages),
            events=list(self.events), final_answer=self.final_answer, score=score,
            termination=self.termination, usage=Usage(steps=steps), **fields,
        )
