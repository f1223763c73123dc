"""Defensive readers for foreign JSON: a wrong type becomes a default or a ``ValueError``, never a crash.

Importers read files other tools wrote (and users hand-edited); every field may be missing or of the
wrong type. These helpers keep that checking out of the conversion code.
"""

from __future__ import annotations

import json
import re
from typing import Any


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def arr(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    """A string as is, a number as its text, anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def count(value: Any) -> int:
    """A non-negative integer count (token counts), 0 when missing or malformed."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value == value and abs(value) < 1e15:
        return max(int(value), 0)
    if isinstance(value, str) and value.isdigit() and len(value) < 16:
        return int(value)
    return 0


def score(value: Any) -> float | None:
    """A reward in 0..1 (clamped), None when missing; a non-number (NaN too) is a ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError(f"reward must be a number, got {value!r}"[:200])
    return float(min(1.0, max(0.0, value)))  # clamped first: JSON's integers may be past a float's range


def arguments(value: Any) -> str:
    """Tool-call arguments as the JSON string OpenAI messages carry."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value if value is not None else {}, default=str)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def content_text(value: Any) -> str:
    """Message content as text: a string, or the text of a list of content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text", p.get("content"))
                if isinstance(t, str):
                    parts.append(t)
        return "".join(parts)
    if value is None:
        return ""
    return text(value) or ""


def agent_name(name: str) -> str:
    """An agent name as OpenAI's ``name`` field allows it ([a-zA-Z0-9_-], at most 64)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64] or "agent"


def keep_reasoning(reasoning: list[dict[str, Any]], step: int, value: Any) -> None:
    """Keep ``value``, a model's ``reasoning_content``, as the reasoning of the assistant turn at ``step`` in
    ``reasoning`` (``meta["reasoning"]``: ``{step, text}``, never the turn's text): once, as one response's calls may
    each repeat it; an empty or non-text value is none."""
    if not isinstance(value, str) or not value.strip():
        return
    if reasoning and reasoning[-1]["step"] == step:
        if value not in reasoning[-1]["text"]:
            reasoning[-1]["text"] += "\n" + value
        return
    reasoning.append({"step": step, "text": value})


def actions_from_text(messages: list[dict[str, Any]]) -> dict[str, bool]:
    """``{"actions_from_text": True}`` for a trajectory's ``meta`` when its calls were read from the reply text.

    For the importers of text-action agents (mini-swe-agent, SWE-agent, nebius' SWE-agent rows), which give
    each reply's fenced command a synthesized ``bash`` call and turn the observation (a *user* message in the
    file) into its ``tool`` result, so that labelling reads one form whatever the agent. Call it only when
    every call was synthesized (none was a real tool call). The marker is set only when there is such a call
    and each call's command is in its reply's text as written; else ``{}``. Export reads it to write the
    conversation as the model saw and wrote it (`evoharness.datasets.chat.as_written`).
    """
    found = False
    for m in messages:
        calls = m.get("tool_calls")
        if m.get("role") != "assistant" or not calls:
            continue
        text = m.get("content")
        if not isinstance(text, str):
            return {}
        for c in calls:
            try:
                command = json.loads(c["function"]["arguments"]).get("command")
            except (TypeError, KeyError, AttributeError, ValueError):
                return {}
            if not isinstance(command, str) or command not in text:
                return {}
        found = True
    return {"actions_from_text": True} if found else {}
