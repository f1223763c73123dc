"""The run summary: `summary.json` and the text printed at the end of a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summary_dict(outcome, services) -> dict[str, Any]:
    s = outcome.state
    rounds = s.get("rounds", [])
    flags = sum(r.get("accommodation_flags", 0) for r in rounds)
    reviewed = sum(r.get("reviews", 0) for r in rounds)
    ledger = dict(s.get("ledger") or {})
    spends = ledger.get("spends", [])
    ledger_view = {"total": ledger.get("total"), "spent": sum(x.get("units", 0) for x in spends),
                   "rollouts": sum(x.get("rollouts", 0) for x in spends),
                   "by_purpose": _by(spends, "purpose"), "by_round": _by_round(spends, len(rounds))}
    ledger_view["left"] = (ledger_view["total"] or 0) - ledger_view["spent"]
    return {
        "run_id": outcome.run_id,
        "status": s.get("status"),
        "stop_reason": s.get("stop_reason"),
        "recommendation": s.get("recommendation"),
        "harness_repo": str(services.repo.path),
        "main": services.repo.main_head(),
        "before": s.get("before"),
        "after": s.get("after"),
        "anchors": [{"round": a.get("round"), "commit": a.get("commit"), "mean": a.get("mean"),
                     "sigma": a.get("sigma"), "k": a.get("k")} for a in s.get("anchors", [])],
        "rounds": rounds,
        "merged": s.get("merged", []),
        "rejected": s.get("rejected", []),
        "dropped": s.get("dropped", []),
        "accommodation_share": (flags / reviewed) if reviewed else None,
        "queued": len(s.get("queued", [])),
        "budget": ledger_view,
        "files": {"run_dir": str(outcome.run_dir), "trajectories": str(services.store.path),
                  "summary": str(outcome.run_dir / "summary.json")},
    }


def _by(spends: list[dict], key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for x in spends:
        out[str(x.get(key))] = out.get(str(x.get(key)), 0) + x.get("units", 0)
    return out


def _by_round(spends: list[dict], completed: int) -> dict[str, float]:
    """Units per round: "seed" (the first anchor and evaluation), "1".."N", "final" (the closing evaluation)."""
    def key(x: dict) -> str:
        r = x.get("round")
        if r == 0:
            return "seed"
        if isinstance(r, int) and r > completed and x.get("purpose") == "evaluation":
            return "final"
        return str(r)

    out: dict[str, float] = {}
    for x in spends:
        out[key(x)] = out.get(key(x), 0) + x.get("units", 0)
    return out


def split_rejected(rejected: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rejected, accepted but superseded by the round's merge: not merged, never refused)."""
    return ([r for r in rejected if not r.get("superseded_by")], [r for r in rejected if r.get("superseded_by")])


def write_summary(outcome, services) -> dict[str, Any]:
    """Write the run's summary.json whole or not at all (aside, fsync'd, renamed into place): a full disk or a
    kill during a write in place left a cut file, which marks the run done for good (``summary_readable``)."""
    from evoharness.traces.store import replacing

    data = summary_dict(outcome, services)
    with replacing(outcome.run_dir / "summary.json", "w") as fh:
        fh.write(json.dumps(data, indent=2, default=str))
    return data


def summary_readable(run_dir) -> bool:
    """The run directory holds a summary.json that is a JSON object (a done run's, as ``write_summary`` leaves)."""
    try:
        return isinstance(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")), dict)
    except (OSError, ValueError, RecursionError):
        return False


def _row(name: str, comp: dict[str, Any] | None) -> str:
    if not comp:
        return f"  {name:<16} -"
    c = comp["composition"]
    ms = comp.get("mean_score")
    return (f"  {name:<16} healthy {100 * c['healthy']:5.1f}%  F1 {100 * c['F1']:5.1f}%  F2 {100 * c['F2']:5.1f}%  "
            f"F3 {100 * c['F3']:5.1f}%  F4 {100 * c['F4']:5.1f}%  E {100 * c.get('E', 0.0):5.1f}%"
            + (f"  unknown (no verdict) {100 * c['unknown']:5.1f}%" if c.get("unknown") else "")
            + f"  delivery {100 * (comp['delivery_rate'] or 0):5.1f}%"
            f"  mean {ms if ms is None else f'{ms:.3f}'}")


def summary_text(data: dict[str, Any], run_dir: Path | None = None, harness: Path | None = None) -> str:
    """The summary as printed at the end of a run. ``run_dir`` / ``harness``: where the run and the harness it drove
    are now. A run directory copied or moved elsewhere (a demo directory, a home) keeps the summary.json written
    where it was: its paths are printed where the run is now, with a line that says it is a copy (they were the
    original's, and the printed next steps pointed at another repository)."""
    b, a = data.get("before") or {}, data.get("after") or {}
    lines = [f"Run {data['run_id']}: {data.get('stop_reason')}", "", "Composition before -> after:"]
    for split in ("dev", "heldout"):
        lines.append(_row(f"seed ({split})", b.get(split)))
        lines.append(_row(f"evolved ({split})", a.get(split)))
    lines.append("")
    lines.append("Anchors (the seed's, then a fresh one after every merge; each is the bar of the next round):")
    for an in data.get("anchors", []):
        r = an["round"] or 0
        name = "seed" if r == 0 else f"after round {r}"
        lines.append(f"  {name + ':':<16} {an['mean']:.3f} (sigma {an['sigma'] or 0:.3f}, k={an['k']}) "
                     f"at {str(an['commit'])[:10]}, the bar of round {r + 1}")
    lines.append("")
    lines.append(f"Merged ({len(data['merged'])}):")
    for m in data["merged"]:
        lines.append(f"  {m['branch']}  {m['commit'][:10]} -> merge {m.get('merge_commit', '')[:10]}"
                     + (f"  {m['approval']}" if m.get("approval") else ""))
    rejected, superseded = split_rejected(data["rejected"])
    lines.append(f"Rejected ({len(rejected)}):")
    for r in rejected:
        lines.append(f"  {r['branch']}  {r['commit'][:10]}  {r.get('reason', '')}")
    if superseded:
        lines.append(f"Accepted, not merged: another candidate of the round was merged ({len(superseded)}):")
        for r in superseded:
            lines.append(f"  {r['branch']}  {r['commit'][:10]}  {r.get('reason', '')}")
    if data.get("dropped"):
        lines.append(f"Dropped before verification ({len(data['dropped'])}):")
        for d in data["dropped"]:
            lines.append(f"  {d.get('pattern') or 'round ' + str(d.get('round'))}: {d.get('reason')}")  # analyst: none
    share = data.get("accommodation_share")
    lines.append("")
    lines.append("Critic accommodation flags: " + ("-" if share is None else f"{100 * share:.0f}% of reviews"))
    budget = data.get("budget") or {}
    lines.append(f"Budget spent: {budget.get('spent', 0):g} of {budget.get('total') or 0:g} units "
                 f"({budget.get('rollouts', 0)} rollouts paid; by purpose: "
                 + ", ".join(f"{k} {v:g}" for k, v in (budget.get("by_purpose") or {}).items()) + ")")
    lines.append(f"Training queue: {data.get('queued', 0)} content-failure trajectories")
    if data.get("recommendation"):
        lines.append(f"Recommendation: {data['recommendation']}")
    lines.append("")
    files, repo, recorded = _where_now(data, run_dir, harness)
    lines.append(f"Harness repo: {repo}  (main {str(data['main'])[:10]})")
    for k, v in files.items():
        lines.append(f"  {k}: {v}")
    if recorded is not None:
        what = "a copy" if Path(recorded).exists() else "moved"
        lines.append(f"  ({what}: the run was recorded at {recorded}; the paths above are where it is now, its "
                     "summary.json names the recorded ones)")
    return "\n".join(lines)


def _where_now(data: dict[str, Any], run_dir: Path | None, harness: Path | None) -> tuple[dict, Any, str | None]:
    """(files, harness repo, the recorded run directory or None): the summary's paths as seen from ``run_dir``."""
    files, repo = dict(data.get("files") or {}), data.get("harness_repo")
    recorded = files.get("run_dir")
    if run_dir is None or not isinstance(recorded, str) or Path(recorded).resolve() == run_dir.resolve():
        return files, repo, None
    for k, v in files.items():
        if isinstance(v, str) and Path(v).is_relative_to(recorded):
            files[k] = str(run_dir.absolute() / Path(v).relative_to(recorded))
    return files, (str(harness) if harness is not None else repo), recorded
