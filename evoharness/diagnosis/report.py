"""Turn labels into what `evoharness diagnose` prints (text) or emits (--json)."""

from __future__ import annotations

from typing import Any

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.models import Label
from evoharness.diagnosis.routing import recommend


def unscored_note(comp: Composition, labels: list[Label] | None = None) -> str | None:
    if not comp.n_unscored:
        return None
    unknown = comp.counts.get("unknown", 0)
    return (f"{comp.n_unscored} of {comp.n} trajectories are unscored (e.g. failure-only logs such as "
            f"Who&When): they are never counted healthy; mean scores cover the {comp.n_scored} scored ones"
            + (f"; {unknown} delivered with no failure signal and no outcome: class unknown, neither healthy nor "
               "a failure" if unknown else ""))


def trajectory_row(lab: Label) -> dict[str, Any]:
    """One trajectory's entry in ``diagnose --json``'s ``trajectories``."""
    return {
        "id": lab.trajectory_id,
        "task_id": lab.task_id,
        "failure_class": lab.failure_class.value,
        "first_signal": None if lab.first_signal is None else {
            "id": lab.first_signal.id, "step": lab.first_signal.step, "evidence": lab.first_signal.evidence},
        "agent": lab.agent,
        "quote": lab.quote,
        "labeller": lab.labeller,
        "lever": lab.lever.value,
        "score": lab.score,
        "signals": [s.id for s in lab.signals],
    }


def failing_step_line(lab: Label) -> str:
    """One failure as `diagnose` prints it: id, class, step, agent, first signal, a one-line quote."""
    s = lab.first_signal
    where = f"step {s.step}" if s else "step -"
    agent = f"  [{lab.agent}]" if lab.agent else ""
    return f"  {lab.trajectory_id}  {lab.failure_class.value}  {where}{agent}  {s.id if s else '-'}  \"{lab.quote}\""


def failing_steps_text(lines: list[str], failures: int) -> str:
    if not lines:
        return ""
    more = f" (first {len(lines)} of {failures}; --show N, --json or `label` for all)" if failures > len(lines) else ""
    return "\n".join([f"Failing step per trajectory{more}:", *lines, ""])


def summary_dict(comp: Composition, cfg: DiagnosisConfig) -> dict[str, Any]:
    """``diagnose --json`` without its per-trajectory rows."""
    out = comp.to_dict()
    out["recommendation"] = recommend(comp, cfg).model_dump()
    out["note"] = unscored_note(comp)
    return out


def diagnosis_dict(labels: list[Label], cfg: DiagnosisConfig) -> dict[str, Any]:
    out = summary_dict(Composition.from_labels(labels), cfg)
    out["trajectories"] = [trajectory_row(lab) for lab in labels]
    return out


def diagnosis_text(labels: list[Label], cfg: DiagnosisConfig) -> str:
    return composition_text(Composition.from_labels(labels), cfg)


def composition_text(comp: Composition, cfg: DiagnosisConfig) -> str:
    rec = recommend(comp, cfg)
    lines = ["Failure composition (first signal that fires)", "", comp.table(), ""]
    if comp.top_signals:
        lines.append("Most frequent first signals:")
        width = max(len(s.id) for s in comp.top_signals)
        for s in comp.top_signals:
            lines.append(f"  {s.id.ljust(width)}  {s.count:>5}  {100 * s.share:5.1f}%   e.g. {', '.join(s.examples)}")
        lines.append("")
    lines.append(f"Lever: harness {100 * rec.harness_share:.1f}%  weights {100 * rec.weights_share:.1f}%")
    lines.append(f"Recommendation: {rec.message}")
    note = unscored_note(comp)
    if note:
        lines.append(f"Note: {note}")
    return "\n".join(lines)
