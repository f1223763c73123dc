"""A precomputed, read-only view of one trajectory that the detectors share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

from evoharness.traces.models import ToolCallRecord, Trajectory, parse_arguments


class ToolCall:
    """One tool call as the detectors read it (read-only). ``arguments`` (the raw argument text as the model
    wrote it) and ``canonical`` (canonical JSON of the parsed arguments, or the raw text stripped if it did not
    parse) are made from the trajectory's parsed call when first read: most calls are never asked for either
    (a read tool's name says it changes nothing; a repeat needs its name to recur first)."""

    __slots__ = ("step", "id", "name", "parsed_ok", "args", "_record", "_arguments", "_canonical")

    def __init__(self, record: ToolCallRecord) -> None:
        self.step: int = record.step  # index of the assistant message that made the call
        self.id: str = str(record.id or f"{record.step}.{record.index}")
        self.name: str = str(record.name)
        self.parsed_ok: bool = record.parsed_ok
        self.args: object = record.args  # the parsed arguments (None when they did not parse)
        self._record = record
        self._arguments: str | None = None
        self._canonical: str | None = None

    @property
    def arguments(self) -> str:
        if self._arguments is None:
            self._arguments = self._record.raw_text
        return self._arguments

    @property
    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = self._record.canonical
        return self._canonical

    def __repr__(self) -> str:
        return f"ToolCall(step={self.step}, id={self.id!r}, name={self.name!r}, arguments={self.arguments!r})"


def canonical_args(raw: object) -> tuple[str, bool]:
    args, ok = parse_arguments(raw)
    if ok:
        return ToolCallRecord(0, 0, None, None, raw, args, True).canonical, True
    return (raw.strip() if isinstance(raw, str) else str(raw)), False


@dataclass
class TraceView:
    """One pass over the messages, shared by every detector: per message its role and its text (the
    content when it is a string, else ""), the steps of each role, the tool calls with their arguments
    parsed once, and the tool results by call id. A detector reads these instead of re-walking and
    re-checking the message dicts."""

    traj: Trajectory
    assistant_steps: list[int] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, tuple[int, str]] = field(default_factory=dict)  # call id -> (step, content)
    roles: list[object] = field(default_factory=list)  # per message: its role
    texts: list[str] = field(default_factory=list)  # per message: its content if a string, else ""
    user_steps: list[int] = field(default_factory=list)
    tool_steps: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, traj: Trajectory) -> TraceView:
        view = cls(traj)
        roles, texts, assistant, user, tool = view.roles, view.texts, view.assistant_steps, view.user_steps, \
            view.tool_steps
        for i, m in enumerate(traj.messages):
            role = m.get("role")
            content = m.get("content")
            roles.append(role)
            texts.append(content if isinstance(content, str) else "")
            if role == "assistant":
                assistant.append(i)
            elif role == "tool":
                tool.append(i)
                view.results[str(m.get("tool_call_id"))] = (i, content if isinstance(content, str) else str(content))
            elif role == "user":
                user.append(i)
        view.calls = [ToolCall(c) for c in traj.tool_calls()]  # arguments parsed once, kept on the trajectory
        return view

    def lowered(self, i: int) -> str:
        """Message ``i``'s text (``texts[i]``) lower-cased, once per view, when first asked for."""
        low = self.__dict__.get("_lowered")
        if low is None:
            low = self.__dict__["_lowered"] = [None] * len(self.texts)
        text = low[i]
        if text is None:
            text = low[i] = self.texts[i].lower()
        return text

    def turn_of(self, step: int) -> int | None:
        """The assistant turn (message index) that a step belongs to: the last one at or before it."""
        turn = None
        for s in self.assistant_steps:
            if s > step:
                break
            turn = s
        return turn

    def next_turn(self, turn: int | None) -> int | None:
        for s in self.assistant_steps:
            if turn is None or s > turn:
                return s
        return None

    @cached_property
    def final_step(self) -> int:
        """Where the delivery (or its absence) is: the last assistant message, else the last message."""
        if self.assistant_steps:
            return self.assistant_steps[-1]
        return max(len(self.traj.messages) - 1, 0)

    @cached_property
    def grounding_text(self) -> str:
        """Everything the agent was told or shown: task, system/user messages, tool results.

        In multi-agent logs (assistant messages carrying a ``name``), what *other* agents
        said counts as shown to the final speaker.
        """
        return "\n".join(self.grounding_parts)

    @cached_property
    def grounding_parts(self) -> list[str]:
        """``grounding_text`` before joining: one string per source (each the same object as
        in the message, so a per-text cache keyed on it -- a system prompt shared by every
        trajectory of a benchmark -- hits)."""
        parts = [self.traj.task or ""]
        speaker = self.traj.messages[self.final_step].get("name") if self.traj.messages else None
        for m in self.traj.messages:
            role = m.get("role")
            if role in ("system", "user", "tool") or (
                role == "assistant" and speaker and m.get("name") and m.get("name") != speaker
            ):
                c = m.get("content")
                parts.append(c if isinstance(c, str) else json.dumps(c) if c is not None else "")
        return parts

    @cached_property
    def violations(self) -> list:
        """The violation log (invariants.violation_log), computed once per trajectory."""
        from evoharness.diagnosis.invariants import violation_log

        return violation_log(self)
