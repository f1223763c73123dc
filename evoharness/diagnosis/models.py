"""Failure signals, labels and the failure composition of a set of trajectories."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError


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
    trajectory_sha256: str | None = Field(None, description=(
        "SHA-256 (hex) of the canonical JSONL line the trajectory was read from, without its line end; null when it "
        "was read from another format (no such line): `dataset export --labels` then labels it again"))
    labeller_fingerprint: str | None = Field(None, description=(
        "which labeller made the label: the rule labeller's code and diagnosis settings "
        "(`evoharness.diagnosis.fingerprint`), also on a line the LLM judge left to the rules (a fallback, a healthy "
        "run); null on the judge's own verdicts (`labeller: llm`), which an export labels again"))

    @classmethod
    def of(cls, label: Label, *, trajectory_sha256: str | None = None,
           labeller_fingerprint: str | None = None) -> LabelLine:
        return cls.model_construct(_fields_set={*label.model_fields_set, "schema_version", "trajectory_sha256",
                                                "labeller_fingerprint"}, **dict(label),
                                   schema_version=LABEL_SCHEMA_VERSION, trajectory_sha256=trajectory_sha256,
                                   labeller_fingerprint=labeller_fingerprint)


class _SignalHead(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: StrictStr | None = None
    step: StrictInt | None = Field(None, ge=0)


class LabelHead(BaseModel):
    """What the readers of a labels file take of a `LabelLine`: `calibrate` its class and first signal's step,
    `dataset export --labels` its class and first signal's id. The fields as ``label`` writes them; the rest of
    the line is not read. ``failure_class`` is any string here (calibrate reads 'f1' as F1; the export takes only a
    `FailureClass`); ``schema_version`` None: the line has none (each reader says what that means)."""

    model_config = ConfigDict(extra="ignore")
    schema_version: StrictInt | None = None  # "1", true or 1.0 is not this layout's version
    trajectory_id: StrictStr
    failure_class: StrictStr
    first_signal: _SignalHead | None = None
    trajectory_sha256: StrictStr | None = None  # None: not written (an older `label`, or no canonical line)
    labeller_fingerprint: StrictStr | None = None  # None: not written (an older `label`, or the LLM judge)

    @classmethod
    def read(cls, line: bytes | str | dict[str, Any]) -> LabelHead:
        """The head of one line (its JSON text, or the object parsed from it); a ValueError saying which field is
        wrong, as ``field: what``, when the line is no label."""
        try:
            return cls.model_validate_json(line) if isinstance(line, bytes | str) else cls.model_validate(line)
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "the record"
            msg = "must be a JSON object" if first["type"] in ("model_type", "model_attributes_type") else first["msg"]
            raise ValueError(f"{field}: {msg}") from None

    def signal(self, field: str) -> Any:
        """The first signal's ``field`` (``id`` or ``step``), None when there is no first signal; a ValueError when
        the first signal lacks it (the reader needs the one it asks for)."""
        if self.first_signal is None:
            return None
        value = getattr(self.first_signal, field)
        if value is None:
            raise ValueError(f"first_signal.{field}: Field required")
        return value
