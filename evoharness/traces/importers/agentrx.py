"""Bare message lists: AgentRx's Magentic-One runs (``[{"role": ..., "content": ...}, ...]``).

AgentRx (microsoft/AgentRx, ``data/magentic_dataset/``) stores each run as a JSON list of
``{role, content}`` messages whose roles name the speaker: ``human``, ``Orchestrator
(thought)``, ``Orchestrator (-> WebSurfer)``, ``WebSurfer``, ``FileSurfer``, ... Message i
of the list is step i (AgentRx's 1-based ``step_number`` n is step n-1).

Roles become agents: ``human`` / ``user`` / ``system`` keep their chat role; every other role
becomes an assistant message whose ``name`` is the agent (the part before `` (``, so the
Orchestrator's thoughts and instructions are all the Orchestrator's), with the full role kept
in ``role_detail``. The final answer is the text after the last ``FINAL ANSWER:`` (else the
last agent message's text). These runs are failure-only and unscored.

When a ``ground_truth.json`` (AgentRx's ``magentic_one_ground_truth.json``) sits beside the
file or one folder up, the human failure labels for this run are kept in
``meta["human_failures"]`` as ``{step, category, agent, reason}`` with 0-based steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from evoharness.traces.models import Termination, Trajectory, Usage

FINAL = re.compile(r"FINAL ANSWER:[ \t]*([^\n]+)", re.IGNORECASE)
CHAT_ROLES = {"human": "user", "user": "user", "system": "system"}
GROUND_TRUTH = "ground_truth.json"
SIDECARS = frozenset({GROUND_TRUTH, "steps_by_id.json", "magentic_count.jsonl"})


def is_message_list(data: Any) -> bool:
    """A non-empty JSON list of ``{role, content}`` objects with no trajectory wrapper."""
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return False
    first = data[0]
    return isinstance(first.get("role"), str) and "content" in first and not (
        {"messages", "traj", "task_id"} & first.keys())


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def agent_of(role: str) -> str:
    base = role.split(" (", 1)[0].strip()
    return re.sub(r"[^A-Za-z0-9_-]+", "_", base).strip("_")[:64] or "agent"


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, list):
        raise ValueError("a message-list run must be a JSON list of {role, content} messages")
    messages: list[dict[str, Any]] = []
    task = None
    final_answer = None
    steps = 0
    for i, m in enumerate(data):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"message {i} has no string 'role'")
        role, content = m["role"], m.get("content")
        content = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        chat = CHAT_ROLES.get(role.strip().lower())
        if chat:
            if chat == "user" and task is None:
                task = content
            messages.append({"role": chat, "content": content})
            continue
        steps += 1
        messages.append({"role": "assistant", "name": agent_of(role), "role_detail": role, "content": content})
        found = FINAL.findall(content)
        if found:
            final_answer = found[-1].strip()
    if final_answer is None:
        for m in reversed(messages):
            if m["role"] == "assistant" and m["content"].strip():
                final_answer = m["content"].strip()
                break
    run_id = path.stem
    meta: dict[str, Any] = {"source_format": "agentrx", "failure_only": True}
    labels = human_failures(path, run_id)
    if labels is not None:
        meta["human_failures"] = labels
    return Trajectory(
        id=f"agentrx:{run_id}",
        task_id=run_id,
        task=task,
        messages=messages,
        final_answer=final_answer,
        score=None,
        termination=Termination.delivered if final_answer is not None else Termination.aborted,
        usage=Usage(steps=steps),
        meta=meta,
    )


def human_failures(path: Path, run_id: str) -> list[dict[str, Any]] | None:
    for folder in (path.parent, path.parent.parent):
        gt = folder / GROUND_TRUTH
        if gt.is_file():
            return _ground_truth(str(gt)).get(run_id)
    return None


@lru_cache(maxsize=8)
def _ground_truth(path: str) -> dict[str, list[dict[str, Any]]]:
    """AgentRx ground truth by run id; an unreadable or foreign file gives no labels (they are optional)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in data if isinstance(data, list) else ():
        if not isinstance(rec, dict) or not isinstance(rec.get("failures"), list):
            continue
        rows = []
        for f in rec["failures"]:
            if isinstance(f, dict) and isinstance(f.get("step_number"), int) and f["step_number"] >= 1:
                rows.append({"step": f["step_number"] - 1, "category": str(f.get("failure_category", "")),
                             "agent": str(f.get("failed_agent", "")), "reason": str(f.get("step_reason", ""))})
        out[str(rec.get("trajectory_id"))] = sorted(rows, key=lambda r: r["step"])
    return out
