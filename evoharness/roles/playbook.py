"""Playbook roles: no LLM. Known process signals mapped to standard harness fixes (`fixes.FIXES`).

The embedded default (the demo runs them) and the baseline the LLM roles are compared with.
"""

from __future__ import annotations

from typing import Any

from evoharness.diagnosis.models import Label, Lever
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
        out: list[Pattern] = []
        seen_plans: set[str] = set()
        for signal, group in group_by_signal(pairs):
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
        problems: list[str] = []
        wrong = [e.trajectory_id for e in pattern.evidence
                 if e.trajectory_id not in by_id or not shows_signal(by_id[e.trajectory_id], pattern.signal)]
        if wrong:
            problems.append(f"evidence does not show {pattern.signal}: {', '.join(wrong[:3])}")
        firing = [lab for lab in labels if lab.lever == Lever.harness and lab.first_signal
                  and lab.first_signal.id == pattern.signal]
        if len(firing) < self.cfg.min_support:
            problems.append(f"support {len(firing)} < {self.cfg.min_support} trajectories")
        if not harness.editable(pattern.surface):
            problems.append(f"surface {pattern.surface} is not editable")
        attribution_ok = not problems
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
        return Review(pattern_id=pattern.id, approved=approved, accommodation=accommodation,
                      attribution_ok=attribution_ok, predicted_flips=sorted({lab.task_id for lab in firing}),
                      notes=notes, send_back=bool(wrong))


class PlaybookEngineer:
    """Applies the playbook fix: a YAML round-trip of policies.yaml and a lesson appended to lessons.md.
    Returns None when the review is not approved or the fix is already in the harness."""

    def __init__(self, cfg: RolesConfig | None = None) -> None:
        self.cfg = cfg or RolesConfig()

    def propose(self, pattern: Pattern, review: Review, harness: HarnessView) -> Edit | None:
        if not review.approved:
            return None
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



