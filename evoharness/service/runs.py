"""Read-only views of runs for the API and the metrics: list, status, rounds, budget."""

from __future__ import annotations

import json
from typing import Any

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.evidence import count_evidence
from evoharness.graph.runner import load_run_settings, runs_dir
from evoharness.graph.summary import summary_readable
from evoharness.service.daemon import DONE, PAUSED, Daemon
from evoharness.service.driver import read_state


def budget_of(state: dict[str, Any]) -> dict[str, Any]:
    from evoharness.graph.source import RunLedger

    if not state.get("ledger"):
        return {"total": None, "spent": 0.0, "left": None, "rollouts": 0}
    ledger = RunLedger.model_validate(state["ledger"])
    return {"total": ledger.total, "spent": ledger.spent, "left": ledger.left, "rollouts": ledger.rollouts}


def list_runs(settings: Settings, daemon: Daemon) -> list[dict[str, Any]]:
    root = runs_dir(settings)
    if not root.is_dir():
        return []
    current = daemon.current_run
    out = []
    for d in sorted(root.iterdir(), key=lambda p: (p / "settings.json").stat().st_mtime
                    if (p / "settings.json").exists() else 0):
        if not (d / "settings.json").is_file():
            continue
        phase = daemon.run_phase(d.name) or (PAUSED if daemon.set_aside(d.name, current) else None)
        row: dict[str, Any] = {"run_id": d.name, "phase": phase or "idle", "current": d.name == current}
        if phase == DONE and summary_readable(d):
            summary = json.loads((d / "summary.json").read_text())
            row.update(stop_reason=summary.get("stop_reason"), rounds=len(summary.get("rounds", [])),
                       merged=len(summary.get("merged", [])))
        elif d.name in daemon.snapshots:
            snap = daemon.snapshots[d.name]
            row.update(round=snap.get("round"), rounds=len(snap.get("rounds", [])),
                       merged=len(snap.get("merged", [])))
        out.append(row)
    return out


def run_state(settings: Settings, daemon: Daemon, run_id: str) -> tuple[dict[str, Any], list[Any]]:
    """(state values, pending review interrupts); raises InputError for an unknown run."""
    try:
        saved, run_dir = load_run_settings(settings, run_id)
        if run_id in daemon.snapshots and daemon.run_phase(run_id) != "waiting_review":
            return daemon.snapshots[run_id], []
        return read_state(saved, run_id, run_dir)
    except InputError:  # its settings or checkpoint cannot be read: a paused run's view says why (`paused_by`)
        if daemon.run_phase(run_id) != PAUSED:  # it was a 409 with the error, and the reason in no run's view
            raise
        return {}, []


def run_view(settings: Settings, daemon: Daemon, run_id: str) -> dict[str, Any]:
    state, interrupts = run_state(settings, daemon, run_id)
    run_dir = runs_dir(settings) / run_id
    current = daemon.current_run
    aside = daemon.set_aside(run_id, current)
    phase = daemon.run_phase(run_id) or ("waiting_review" if interrupts else PAUSED if aside else "idle")
    paused_by = None
    if phase == PAUSED:  # after a restart the reason is gone with the process: said in the log (service.run_paused)
        paused_by = daemon.paused_by.get(run_id) or (f"run {run_id} was set aside (paused, or not resumed) before the "
                                                     "service restarted; why it paused is in the service's log "
                                                     "(service.run_paused)")
        paused_by += f"; {aside}" if aside else ""
    view = {
        "run_id": run_id,
        "phase": phase,
        "status": state.get("status"),
        "round": state.get("round"),
        "rounds_completed": len(state.get("rounds", [])),
        "stop_reason": state.get("stop_reason"),
        "recommendation": state.get("recommendation"),
        "anchor": {k: (state.get("anchor") or {}).get(k) for k in ("commit", "mean", "sigma", "k", "round")}
        if state.get("anchor") else None,
        "merged": state.get("merged", []),
        "rejected": state.get("rejected", []),
        "queued": len(state.get("queued", [])),
        "budget": budget_of(state),
        "waiting_review": [c for p in interrupts for c in p.get("candidates", [])],
        "evidence": count_evidence(run_dir),
        **({"locked_by": daemon.locked_by[run_id]} if phase == "locked" and run_id in daemon.locked_by else {}),
        **({"paused_by": paused_by} if paused_by else {}),
        "summary": None,
    }
    if current == run_id and phase == "running":
        view["progress"] = daemon.progress.view()
    if summary_readable(run_dir):
        view["summary"] = json.loads((run_dir / "summary.json").read_text())
    return view
