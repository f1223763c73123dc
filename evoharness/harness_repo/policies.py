"""`Policies`: the schema of a harness's ``policies.yaml``, in one place.

The reference agent reads it (`agent.harness.load_policies`), the seed writes its defaults
(`harness_repo.seed.POLICIES`), and the playbook's fixes set its keys (`roles.fixes`): all three use
this model, so a key one of them names and the others do not know is an error, not a silent no-op.
Unknown keys are kept (the template and the middleware hooks may read their own).
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoharness.errors import yaml_problem


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow")


class LoopGuard(_Section):
    enabled: bool = Field(False, description="Block a tool call identical to the previous ones.")
    max_repeats: int = Field(2, ge=1, description="Identical calls allowed before the guard blocks.")


class CheckpointNudge(_Section):
    enabled: bool = Field(False, description="Remind the agent to deliver every `every` steps.")
    every: int = Field(4, ge=1, description="Steps between reminders.")


class ExitGate(_Section):
    enabled: bool = Field(False, description="Refuse to end a run without a final answer (once).")


class Policies(_Section):
    """What ``policies.yaml`` may set; a missing key takes its default."""

    max_steps: int = Field(12, ge=1, description="Model turns before the run ends (step_budget).")
    loop_guard: LoopGuard = Field(default_factory=LoopGuard)
    checkpoint_nudge: CheckpointNudge = Field(default_factory=CheckpointNudge)
    exit_gate: ExitGate = Field(default_factory=ExitGate)
    repair_tool_calls: bool = Field(False, description="Repair malformed tool-call arguments and near-miss "
                                    "tool names instead of rejecting them.")

    @classmethod
    def from_yaml(cls, text: str) -> Policies:
        """Parse ``policies.yaml`` text; ValueError naming the problem when it is not valid."""
        try:
            data = yaml.safe_load(text) if text.strip() else {}
        except yaml.YAMLError as e:
            raise ValueError(f"invalid YAML: {yaml_problem(e)}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError("top level must be a mapping")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            raise ValueError(f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from None

    def to_yaml(self, header: str = "") -> str:
        body = yaml.safe_dump(self.model_dump(), sort_keys=False, default_flow_style=False, allow_unicode=True)
        return header + body

    @classmethod
    def knows(cls, dotted: str) -> bool:
        """True when ``dotted`` (e.g. ``loop_guard.enabled``) is a declared policy key."""
        model: Any = cls
        for part in dotted.split("."):
            field = getattr(model, "model_fields", {}).get(part)
            if field is None:
                return False
            model = field.annotation
        return True
