"""LLM-backed roles: prompts from ``prompts/*.md``, pydantic replies via `structured.ask`, then checks.

A model's reply is never trusted: signals, evidence ids, surfaces and predicted flips are checked
against the labels and the harness, counts are recomputed, and edits pass `guard.check_edit`.
A reply that fails a check is retried with the reason; after ``max_retries`` the role raises `RoleError`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from evoharness.diagnosis.models import Label
from evoharness.harness_repo.models import Edit, FileChange
from evoharness.roles import prompt_data as pd
from evoharness.roles.config import RolesConfig
from evoharness.roles.evidence import (
    evidence_of,
    feedback_map,
    group_by_signal,
    pattern_id,
    process_pairs,
    task_ids_of,
)
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
    changes: list[FileChange] = Field(default_factory=list)


class _LLMRole:
    role = "role"

    def __init__(self, model: Any, cfg: RolesConfig | None = None) -> None:
        self.model = model
        self.cfg = cfg or RolesConfig()

    def messages(self, **variables: Any) -> list[BaseMessage]:
        return [SystemMessage(content=render("system.md", role=self.role)),
                HumanMessage(content=render(f"{self.role}.md", **variables))]

    def _ask(self, messages: list[BaseMessage], schema: type[BaseModel], check: Any) -> Any:
        return ask(self.model, messages, schema, role=self.role, max_retries=self.cfg.max_retries,
                   methods=self.cfg.structured_methods, check=check)


class LLMAnalyst(_LLMRole):
    role = "analyst"

    def prompt(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
               max_patterns: int, feedback: Any = None) -> list[BaseMessage]:
        groups = group_by_signal(process_pairs(trajectories, labels))
        return self.messages(harness=pd.harness(harness), groups=pd.groups(groups, self.cfg),
                             max_patterns=max_patterns, feedback=feedback_map(feedback),
                             schema=AnalystReply.model_json_schema())

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
        return self._ask(msgs, AnalystReply, check)


class LLMCritic(_LLMRole):
    role = "critic"

    def prompt(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> list[BaseMessage]:
        return self.messages(pattern=pattern.model_dump(mode="json"), harness=pd.harness(harness),
                             facts=pd.attribution_facts(pattern, trajectories, labels, self.cfg),
                             schema=ReviewDraft.model_json_schema())

    def review(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> Review:
        fired = {lab.task_id for lab in labels if lab.first_signal and lab.first_signal.id == pattern.signal}

        def check(d: ReviewDraft) -> Review:
            phrase = find_injection(d.notes)
            if phrase:
                raise ValueError(f"notes repeat an instruction from trace text: {phrase!r}")
            flips = sorted({t for t in d.predicted_flips if t in fired})
            approved = d.approved and d.attribution_ok and not d.accommodation
            return Review(pattern_id=pattern.id, approved=approved, accommodation=d.accommodation,
                          attribution_ok=d.attribution_ok, predicted_flips=flips, notes=d.notes.strip(),
                          send_back=d.send_back and not approved)

        return self._ask(self.prompt(pattern, harness, trajectories, labels), ReviewDraft, check)


class LLMEngineer(_LLMRole):
    role = "engineer"

    def prompt(self, pattern: Pattern, review: Review, harness: HarnessView) -> list[BaseMessage]:
        return self.messages(pattern=pattern.model_dump(mode="json"), review=review.model_dump(mode="json"),
                             harness=pd.harness(harness, full=True), schema=EditDraft.model_json_schema())

    def propose(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None:
        if not review.approved:
            return None

        def check(d: EditDraft) -> Edit | None:
            if d.nothing_to_change:
                return None
            if not d.changes or not d.message.strip():
                raise ValueError("give a message and at least one change, or set nothing_to_change")
            for ch in d.changes:
                if ch.content is not None and ch.content == harness.text(ch.path, default="\0"):
                    raise ValueError(f"{ch.path}: the new content is identical to the current file")
                if ch.content is not None and harness.editable(ch.path):
                    _syntax(ch.path, ch.content)
            edit = Edit(message=d.message.strip(), targets=pattern.signal, changes=d.changes,
                        failure_class=pattern.failure_class, rationale=d.rationale.strip(),
                        evidence=[f"{e.trajectory_id}@{e.step}" for e in pattern.evidence],
                        predicted_flips=review.predicted_flips, critic=review.line())
            check_edit(edit, harness)
            why = accommodation_in(edit, harness, pattern.task_ids)
            if why:
                raise ValueError(f"accommodation: {why}")
            return edit

        return self._ask(self.prompt(pattern, review, harness), EditDraft, check)


def _syntax(path: str, text: str) -> None:
    """`EditRejected` when the file would not parse (the harness repo refuses it too): retried early."""
    from evoharness.harness_repo.validate import check_syntax

    check_syntax(path, text)
