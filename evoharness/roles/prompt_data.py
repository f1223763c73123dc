"""Plain data for the role prompts: the harness files, signal groups with excerpts, attribution facts.

Trace text is untrusted: it is clipped and any ``</trace-data`` inside it is defused so it cannot
close the block the prompts wrap it in.
"""

from __future__ import annotations

from typing import Any

from evoharness.diagnosis.models import Label
from evoharness.roles.config import RolesConfig
from evoharness.roles.evidence import Pair, clip, excerpt, shows_signal
from evoharness.roles.models import HarnessView, Pattern
from evoharness.roles.prompts import defuse
from evoharness.traces.models import Trajectory

KEY_FILES = ("policies.yaml", "lessons.md", "prompts/system.md")


MAX_CODE_REVIEW = 12  # static review lines shown to a role


def harness(view: HarnessView, full: bool = False, files: str = "all", surface: str | None = None) -> dict[str, Any]:
    """Surfaces, protected globs, and the text of the files ``files`` names: "all" (the key files, or
    every editable file when ``full``), "key" (the key files and ``surface``), "surface" (only
    ``surface``, else policies.yaml) or "none". Prompts trimmed to a token budget show fewer."""
    key = [p for p in KEY_FILES if p in view.files]
    wanted = {"all": view.editable_files() if full else key,
              "key": [*key, *([surface] if surface in view.files and surface not in key else [])],
              "surface": [surface] if surface in view.files else [p for p in key[:1]],
              "none": []}
    if files not in wanted:
        raise ValueError(f"unknown files level {files!r}")
    shown = wanted[files]
    return {
        "surfaces": list(view.surfaces),
        "protected": list(view.protected),
        "files": [{"path": p, "text": view.files[p]} for p in shown],
        "other_files": [p for p in sorted(view.files) if p not in shown],
        "code_review": view.code_review()[:MAX_CODE_REVIEW],
    }


def _example(t: Trajectory, lab: Label, cfg: RolesConfig) -> dict[str, Any]:
    sig = lab.first_signal
    assert sig is not None
    return {
        "trajectory_id": t.id, "task_id": t.task_id, "step": sig.step,
        "evidence": defuse(clip(sig.evidence, cfg.max_quote_chars)),
        "termination": t.termination.value, "delivered": t.delivered,
        "excerpt": [{**m, "text": defuse(m["text"])} for m in excerpt(t, sig.step, 2, cfg.max_quote_chars)],
    }


def groups(grouped: list[tuple[str, list[Pair]]], cfg: RolesConfig) -> list[dict[str, Any]]:
    """Per signal: count, share and examples; at most ``max_trajectories_in_prompt`` examples in all."""
    total = sum(len(g) for _, g in grouped) or 1
    left = cfg.max_trajectories_in_prompt
    out = []
    for signal, members in grouped:
        take = members[: max(1, min(left, cfg.max_evidence))] if left > 0 else []
        left -= len(take)
        out.append({"signal": signal, "count": len(members), "share": round(len(members) / total, 4),
                    "tasks": sorted({t.task_id for t, _ in members}),
                    "examples": [_example(t, lab, cfg) for t, lab in take]})
    return out


def attribution_facts(pattern: Pattern, trajectories: list[Trajectory], labels: list[Label],
                      cfg: RolesConfig) -> dict[str, Any]:
    """What the labels say about the pattern's evidence: computed, so the critic need not count."""
    by_id = {lab.trajectory_id: lab for lab in labels}
    trajs = {t.id: t for t in trajectories}
    fired = [lab for lab in labels if lab.first_signal and lab.first_signal.id == pattern.signal]
    rows = []
    for e in pattern.evidence:
        lab = by_id.get(e.trajectory_id)
        t = trajs.get(e.trajectory_id)
        rows.append({
            "trajectory_id": e.trajectory_id, "task_id": e.task_id, "step": e.step,
            "label": lab.failure_class.value if lab else "unknown",
            "first_signal": lab.first_signal.id if lab and lab.first_signal else None,
            "shows_signal": bool(lab and shows_signal(lab, pattern.signal, t)),
            "excerpt": [{**m, "text": defuse(m["text"])} for m in excerpt(t, e.step, 2, cfg.max_quote_chars)]
            if t else [],
        })
    return {"first_signal_count": len(fired), "tasks_where_first": sorted({lab.task_id for lab in fired}),
            "analysed": len(labels), "min_support": cfg.min_support, "evidence": rows}
