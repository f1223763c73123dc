"""Who&When multi-agent failure logs (Magentic-One, AG2 CaptainAgent).

These logs are **failure-only and unscored**: every record is a failed run, so
``score`` stays ``None`` and ``meta["failure_only"]`` is set; the labeller never
calls them healthy. Each history entry becomes an assistant message named after
its agent (``name``, else the role up to `` (``: Magentic-One's ``Orchestrator (-> WebSurfer)``
is the Orchestrator, the full role kept in ``role_detail``), except a human / user entry. The final answer is the text
after the last ``FINAL ANSWER:`` (else the last message's text that is not the closing ``TERMINATE`` alone, bare or
emphasised: ``patterns.is_terminate``). The annotated
``mistake_agent`` / ``mistake_step`` / ``mistake_reason`` are kept in ``meta``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.traces.importers.agentrx import agent_of
from evoharness.traces.models import Termination, Trajectory, Usage
from evoharness.traces.patterns import is_terminate

FINAL = re.compile(r"FINAL ANSWER:\s*(.+)", re.IGNORECASE)
USER_ROLES = {"user", "human"}


def matches(rec: dict) -> bool:
    return "history" in rec and ("question" in rec or "mistake_agent" in rec)


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ValueError("Who&When log needs a 'history' list")
    question = data.get("question")
    messages: list[dict[str, Any]] = []
    if isinstance(question, str):
        messages.append({"role": "user", "content": question})
    final_answer = None
    steps = 0
    for i, h in enumerate(data["history"]):
        if not isinstance(h, dict):
            raise ValueError(f"history entry {i} is not an object")
        content = h.get("content")
        content = content if isinstance(content, str) else ("" if content is None else str(content))
        if str(h.get("role", "")).lower() in USER_ROLES and not h.get("name"):
            messages.append({"role": "user", "content": content})
            continue
        steps += 1
        if h.get("name"):
            messages.append({"role": "assistant", "name": _safe_name(str(h["name"])), "content": content})
        else:  # Magentic-One logs name the speaker in the role: "Orchestrator (-> WebSurfer)"
            role = str(h.get("role") or "agent")
            messages.append({"role": "assistant", "name": agent_of(role), "role_detail": role, "content": content})
        if _holds_final(content):
            final_answer = FINAL.findall(content)[-1].strip()
    if final_answer is None:
        for m in reversed(messages):
            text = m["content"].strip()
            if m["role"] == "assistant" and text and not is_terminate(text):
                final_answer = text
                break
    subset = path.parent.name
    qid = str(data.get("question_ID") or path.stem)
    mistake_step = data.get("mistake_step")
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"who-and-when:{subset}:{path.stem}",
        task_id=qid,
        task=question if isinstance(question, str) else None,
        final_answer=final_answer,
        score=None,
        termination=Termination.delivered if final_answer is not None else Termination.aborted,
        usage=Usage(steps=steps),
        meta={
            "source_format": "who-and-when",
            "failure_only": True,
            "subset": subset,
            "ground_truth": data.get("ground_truth"),
            "mistake_agent": data.get("mistake_agent"),
            # mistake_step indexes `history`; messages are shifted by the question we prepend
            "mistake_step": int(mistake_step) if str(mistake_step).isdigit() else None,
            "message_offset": 1 if isinstance(question, str) else 0,
            "mistake_reason": data.get("mistake_reason"),
        },
    )


def _holds_final(content: str) -> bool:
    """Whether ``FINAL`` matches in ``content``, tried only where a match's colon can be: 12 characters after its
    start (the case-blind regex takes one character for each of the pattern's), after an "r" or "R" (no other
    character is one to it). Colons are found by a C scan (``str.find``); lower-casing every message for a word test
    cost ~40 M instructions of Algorithm-Generated's 126 logs (~20 a character outside ASCII)."""
    at = content.find(":", 12)
    while at >= 0:
        if content[at - 1] in "rR" and FINAL.match(content, at - 12):
            return True
        at = content.find(":", at + 1)
    return False


def _safe_name(agent: str) -> str:
    # OpenAI's `name` allows [a-zA-Z0-9_-]
    return re.sub(r"[^A-Za-z0-9_-]+", "_", agent).strip("_")[:64] or "agent"
