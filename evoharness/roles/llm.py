"""LLM-backed roles: prompts from ``prompts/*.md``, pydantic replies via `structured.ask`, then checks.

A model's reply is never trusted: signals, evidence ids, surfaces and predicted flips are checked
against the labels and the harness, counts are recomputed, and edits pass `guard.check_edit`.
A reply that fails a check is retried with the reason; after ``max_retries`` the role raises `RoleError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from evoharness.diagnosis.models import Label
from evoharness.harness_repo.models import Edit, FileChange
from evoharness.harness_repo.validate import check_syntax
from evoharness.roles import prompt_data as pd
from evoharness.roles.config import RolesConfig
from evoharness.roles.errors import RoleError
from evoharness.roles.evidence import (
    clip,
    evidence_of,
    feedback_map,
    group_by_signal,
    pattern_id,
    process_pairs,
    task_ids_of,
)
from evoharness.roles.fixes import LESSONS, POLICIES, update_policies
from evoharness.roles.guard import accommodation_in, check_edit, find_injection
from evoharness.roles.models import HarnessView, Pattern, Review
from evoharness.roles.prompts import render
from evoharness.roles.structured import ask
from evoharness.traces.models import Trajectory


class EvidenceRef(BaseModel):
    trajectory_id: str
    step: int = Field(0, ge=0)
    quote: str = ""


class PatternDraft(BaseModel):
    signal: str = Field(description="one of the signal ids listed in the prompt")
    root_cause: str = Field(min_length=1, description="the harness defect that lets this failure happen")
    surface: str = Field(description="the editable harness file the fix should change")
    evidence: list[EvidenceRef] = Field(min_length=1)


class AnalystReply(BaseModel):
    patterns: list[PatternDraft] = Field(default_factory=list)


class ReviewDraft(BaseModel):
    approved: bool
    accommodation: bool = Field(description="the fix would merely accommodate the current model")
    attribution_ok: bool
    predicted_flips: list[str] = Field(default_factory=list, description="task ids expected to flip")
    notes: str = ""
    send_back: bool = False


class EditDraft(BaseModel):
    nothing_to_change: bool = Field(False, description="true when the harness already has the fix")
    message: str = Field("", description="commit subject line, imperative, under 60 characters")
    rationale: str = ""
    set_policies: dict[str, bool | int | float | str] = Field(
        default_factory=dict, description="policies.yaml keys (dotted, e.g. loop_guard.enabled) -> new value")
    add_lesson: str = Field("", description="one general lesson appended to lessons.md")
    changes: list[FileChange] = Field(default_factory=list, description="whole-file rewrites or diffs")


# Trimming levels, tried in order until the prompt fits: (evidence items per pattern, quote chars,
# trajectories shown, which harness files are shown in full: "all" | "key" | "surface" | "none").
LEVELS: tuple[tuple[int, int, int, str], ...] = (
    (99, 10_000, 99, "all"), (3, 200, 6, "all"), (2, 120, 3, "key"), (1, 80, 2, "surface"), (1, 60, 1, "none"))
RETRY_RESERVE_TOKENS = 300  # a retry appends the problem and the start of the previous reply
CHARS_PER_TOKEN = 3.0  # conservative for JSON and English under BPE tokenizers (SmolLM2: ~3.4 measured)


def estimate_tokens(messages: list[BaseMessage]) -> int:
    return sum(int(len(str(m.content)) / CHARS_PER_TOKEN) + 4 for m in messages)


class _LLMRole:
    role = "role"

    def __init__(self, model: Any, cfg: RolesConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or RolesConfig()

    def messages(self, **variables: Any) -> list[BaseMessage]:
        return [SystemMessage(content=render("system.md", role=self.role)),
                HumanMessage(content=render(f"{self.role}.md", **variables))]

    def budget(self) -> int:
        """Tokens a prompt may take: the context less the reply and a retry's feedback."""
        return self.cfg.context_tokens - self.cfg.max_tokens - RETRY_RESERVE_TOKENS

    def fit(self, build: Callable[[RolesConfig, str], list[BaseMessage]]) -> list[BaseMessage]:
        """The first prompt ``build(cfg, files)`` makes that fits `budget`, trimming more at each level."""
        need = 0
        for evidence, quote, shown, files in LEVELS:
            cfg = self.cfg.model_copy(update={
                "max_evidence": min(self.cfg.max_evidence, evidence),
                "max_quote_chars": max(40, min(self.cfg.max_quote_chars, quote)),
                "max_trajectories_in_prompt": min(self.cfg.max_trajectories_in_prompt, shown)})
            msgs = build(cfg, files)
            need = estimate_tokens(msgs)
            if need <= self.budget():
                return msgs
        raise RoleError(self.role, f"the prompt needs about {need} tokens even trimmed, but context_tokens "
                        f"{self.cfg.context_tokens} - max_tokens {self.cfg.max_tokens} - {RETRY_RESERVE_TOKENS} "
                        f"for a retry leaves {self.budget()}: raise roles.context_tokens or lower roles.max_tokens",
                        0)

    def _ask(self, messages: list[BaseMessage], schema: type[BaseModel], check: Any,
             grammar: dict | None = None) -> Any:
        return ask(self.model, messages, schema, role=self.role, max_retries=self.cfg.max_retries,
                   methods=self.cfg.structured_methods, check=check, json_schema=grammar)


def _text(max_len: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_len}


def _enum(values: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": sorted(set(values))} if values else {"type": "string", "maxLength": 80}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _not_copied(field: str, value: str) -> None:
    """A reply that keeps a ``<...>`` placeholder (from an example or a schema) is no answer."""
    if value.strip().startswith("<") and value.strip().endswith(">"):
        raise ValueError(f"{field} is a placeholder; write your own text")


class LLMAnalyst(_LLMRole):
    role = "analyst"

    def prompt(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
               max_patterns: int, feedback: Any = None) -> list[BaseMessage]:
        grouped = group_by_signal(process_pairs(trajectories, labels))

        def build(cfg: RolesConfig, files: str) -> list[BaseMessage]:
            groups = pd.groups(grouped, cfg)
            return self.messages(harness=pd.harness(harness, files=files), groups=groups, max_patterns=max_patterns,
                                 feedback=feedback_map(feedback), example=_analyst_example(groups, harness))

        return self.fit(build)

    def grammar(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
                max_patterns: int) -> dict[str, Any]:
        """`AnalystReply`, tightened: the signal ids and trajectory ids of these failures, short texts."""
        def pattern(signal: str, members: list) -> dict[str, Any]:  # evidence only from this signal's runs
            evidence = _obj({"trajectory_id": _enum([t.id for t, _ in members]),
                             "step": {"type": "integer", "minimum": 0}, "quote": _text(120)}, ["trajectory_id", "step"])
            return _obj({"signal": _enum([signal]), "root_cause": _text(300),
                         "surface": _enum(harness.editable_files()),
                         "evidence": {"type": "array", "items": evidence, "minItems": 1, "maxItems": 3}},
                        ["signal", "root_cause", "surface", "evidence"])

        groups = group_by_signal(process_pairs(trajectories, labels))
        items = {"anyOf": [pattern(sig, members) for sig, members in groups]} if groups else {"type": "object"}
        return _obj({"patterns": {"type": "array", "items": items, "maxItems": max_patterns}}, ["patterns"])

    def analyse(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
                max_patterns: int, feedback: Any = None) -> list[Pattern]:
        pairs = process_pairs(trajectories, labels)
        if not pairs:
            return []
        groups = dict(group_by_signal(pairs))

        def check(reply: AnalystReply) -> list[Pattern]:
            out: dict[str, Pattern] = {}
            for d in reply.patterns:
                if d.signal not in groups:
                    raise ValueError(f"signal {d.signal!r} is not one of {sorted(groups)}")
                if not (harness.editable(d.surface) or d.surface in harness.surfaces):
                    raise ValueError(f"surface {d.surface!r} is not editable (editable: {harness.surfaces})")
                _not_copied("root_cause", d.root_cause)
                phrase = find_injection(d.root_cause)
                if phrase:
                    raise ValueError(f"root_cause repeats an instruction from trace text: {phrase!r}")
                members = groups[d.signal]
                ids = {t.id for t, _ in members}
                bad = [e.trajectory_id for e in d.evidence if e.trajectory_id not in ids]
                if bad:
                    raise ValueError(f"evidence {bad[:3]} are not trajectories where {d.signal} fired first")
                named = {e.trajectory_id for e in d.evidence}
                cited = sorted(members, key=lambda p: p[0].id not in named)  # cited first, order kept
                pid = pattern_id(d.signal)
                out.setdefault(pid, Pattern(
                    id=pid, signal=d.signal, failure_class=d.signal.split(".", 1)[0],
                    evidence=evidence_of(cited, self.cfg.max_evidence, self.cfg.max_quote_chars),
                    count=len(members), share=round(len(members) / len(pairs), 4),
                    task_ids=task_ids_of(members), root_cause=d.root_cause.strip(), surface=d.surface))
            return sorted(out.values(), key=lambda p: (-p.count, p.id))[:max_patterns]

        msgs = self.prompt(trajectories, labels, harness, max_patterns, feedback)
        return self._ask(msgs, AnalystReply, check, self.grammar(trajectories, labels, harness, max_patterns))


class LLMCritic(_LLMRole):
    role = "critic"

    def prompt(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> list[BaseMessage]:
        def build(cfg: RolesConfig, files: str) -> list[BaseMessage]:
            shown = pattern.model_copy(update={"evidence": pattern.evidence[: cfg.max_evidence]})
            facts = pd.attribution_facts(shown, trajectories, labels, cfg)
            return self.messages(pattern=_pattern_data(shown, cfg), harness=pd.harness(harness, files=files,
                                 surface=pattern.surface), facts=facts, example=_critic_example(facts))

        return self.fit(build)

    @staticmethod
    def grammar(pattern: Pattern, labels: list[Label]) -> dict[str, Any]:
        fired = [lab.task_id for lab in labels if lab.first_signal and lab.first_signal.id == pattern.signal]
        flag = {"type": "boolean"}
        return _obj({"approved": flag, "accommodation": flag, "attribution_ok": flag,
                     "predicted_flips": {"type": "array", "items": _enum(fired), "maxItems": 12},
                     "notes": _text(300), "send_back": flag},
                    ["approved", "accommodation", "attribution_ok", "predicted_flips", "notes"])

    def review(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> Review:
        fired = {lab.task_id for lab in labels if lab.first_signal and lab.first_signal.id == pattern.signal}

        def check(d: ReviewDraft) -> Review:
            _not_copied("notes", d.notes)
            phrase = find_injection(d.notes)
            if phrase:
                raise ValueError(f"notes repeat an instruction from trace text: {phrase!r}")
            flips = sorted({t for t in d.predicted_flips if t in fired})
            approved = d.approved and d.attribution_ok and not d.accommodation
            return Review(pattern_id=pattern.id, approved=approved, accommodation=d.accommodation,
                          attribution_ok=d.attribution_ok, predicted_flips=flips, notes=d.notes.strip(),
                          send_back=d.send_back and not approved)

        return self._ask(self.prompt(pattern, harness, trajectories, labels), ReviewDraft, check,
                         self.grammar(pattern, labels))


class LLMEngineer(_LLMRole):
    role = "engineer"

    def prompt(self, pattern: Pattern, review: Review, harness: HarnessView) -> list[BaseMessage]:
        def build(cfg: RolesConfig, files: str) -> list[BaseMessage]:
            return self.messages(pattern=_pattern_data(pattern, cfg), review=review.model_dump(mode="json"),
                                 harness=pd.harness(harness, files="all" if files == "all" else "surface",
                                                    surface=pattern.surface, full=True),
                                 policy_keys=_policy_keys(harness), example=_engineer_example(harness))

        return self.fit(build)

    @staticmethod
    def grammar(harness: HarnessView) -> dict[str, Any]:
        """`EditDraft`, tightened: policy keys that exist, editable paths, bounded texts."""
        keys = _policy_keys(harness)
        value = {"type": ["boolean", "integer", "string"]}
        policies = ({"type": "object", "properties": {k: value for k in keys}, "additionalProperties": False}
                    if keys else {"type": "object", "maxProperties": 0})
        change = _obj({"path": _enum(harness.editable_files()), "content": {"type": "string"}}, ["path", "content"])
        return _obj({"nothing_to_change": {"type": "boolean"}, "message": _text(60), "rationale": _text(300),
                     "set_policies": policies, "add_lesson": _text(400),
                     "changes": {"type": "array", "items": change, "maxItems": 2}},
                    ["message", "rationale", "set_policies", "add_lesson"])

    def propose(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None:
        if not review.approved:
            return None

        def check(d: EditDraft) -> Edit | None:
            if d.nothing_to_change:
                return None
            _not_copied("message", d.message)
            _not_copied("add_lesson", d.add_lesson)
            changes = _simple_changes(d, harness) + list(d.changes)
            if not changes or not d.message.strip():
                raise ValueError("give a message and a change (set_policies, add_lesson or changes), "
                                 "or set nothing_to_change")
            if len({c.path for c in changes}) != len(changes):
                raise ValueError("one change per file: put set_policies/add_lesson or a whole-file rewrite, not both")
            for ch in changes:
                if ch.content is not None and ch.content == harness.text(ch.path, default="\0"):
                    raise ValueError(f"{ch.path}: the new content is identical to the current file")
                if ch.content is not None and harness.editable(ch.path):
                    _syntax(ch.path, ch.content)
            edit = Edit(message=d.message.strip(), targets=pattern.signal, changes=changes,
                        failure_class=pattern.failure_class, rationale=d.rationale.strip(),
                        evidence=[f"{e.trajectory_id}@{e.step}" for e in pattern.evidence],
                        predicted_flips=review.predicted_flips, critic=review.line())
            check_edit(edit, harness)
            why = accommodation_in(edit, harness, pattern.task_ids)
            if why:
                raise ValueError(f"accommodation: {why}")
            return edit

        return self._ask(self.prompt(pattern, review, harness), EditDraft, check, self.grammar(harness))


def _simple_changes(d: EditDraft, harness: HarnessView) -> list[FileChange]:
    """``set_policies`` and ``add_lesson`` as file changes (unknown policy keys are refused)."""
    out = []
    if d.set_policies:
        known = set(_policy_keys(harness))
        unknown = sorted(set(d.set_policies) - known)
        if unknown:
            raise ValueError(f"unknown policy keys {unknown[:3]} (policies.yaml has: {sorted(known)})")
        out.append(FileChange(path=POLICIES, content=update_policies(harness.text(POLICIES), d.set_policies)))
    lesson = " ".join(d.add_lesson.split())
    if lesson:
        old = harness.text(LESSONS).rstrip("\n")
        out.append(FileChange(path=LESSONS, content=(old + "\n" if old.strip() else "") + f"- {lesson}\n"))
    return out


def _policy_keys(harness: HarnessView) -> list[str]:
    """The dotted keys of policies.yaml's scalar settings (what ``set_policies`` may set)."""
    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            elif isinstance(v, bool | int | float | str):
                out.append(f"{prefix}{k}")

    walk(harness.policies(), "")
    return out


def _pattern_data(pattern: Pattern, cfg: RolesConfig) -> dict[str, Any]:
    """The pattern as prompt data: evidence and task ids capped, quotes clipped."""
    data = pattern.model_dump(mode="json", exclude={"fix"})
    data["evidence"] = [{**e, "quote": clip(e["quote"], cfg.max_quote_chars)}
                        for e in data["evidence"][: cfg.max_evidence]]
    if len(data["task_ids"]) > 12:
        data["task_ids"] = [*data["task_ids"][:12], f"... {len(pattern.task_ids) - 12} more"]
    return data


# Worked examples shown in the prompts instead of JSON schema dumps (a small model copies a schema's
# descriptions as values). Each is about a signal the prompt is *not* about where possible, so a
# reply copied from the example is visible as such; under a grammar the ids stay valid anyway.
_EXAMPLE_PATTERNS = (
    ("F2.unknown_tool", "the system prompt does not list the tools the harness offers, so the agent guesses tool "
     "names that do not exist", "prompts/system.md", "called lookup_order, which is not a tool"),
    ("F3.repeated_action", "nothing in the harness stops an identical tool call from being repeated, so a loop "
     "runs until the step budget is gone", "policies.yaml", "3x search_orders with the same arguments"),
)


def _analyst_example(groups: list[dict[str, Any]], harness: HarnessView) -> dict[str, Any]:
    shown = {g["signal"] for g in groups}
    signal, cause, surface, quote = next((e for e in _EXAMPLE_PATTERNS if e[0] not in shown), _EXAMPLE_PATTERNS[0])
    files = harness.editable_files()
    surface = surface if surface in files or not files else files[0]
    return {"patterns": [{"signal": signal, "root_cause": cause, "surface": surface,
                          "evidence": [{"trajectory_id": "run-0042", "step": 7, "quote": quote}]}]}


def _critic_example(facts: dict[str, Any]) -> dict[str, Any]:
    return {"approved": False, "accommodation": True, "attribution_ok": True, "predicted_flips": [],
            "notes": "The signal is first in enough runs, but raising the step budget only hides the loop; "
            "a guard against repeated calls would repair it.", "send_back": False}


def _engineer_example(harness: HarnessView) -> dict[str, Any]:
    keys = _policy_keys(harness)
    key = "exit_gate.enabled" if "exit_gate.enabled" in keys else next(
        (k for k in keys if k.endswith(".enabled")), None)
    return {"message": "Require a final answer before a run ends",
            "rationale": "Runs stop without an answer; the exit gate sends the agent back to answer first.",
            "set_policies": {key: True} if key else {}, "add_lesson": ""}


def _syntax(path: str, text: str) -> None:
    """`EditRejected` when the file would not parse (the harness repo refuses it too): retried early."""
    check_syntax(path, text)
