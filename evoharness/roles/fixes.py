"""The playbook: known process signals mapped to standard harness fixes, and how to apply them.

A fix is policy switches in ``policies.yaml`` (the reference agent honours them) plus a lesson
appended to ``lessons.md`` (the agent's system prompt includes it). `plan_fix` compares the fix with
the harness as it is, so a fix already in place plans nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, Field

from evoharness.errors import EditRejected, yaml_problem
from evoharness.harness_repo.models import FileChange
from evoharness.harness_repo.policies import Policies
from evoharness.roles.config import RolesConfig
from evoharness.roles.models import HarnessView

POLICIES = "policies.yaml"
LESSONS = "lessons.md"


@dataclass(frozen=True)
class Fix:
    key: str
    subject: str  # the commit subject (it names the candidate branch)
    signals: tuple[str, ...]
    root_cause: str
    policies: dict[str, Any] = field(default_factory=dict)  # dotted key -> value
    lesson_title: str = ""
    lesson: str = ""
    raise_steps: tuple[str, ...] = ()  # signals for which max_steps is also raised (modestly)

    @property
    def surface(self) -> str:
        return POLICIES if self.policies or self.raise_steps else LESSONS


_FORMAT_LESSON = ("Follow the call format exactly: one action per turn, in the form the harness asks for. "
                  "Pass tool arguments as one JSON object whose keys are exactly the tool's parameter names, "
                  "with values of the documented types; no comments, no trailing commas, no prose inside it. "
                  "If a call is rejected, read the error, fix the format and call again once.")

FIXES: tuple[Fix, ...] = (
    Fix("loop_guard", "Loop guard: block repeated identical tool calls", ("F3.repeated_action",),
        "the harness lets the agent repeat an identical tool call with no guard, so a loop runs until the "
        "step budget is gone",
        {"loop_guard.enabled": True},
        "Do not repeat an identical tool call",
        "If a tool call did not give you what you need, do not send it again with the same arguments: change "
        "the arguments, use a different tool, or deliver your answer with what you have."),
    Fix("repair_tool_calls", "Repair malformed tool calls and state the call format",
        ("F2.invalid_arguments", "F2.format_rejected"),
        "malformed tool-call arguments are rejected outright instead of being repaired, and the prompt does "
        "not state the call format",
        {"repair_tool_calls": True},
        "Tool-call format", _FORMAT_LESSON),
    Fix("known_tools", "Repair unknown tool names and restate the tool list", ("F2.unknown_tool",),
        "the agent calls tools that do not exist and the harness neither repairs near-miss names nor "
        "restates the tool list",
        {"repair_tool_calls": True},
        "Call only the listed tools",
        "Call only the tools listed under Tools, spelled exactly as listed. There are no other tools."),
    Fix("allowed_tools", "Lesson: do not retry blocked calls", ("F2.blocked_call",),
        "the prompt does not say which calls the harness blocks, so the agent retries blocked calls",
        {},
        "Blocked calls",
        "A call the harness blocks will be blocked again: do not retry it. Use an allowed tool instead, or "
        "explain in your final answer what you could not do."),
    Fix("infra_retry", "Lesson: retry a failing tool once, then move on", ("F2.tool_infra_error",),
        "transient tool failures are surfaced without guidance, and the agent either stops or retries "
        "forever",
        {},
        "When a tool fails",
        "If a tool fails with a transient error (timeout, connection, 5xx), retry it once. If it fails "
        "again, continue with the other tools and say in your final answer what could not be checked."),
    Fix("deliver", "Delivery: checkpoint nudge and exit gate",
        ("F3.no_delivery", "F3.step_budget_exhausted", "F3.timeout"),
        "nothing in the harness makes the agent commit to an answer: no checkpoint reminder and no exit "
        "gate, so runs end without a final answer",
        {"checkpoint_nudge.enabled": True, "exit_gate.enabled": True},
        "Always deliver",
        "Once you have the information the task asks for, stop calling tools and write the final answer. "
        "Never end a run without a final answer; a partial answer beats none.",
        raise_steps=("F3.no_delivery", "F3.step_budget_exhausted")),
    Fix("short_context", "Lesson: keep tool results small", ("F3.context_overflow",),
        "tool results fill the context window because the prompt does not ask for narrow queries",
        {},
        "Keep tool results small",
        "Ask tools for only what you need (filters, limits, one item at a time) and do not re-read results "
        "you already have."),
)

SIGNAL_FIX: dict[str, Fix] = {s: f for f in FIXES for s in f.signals}
_unknown = [f"{f.key}: {k}" for f in FIXES for k in f.policies if not Policies.knows(k)]
if _unknown:  # a fix that sets a key the agent does not read would be a silent no-op
    raise ValueError(f"fixes set policy keys the Policies schema does not declare: {_unknown}")


class Plan(BaseModel):
    """What applying a fix to this harness would change (empty = the fix is already in place)."""

    fix: str
    signal: str
    surface: str
    policy_changes: dict[str, Any] = Field(default_factory=dict, description="dotted key -> new value")
    more_steps: tuple[int, int] | None = Field(None, description="(old, new) max_steps")
    lesson_title: str = ""
    lesson: str = ""

    @property
    def empty(self) -> bool:
        return not self.policy_changes and self.more_steps is None and not self.lesson

    @property
    def only_more_steps(self) -> bool:
        return self.more_steps is not None and not self.policy_changes and not self.lesson

    def describe(self) -> str:
        bits = [f"{k}: {_yaml_scalar(v)}" for k, v in self.policy_changes.items()]
        if self.more_steps:
            bits.append(f"max_steps: {self.more_steps[0]} -> {self.more_steps[1]}")
        if self.lesson:
            bits.append(f"lesson '{self.lesson_title}'")
        return ", ".join(bits) or "nothing (already in place)"


def plan_fix(signal: str, harness: HarnessView, cfg: RolesConfig | None = None) -> Plan | None:
    """The plan for ``signal`` against ``harness``; None when the playbook has no fix for the signal."""
    cfg = cfg or RolesConfig()
    fix = SIGNAL_FIX.get(signal)
    if fix is None:
        return None
    pol = harness.policies()
    changes = {k: v for k, v in fix.policies.items() if _get(pol, k) != v}
    more = None
    if signal in fix.raise_steps and cfg.raise_max_steps > 0 and isinstance(pol.get("max_steps"), int):
        old = pol["max_steps"]
        new = min(old + cfg.raise_max_steps, cfg.max_steps_cap)
        more = (old, new) if new > old else None
    has_lesson = bool(fix.lesson_title) and lesson_heading(fix.lesson_title) in harness.text(LESSONS)
    return Plan(fix=fix.key, signal=signal, surface=fix.surface, policy_changes=changes, more_steps=more,
                lesson_title="" if has_lesson else fix.lesson_title, lesson="" if has_lesson else fix.lesson)


def lesson_heading(title: str) -> str:
    return f"### {title}"


def apply_plan(plan: Plan, harness: HarnessView) -> list[FileChange]:
    """The file changes that carry out ``plan``: policies.yaml round-tripped, lessons.md appended."""
    out: list[FileChange] = []
    updates = dict(plan.policy_changes)
    if plan.more_steps:
        updates["max_steps"] = plan.more_steps[1]
    if updates:
        out.append(FileChange(path=POLICIES, content=update_policies(harness.text(POLICIES), updates)))
    if plan.lesson:
        old = harness.text(LESSONS).rstrip("\n")
        block = f"{lesson_heading(plan.lesson_title)}\n{plan.lesson}\n"
        out.append(FileChange(path=LESSONS, content=(old + "\n\n" if old.strip() else "") + block))
    return out


def update_policies(text: str, updates: dict[str, Any]) -> str:
    """``text`` (policies.yaml) with dotted keys set; other keys, their order and the header comment kept."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as e:
        raise EditRejected(f"cannot parse policies.yaml: {yaml_problem(e)}", POLICIES) from None
    if not isinstance(data, dict):
        raise EditRejected("policies.yaml is not a mapping", POLICIES)
    new = copy.deepcopy(data)
    for dotted, value in updates.items():
        node = new
        *parents, leaf = dotted.split(".")
        for p in parents:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[leaf] = value
    header = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            header.append(line)
        else:
            break
    unknown = [k for k in updates if not Policies.knows(k)]
    if unknown:
        raise EditRejected(f"unknown policy key(s) {', '.join(unknown)} (the agent reads: "
                           f"{', '.join(Policies.model_fields)})", POLICIES)
    try:
        Policies.model_validate(new)
    except ValueError as e:
        raise EditRejected(f"invalid policies: {e}", POLICIES) from None
    body = yaml.safe_dump(new, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return ("\n".join(header).rstrip("\n") + "\n" if any(h.strip() for h in header) else "") + body


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for p in dotted.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def _yaml_scalar(v: Any) -> str:
    return yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()
