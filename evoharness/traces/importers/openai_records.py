"""Records of OpenAI chat messages with an outcome (tau-bench's historical trajectories).

A record is a JSON object with ``traj`` (or ``messages``, or ``trajectory`` as nebius' SWE-rebench OpenHands
trajectories name it): a list of OpenAI chat messages, and optionally ``reward`` / ``score`` (0..1), ``task_id``
(else SWE-bench's ``instance_id``), ``trial``, ``id`` (else ``trajectory_id``), ``split``, ``model``. Files are a
JSON list of records or JSONL.

Outcome: ``reward``, else ``score`` (a number; a boolean there is refused), else ``resolved``: SWE-bench's
verdict, ``true`` / ``false`` or ``1`` / ``0`` (nebius' SWE-rebench OpenHands trajectories store it as an
int64), read as 1.0 / 0.0; any other value of it is refused. Without any of them the record is unscored.

The simulated user's instruction (tau-bench's ``info.task.instruction``) is kept as
``meta.user_instruction``. Tool results whose content starts with ``Error`` become ``tool_error`` events (or
``tool_infra_error`` when they read like an infrastructure fault); the final answer
is the last assistant message with text. Messages are kept as written; an assistant message's ``reasoning_content``
(the model's thinking, as DeepSeek and OpenAI-compatible servers return it) is also named in ``meta.reasoning``
(``{step, text}``), where every importer keeps it: it is not what the agent said.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.traces import jsontext
from evoharness.traces.importers._shape import keep_reasoning
from evoharness.traces.importers._shape import score as reward_score
from evoharness.traces.importers.jsonstream import ArrayRecords
from evoharness.traces.models import Event, Termination, Trajectory
from evoharness.traces.patterns import classify_tool_error


def _records(path: Path, data: Any) -> Iterator[tuple[str, Any]]:
    if data is not None:
        for i, rec in enumerate(data if isinstance(data, list | ArrayRecords) else [data]):
            yield f"record {i}", rec
        return
    from evoharness.traces.store import jsonl_lines

    # every reader of JSON lines reads them through one: a UTF-16 / UTF-32 file (PowerShell 5's `>`) was
    # 'line 1: invalid JSON' here alone, its format told by ``detect_format``'s reading of the same lines
    for lineno, raw in jsonl_lines(path):
        try:
            yield f"line {lineno}", jsontext.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            yield f"line {lineno}", _BadJson


class _BadJson:  # sentinel for a JSONL line that did not parse
    pass


def matches(rec: dict) -> bool:
    return "traj" in rec or "messages" in rec or _chat_trajectory(rec.get("trajectory"))


def _chat_trajectory(value: Any) -> bool:
    """A ``trajectory`` that is a list of chat messages (SWE-rebench OpenHands records), not SWE-agent's steps
    (``action`` / ``observation``) nor nebius' SWE-agent records (``text``, no ``content``)."""
    return (isinstance(value, list) and bool(value) and type(value[0]) is dict
            and isinstance(value[0].get("role"), str) and "content" in value[0])


CHAT_KEYS = frozenset(("tool_calls", "tool_call_id", "function_call"))


def is_chat_list(data: Any) -> bool:
    """A bare JSON list of OpenAI chat messages (one conversation, no record around it): ``{role, content}``
    objects, one of them carrying the chat API's own keys (``tool_calls``, ``tool_call_id``, ``function_call``).
    Without those it is a multi-agent message list (``agentrx``), whose roles name the agents."""
    if not isinstance(data, list) or not data or not all(type(m) is dict for m in data):
        return False
    if not all(isinstance(m.get("role"), str) for m in data) or {"messages", "traj", "task_id"} & data[0].keys():
        return False
    return any(not CHAT_KEYS.isdisjoint(m) for m in data)


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import convert_records

    if is_chat_list(data):  # one conversation as a bare list: the file is its record
        data = {"messages": data}
    yield from convert_records(path, _records(path, data), lambda n, rec: convert(rec, path.stem, n), "chat record",
                               bad=_BadJson, skip_invalid=skip_invalid, on_invalid=on_invalid)


def convert(rec: Any, source: str, index: int) -> Trajectory:
    if not isinstance(rec, dict):
        raise ValueError(f"expected an object, got {type(rec).__name__}")
    messages = rec.get("traj", rec.get("messages", rec.get("trajectory")))
    if not isinstance(messages, list):
        raise ValueError("'traj' / 'messages' must be a list of chat messages")
    score, bad_score = _outcome(rec)
    task_id = str(rec.get("task_id", rec.get("instance_id", index)))
    trial = rec.get("trial", 0)
    rollout = trial if isinstance(trial, int) else 0

    events: list[Event] = []
    final_answer = None
    task = None
    steps = 0
    reasoning: list[dict[str, Any]] = []
    i = -1
    for m in messages:  # one pass: checks each message, then reads it. The roles by frequency (tau-bench airline:
        i += 1  # assistant 46%, user 28%, tool 22%), a role that is no string last: ~9% fewer instructions
        if type(m) is not dict:
            if not isinstance(m, dict):
                raise ValueError(f"message {i} has no string 'role'")
            messages[i] = m = dict(m)  # a dict subclass: a plain dict, as validation would make it
        role = m.get("role")
        if role == "assistant":
            steps += 1
            content = m.get("content")
            if isinstance(content, str) and content and not content.isspace():  # content.strip(), not made
                final_answer = content
            if "reasoning_content" in m:  # (most messages have none: a call saved per turn)
                keep_reasoning(reasoning, i, m["reasoning_content"])
        elif role == "tool":
            content = m.get("content")
            if isinstance(content, str) and content.startswith("Error"):
                events.append(Event(type=classify_tool_error(content), step=i, detail=content[:500]))
        elif role == "user":
            if task is None and isinstance(content := m.get("content"), str):
                task = content
        elif not isinstance(role, str):
            raise ValueError(f"message {i} has no string 'role'")
    if bad_score:  # after the message checks: a bad message is reported first
        raise ValueError(bad_score)

    return Trajectory.with_messages(  # the messages were just parsed and checked above: not copied
        messages, checked=True,
        id=str(rec.get("id") or rec.get("trajectory_id") or f"{source}:{task_id}:{trial}"),
        task_id=task_id,
        split=rec.get("split", "unknown"),
        model=rec.get("model"),
        rollout=rollout,
        task=task,
        events=events,
        final_answer=final_answer,
        score=score,
        termination=Termination.delivered if final_answer is not None else Termination.aborted,
        usage={"steps": steps},  # made a Usage by the validation of the rest, not an __init__ of its own (~3k less)
        meta={"source_format": "openai", "source": source, **_instruction(rec),
              **({"reasoning": reasoning} if reasoning else {})},
    )


def _outcome(rec: dict[str, Any]) -> tuple[float | None, str | None]:
    """(the record's outcome in 0..1 or None: unscored, why it cannot be read or None). ``reward`` / ``score`` is a
    number (``_shape.score``: a boolean or a NaN there is no score); ``resolved`` is a verdict, so a boolean, or
    SWE-rebench's 1 / 0."""
    score = rec.get("reward", rec.get("score"))
    if score is not None:
        try:
            return reward_score(score), None  # in 0..1; a NaN, a boolean or a string is refused
        except ValueError as e:
            return None, str(e)
    resolved = rec.get("resolved")
    if resolved is None:
        return None, None
    if isinstance(resolved, bool) or (isinstance(resolved, int) and resolved in (0, 1)):
        return float(resolved), None
    return None, f"resolved must be true or false (or 1 / 0), got {resolved!r}"[:200]


def _instruction(rec: dict[str, Any]) -> dict[str, str]:
    """The simulated user's instruction where the record carries it (tau-bench: ``info.task.instruction``)."""
    info = rec.get("info")
    task = info.get("task") if isinstance(info, dict) else None
    text = task.get("instruction") if isinstance(task, dict) else None
    return {"user_instruction": text[:20_000]} if isinstance(text, str) and text.strip() else {}
