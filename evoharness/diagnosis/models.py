"""Failure signals, labels and the failure composition of a set of trajectories."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class FailureClass(StrEnum):
    healthy = "healthy"
    F1 = "F1"  # evidence: delivered claims not backed by tool results (content)
    F2 = "F2"  # harness friction: blocked/rejected calls, harness-caused tool errors (process)
    F3 = "F3"  # execution control: loops, exhausted budget, no delivery (process)
    F4 = "F4"  # planning capacity: delivered, well-formed, but poor (content)
    E = "E"  # environment: the user simulator, a tool or the infrastructure broke the task (neither lever)
    unknown = "unknown"  # no verdict: unscored (no outcome recorded, not a failure-only log) and no signal fired


class Lever(StrEnum):
    harness = "harness"
    weights = "weights"
    none = "none"


class Signal(BaseModel):
    """One failure signal that fired at one step, with the quoted text behind it."""

    id: str = Field(description="catalogue id, e.g. 'F3.repeated_action'")
    failure_class: FailureClass
    step: int = Field(ge=0, description="index into Trajectory.messages")
    evidence: str = ""

    @property
    def name(self) -> str:
        return self.id.split(".", 1)[-1]


class Violation(BaseModel):
    """One broken invariant (a tool schema, a domain-policy rule) at one step, with the quoted evidence."""

    rule: str
    step: int
    evidence: str


class Label(BaseModel):
    trajectory_id: str
    task_id: str
    failure_class: FailureClass
    first_signal: Signal | None = None
    signals: list[Signal] = Field(default_factory=list)
    lever: Lever = Lever.none
    scored: bool = True
    score: float | None = None
    delivered: bool = False
    violations: list[Violation] = Field(default_factory=list, description="the violation log (invariants)")
    agent: str | None = Field(None, description="the agent answerable for the failing step (multi-agent logs): "
                                                "its speaker, or at a terminal's output the agent whose code it ran")
    quote: str = Field("", description="one line of the message at the failing step")
    labeller: str = Field("rules", description="rules | llm | rules (llm fallback: why)")


LABEL_SCHEMA_VERSION = 1  # raise when a field of the `label --out` lines changes meaning or goes away


class LabelLine(Label):
    """One line of `evoharness label --out`: a ``Label`` plus the version of this layout, so that a reader
    (``dataset export --labels``) can tell a stale or foreign file from a labels file it understands."""

    schema_version: int = Field(LABEL_SCHEMA_VERSION, description="the labels file layout's version")

    @classmethod
    def of(cls, label: Label) -> LabelLine:
        return cls.model_construct(_fields_set={*label.model_fields_set, "schema_version"}, **dict(label),
                                   schema_version=LABEL_SCHEMA_VERSION)
