"""Playbook roles: no LLM. Evidence about the harness first, then known process signals mapped to
standard harness fixes (`fixes.FIXES`).

Evidence patterns come from the `HarnessView`: a culprit commit (a signal rose after it on main) gives
a pattern whose fix is ``revert:<sha>``; a linter finding with support gives ``lint:<n>`` (its index in
``harness.findings``), repaired by `repairs.repair` on any surface (middleware, prompt template,
lessons, policies). They target the signal that rose (or the finding's most frequent signal), which may
be a content signal: a defect of the harness shows as content failures too.

The embedded default (the demo runs them) and the baseline the LLM roles are compared with.
"""

from __future__ import annotations

from typing import Any

from evoharness.diagnosis.models import FailureClass, Label, Lever
from evoharness.harness_repo.models import Edit
from evoharness.logging import get_logger
from evoharness.roles.config import RolesConfig
from evoharness.roles.evidence import (
    evidence_of,
    feedback_map,
    group_by_signal,
    pattern_id,
    process_pairs,
    shows_signal,
    task_ids_of,
)
from evoharness.roles.fixes import SIGNAL_FIX, apply_plan, plan_fix
from evoharness.roles.guard import check_edit
from evoharness.roles.models import HarnessView, Pattern, Review
from evoharness.roles.repairs import describe, repair
from evoharness.traces.cost import is_cost_signal
from evoharness.traces.models import Trajectory

log = get_logger(__name__)


class PlaybookAnalyst:
    """Groups F2/F3 trajectories by first signal; one pattern per signal that has a playbook fix not
    yet in the harness. Signals whose fix would make the same change as a more common one are skipped."""

    def __init__(self, cfg: RolesConfig | None = None) -> None:
        self.cfg = cfg or RolesConfig()

    def analyse(self, trajectories: list[Trajectory], labels: list[Label], harness: HarnessView,
                max_patterns: int, feedback: Any = None) -> list[Pattern]:
        pairs = process_pairs(trajectories, labels)
        feedback = feedback_map(feedback)
        out: list[Pattern] = evidence_patterns(harness, self.cfg, max(len(labels), 1))[:max_patterns]
        seen_plans: set[str] = set()
        for signal, group in group_by_signal(pairs):
            if len(out) >= max_patterns:
                break
            if any(p.signal == signal for p in out):
                continue
            plan = plan_fix(signal, harness, self.cfg)
            if plan is None or plan.empty:
                why = "no playbook fix" if plan is None else "fix in place"
                log.info("analyst.skip", signal=signal, why=why)
                continue
            key = plan.fix + "|" + plan.describe()
            if key in seen_plans:
                continue
            seen_plans.add(key)
            fix = SIGNAL_FIX[signal]
            pid = pattern_id(signal)
            cause = fix.root_cause
            if feedback and feedback.get(pid):
                cause += f" (critic: {feedback[pid]})"
            out.append(Pattern(
                id=pid, signal=signal, failure_class=signal.split(".", 1)[0],
                evidence=evidence_of(group, self.cfg.max_evidence, self.cfg.max_quote_chars),
                count=len(group), share=round(len(group) / max(len(pairs), 1), 4),
                task_ids=task_ids_of(group), root_cause=cause, surface=plan.surface, fix=plan.fix,
            ))
            if len(out) >= max_patterns:
                break
        return out


def evidence_patterns(harness: HarnessView, cfg: RolesConfig, analysed: int) -> list[Pattern]:
    """Patterns from the harness evidence: culprit commits first, then supported lint findings (one per
    signal; a finding in a file a culprit changed is left to the revert)."""
    out: list[Pattern] = []
    reverted: set[str] = set()
    for c in harness.culprits:
        if any(p.signal == c.signal for p in out):
            continue
        reverted.update(c.paths)
        out.append(Pattern(
            id=f"p-revert-{c.commit[:12]}", signal=c.signal, failure_class=c.signal.split(".", 1)[0],
            evidence=c.evidence, count=len(c.evidence), share=round(min(1.0, c.after), 4), task_ids=c.task_ids,
            root_cause=f"{c.signal} rose from {c.before:.2f} to {c.after:.2f} of the rollouts (same tasks and "
                       f"seeds) at commit {c.commit[:10]} ({c.subject})",
            surface=c.paths[0] if c.paths else "*", fix=f"revert:{c.commit}"))
    for i, f in enumerate(harness.findings):
        if f.target is None or f.support < cfg.min_support or f.path in reverted \
                or any(p.signal == f.target for p in out):
            continue
        out.append(Pattern(
            id=f"p-lint-{f.rule}-{i}", signal=f.target, failure_class=f.target.split(".", 1)[0],
            evidence=f.evidence, count=f.support, share=round(min(1.0, f.support / analysed), 4),
            task_ids=f.task_ids, root_cause=f"harness linter: {f.line()}", surface=f.path, fix=f"lint:{i}"))
    return out


def evidence_changes(pattern: Pattern, harness: HarnessView) -> tuple[list, str] | None:
    """The changes an evidence pattern's fix makes, and what they do (None: not an evidence fix, or
    nothing to change). A revert's changes are written by the caller (it needs the repository)."""
    if pattern.fix.startswith("lint:"):
        i = int(pattern.fix.split(":", 1)[1])
        if i >= len(harness.findings):
            return None
        f = harness.findings[i]
        changes = repair(f, harness)
        return (changes, describe(f)) if changes else None
    return None


def _code_review_note(harness: HarnessView, surface: str) -> str:
    """The static review's findings in the pattern's surface, as a note (evidence, not a refusal)."""
    found = harness.code_review(surface)
    if not found:
        return ""
    return f"static review of {surface}: {'; '.join(found[:3])} (a merge keeping it needs a human)"


class PlaybookCritic:
    """Checks the pattern against the labels and the planned fix against the harness.

    Not approved when: the evidence does not show the signal (sent back), support is below
    ``min_support``, the playbook has no fix or it is already in place, or the only change left
    is more steps (an accommodation of the current model, not a harness fix).
    """

    def __init__(self, cfg: RolesConfig | None = None) -> None:
        self.cfg = cfg or RolesConfig()

    def review(self, pattern: Pattern, harness: HarnessView, trajectories: list[Trajectory],
               labels: list[Label]) -> Review:
        by_id = {lab.trajectory_id: lab for lab in labels}
        by_traj = {t.id: t for t in trajectories}  # a cost signal is read from the trajectory, not the label
        problems: list[str] = []
        wrong = [e.trajectory_id for e in pattern.evidence
                 if e.trajectory_id not in by_id
                 or not shows_signal(by_id[e.trajectory_id], pattern.signal, by_traj.get(e.trajectory_id))]
        if wrong:
            problems.append(f"evidence does not show {pattern.signal}: {', '.join(wrong[:3])}")
        evidence_fix = pattern.fix.startswith(("revert:", "lint:"))
        if evidence_fix:  # harness evidence may target any signal; support = the runs where it fired that it can
            # explain: a score signal's failed (not Healthy) runs -- a run that reached the healthy threshold has no
            # score to flip, as the linter (lint.with_support) and the culprit search count -- a cost signal's any run
            cost = is_cost_signal(pattern.signal)
            firing = [lab for lab in labels if (cost or lab.failure_class != FailureClass.healthy)
                      and shows_signal(lab, pattern.signal, by_traj.get(lab.trajectory_id))]
        else:
            firing = [lab for lab in labels if lab.lever == Lever.harness and lab.first_signal
                      and lab.first_signal.id == pattern.signal]
        if len(firing) < self.cfg.min_support:
            problems.append(f"support {len(firing)} < {self.cfg.min_support} trajectories")
        if not harness.editable(pattern.surface):
            problems.append(f"surface {pattern.surface} is not editable")
        attribution_ok = not problems
        if evidence_fix:
            return self._review_evidence(pattern, harness, firing, problems, attribution_ok, bool(wrong))
        plan = plan_fix(pattern.signal, harness, self.cfg)
        accommodation = bool(plan and plan.only_more_steps)
        if plan is None:
            problems.append(f"no playbook fix for {pattern.signal}")
        elif plan.empty:
            problems.append("the fix is already in the harness")
        elif accommodation:
            old, new = plan.more_steps or (0, 0)
            problems.append(f"only raising max_steps {old} -> {new} is left: that "
                            "accommodates the model, it fixes no harness defect")
        approved = not problems
        notes = f"fix: {plan.describe()}" if approved and plan else "; ".join(problems)
        notes = "; ".join(n for n in (notes, _code_review_note(harness, pattern.surface)) if n)
        return Review(pattern_id=pattern.id, approved=approved, accommodation=accommodation,
                      attribution_ok=attribution_ok, predicted_flips=sorted({lab.task_id for lab in firing}),
                      notes=notes, send_back=bool(wrong))


    def _review_evidence(self, pattern: Pattern, harness: HarnessView, firing: list[Label], problems: list[str],
                         attribution_ok: bool, send_back: bool) -> Review:
        if pattern.fix.startswith("revert:"):
            sha = pattern.fix.split(":", 1)[1]
            if not any(c.commit == sha for c in harness.culprits):
                problems.append(f"commit {sha[:10]} is no longer a culprit on main")
        elif evidence_changes(pattern, harness) is None:
            problems.append("the linter finding has no repair on an editable surface")
        approved = not problems
        notes = pattern.root_cause if approved else "; ".join(problems)
        notes = "; ".join(n for n in (notes, _code_review_note(harness, pattern.surface)) if n)
        return Review(pattern_id=pattern.id, approved=approved, accommodation=False, attribution_ok=attribution_ok,
                      predicted_flips=sorted({lab.task_id for lab in firing}), notes=notes, send_back=send_back)


class PlaybookEngineer:
    """Applies the playbook fix: a YAML round-trip of policies.yaml and a lesson appended to lessons.md.
    Returns None when the review is not approved or the fix is already in the harness."""

    def __init__(self, cfg: RolesConfig | None = None) -> None:
        self.cfg = cfg or RolesConfig()

    def propose(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None:
        if not review.approved:
            return None
        if pattern.fix.startswith(("revert:", "lint:")):
            return self._evidence_edit(pattern, review, harness)
        plan = plan_fix(pattern.signal, harness, self.cfg)
        if plan is None or plan.empty:
            return None
        fix = SIGNAL_FIX[pattern.signal]
        edit = Edit(
            message=fix.subject,
            targets=pattern.signal,
            changes=apply_plan(plan, harness),
            failure_class=pattern.failure_class,
            evidence=[f"{e.trajectory_id}@{e.step}" for e in pattern.evidence],
            predicted_flips=review.predicted_flips,
            critic=review.line(),
            rationale=(f"{pattern.signal} was the first failure signal in {pattern.count} trajectories "
                       f"({100 * pattern.share:.0f}% of process failures). Root cause: {fix.root_cause}. "
                       f"Change: {plan.describe()}."),
        )
        check_edit(edit, harness)
        return edit

    def _evidence_edit(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None:
        if pattern.fix.startswith("revert:"):
            culprit = next((c for c in harness.culprits if pattern.fix == f"revert:{c.commit}"), None)
            if culprit is None or not culprit.changes:
                return None
            changes, what = culprit.changes, f"revert {culprit.commit[:10]} ({culprit.subject})"
            subject = f"Revert {culprit.commit[:10]}: {culprit.subject}"[:72]
        else:
            got = evidence_changes(pattern, harness)
            if got is None:
                return None
            changes, what = got
            subject = what[0].upper() + what[1:70]
        edit = Edit(message=subject, targets=pattern.signal, changes=changes, failure_class=pattern.failure_class,
                    evidence=[f"{e.trajectory_id}@{e.step}" for e in pattern.evidence],
                    predicted_flips=review.predicted_flips, critic=review.line(),
                    rationale=f"Root cause: {pattern.root_cause}. Change: {what}.")
        check_edit(edit, harness)
        return edit
