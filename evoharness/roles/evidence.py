"""Evidence helpers shared by the roles: process-failure pairs, grouping, quotes and trace excerpts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evoharness.diagnosis.models import Label, Lever
from evoharness.roles.models import Evidence
from evoharness.traces.cost import cost_signals, is_cost_signal
from evoharness.traces.models import Trajectory

Pair = tuple[Trajectory, Label]


def process_pairs(trajectories: list[Trajectory], labels: list[Label]) -> list[Pair]:
    """(trajectory, label) for every harness-lever (process) label with a first signal, matched by trajectory id."""
    by_id = {t.id: t for t in trajectories}
    out = []
    for lab in labels:
        if lab.lever == Lever.harness and lab.first_signal and lab.trajectory_id in by_id:
            out.append((by_id[lab.trajectory_id], lab))
    return out


def group_by_signal(pairs: list[Pair]) -> list[tuple[str, list[Pair]]]:
    """Pairs grouped by first signal id, the most common first (ties by id)."""
    groups: dict[str, list[Pair]] = defaultdict(list)
    for t, lab in pairs:
        groups[lab.first_signal.id].append((t, lab))  # type: ignore[union-attr]
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def clip(text: Any, limit: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def evidence_of(pairs: list[Pair], limit: int, quote_chars: int) -> list[Evidence]:
    out = []
    for t, lab in pairs[:limit]:
        sig = lab.first_signal
        assert sig is not None
        out.append(Evidence(trajectory_id=t.id, task_id=t.task_id, step=sig.step,
                            quote=clip(sig.evidence or message_text(t, sig.step), quote_chars)))
    return out


def message_text(t: Trajectory, step: int) -> str:
    if not 0 <= step < len(t.messages):
        return ""
    m = t.messages[step]
    parts = [m.get("content") if isinstance(m.get("content"), str) else ""]
    for c in m.get("tool_calls") or []:
        fn = c.get("function", {}) if isinstance(c, dict) else {}
        parts.append(f"{fn.get('name')}({fn.get('arguments')})")
    return " ".join(p for p in parts if p)


def excerpt(t: Trajectory, step: int, window: int, quote_chars: int) -> list[dict[str, Any]]:
    """The messages around ``step`` as {step, role, text}, each clipped (for prompts)."""
    lo, hi = max(0, step - window), min(len(t.messages), step + window + 1)
    return [{"step": i, "role": t.messages[i].get("role"), "text": clip(message_text(t, i), quote_chars)}
            for i in range(lo, hi)]


def shows_signal(lab: Label, signal: str, traj: Trajectory | None = None) -> bool:
    """Whether ``signal`` fired anywhere in the labelled trajectory (first or later). A cost signal never enters a
    label: it is read from ``traj`` (`evoharness.traces.cost`), and shows nowhere without it."""
    if is_cost_signal(signal):
        return traj is not None and signal in cost_signals(traj)
    return any(s.id == signal for s in [*lab.signals, *([lab.first_signal] if lab.first_signal else [])])


def pattern_id(signal: str) -> str:
    """Stable per signal, so a pattern keeps its id when re-attributed (send-back is at most once)."""
    return f"p-{signal}"


def task_ids_of(pairs: list[Pair]) -> list[str]:
    return sorted({t.task_id for t, _ in pairs})


def feedback_map(feedback: Any) -> dict[str, str]:
    """The critic's send-back notes as {pattern id: notes}, from a dict or a list of review dicts."""
    if not feedback:
        return {}
    if isinstance(feedback, dict):
        return {str(k): str(v) for k, v in feedback.items()}
    out = {}
    for item in feedback:
        item = item.model_dump() if hasattr(item, "model_dump") else item
        pid = item.get("pattern_id") or item.get("pattern") or item.get("id")
        if pid:
            out[str(pid)] = str(item.get("notes") or item.get("reason") or "")
    return out
