"""The canonical trajectory: one rollout of one agent on one task.

Conventions every layer relies on:

- ``messages`` are OpenAI chat messages (``system`` / ``user`` / ``assistant`` with
  optional ``tool_calls`` / ``tool`` with ``tool_call_id``), kept as plain dicts so
  that importing 10,000 traces stays close to the cost of ``json.loads``.
- A *step* is a 0-based index into ``messages``. Signals and events point at steps.
- ``final_answer is None`` means the agent did not deliver.
- ``score is None`` means unscored (e.g. failure-only logs); an unscored trajectory
  is never called healthy.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Split(StrEnum):
    dev = "dev"
    heldout = "heldout"
    unknown = "unknown"


class Termination(StrEnum):
    delivered = "delivered"
    step_budget = "step_budget"
    timeout = "timeout"
    context_overflow = "context_overflow"
    error = "error"
    aborted = "aborted"


class EventType(StrEnum):
    """Harness-side events. Importers and the agent may also record other strings."""

    blocked_call = "blocked_call"
    unknown_tool = "unknown_tool"
    invalid_arguments = "invalid_arguments"
    format_rejected = "format_rejected"
    tool_error = "tool_error"
    tool_infra_error = "tool_infra_error"
    middleware_action = "middleware_action"
    budget_exhausted = "budget_exhausted"
    timeout = "timeout"
    context_overflow = "context_overflow"
    sandbox_violation = "sandbox_violation"
    harness_error = "harness_error"
    tampered = "tampered"


class Event(BaseModel):
    """Something the harness did or saw at a step (not part of the chat itself)."""

    model_config = ConfigDict(extra="allow")

    type: str
    step: int = Field(ge=0, description="index into Trajectory.messages")
    detail: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    steps: int = Field(0, ge=0, description="agent (assistant) turns")
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    wall_seconds: float = Field(0.0, ge=0)


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    split: Split = Split.unknown
    harness_commit: str | None = None
    model: str | None = None
    rollout: int = 0
    task: str | None = Field(None, description="the task text given to the agent, if known")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    final_answer: str | None = None
    score: float | None = Field(None, ge=0.0, le=1.0)
    termination: Termination = Termination.delivered
    usage: Usage = Field(default_factory=Usage)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("messages")
    @classmethod
    def _messages_have_roles(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, m in enumerate(value):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ValueError(f"message {i} has no string 'role'")
        return value

    @property
    def delivered(self) -> bool:
        return self.final_answer is not None

    @property
    def scored(self) -> bool:
        return self.score is not None

    def assistant_steps(self) -> list[int]:
        """Indices of the assistant messages, in order."""
        return [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
