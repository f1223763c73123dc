"""nebius' SWE-agent trajectories: rows of the Hugging Face dataset ``nebius/SWE-agent-trajectories``.

One row a run (its dataset card's features): ``instance_id``, ``model_name``, ``target`` (bool: SWE-bench's tests
of the linked pull request passed on the patch), ``exit_status`` (SWE-agent's: ``submitted``, ``exit_cost``, ...),
``generated_patch`` (the diff graded), ``eval_logs`` and ``trajectory``: a list of turns ``{role, text, mask,
system_prompt, cutoff_date}`` -- ``system`` (its prompt in ``system_prompt``, ``text`` null), ``user`` (the issue,
then each observation: the command's output and SWE-agent's prompt ``(Open file: ...)`` ``(Current directory:
...)`` ``bash-$``), ``ai`` (the model's reply: a discussion and one command in a fenced block, SWE-agent 0.x's
thought-action format). Files: JSON lines (``Dataset.to_json`` writes them), a JSON list of rows, or one row.

Conversation: the system turn is the system message, the first user turn the task; an ``ai`` turn is an assistant
message (its whole text) whose command -- the last fenced block not nested in another, as SWE-agent's
``ThoughtActionParser`` reads it -- is one ``bash`` tool call ``{"command": ...}``, the form the ``.traj`` importer
gives an action, so the coding rules read SWE-agent's commands (``open`` / ``create`` FILE, ``edit N:M`` ...
``end_of_edit`` on the open file, ``submit``, shell commands); the next user turn is its result. A reply without a
fenced block makes no call, and a user turn with no call to answer is a user message. Step i is turn i.

A result that is one of SWE-agent's refusals (``swe_agent.REFUSAL``: the linter refusing an edit, "Your proposed
edit has introduced new syntax error(s)") is a ``tool_error`` event there. Termination from ``exit_status`` as for a
``.traj`` (``swe_agent.ending``); a delivered run's final answer is ``generated_patch``. Score: ``target`` (true /
false, or 1 / 0) as 1.0 / 0.0, unscored without it. Ids: ``<file stem>:<instance_id>:<n>``, n the row's place in
the file (the dataset holds many runs of one instance by one model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.traces import jsontext
from evoharness.traces.importers import swe_agent
from evoharness.traces.importers._shape import actions_from_text
from evoharness.traces.importers.jsonstream import ArrayRecords
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.store import jsonl_lines

ROLES = ("system", "user", "ai")
# SWE-agent 0.x's ThoughtActionParser: a fence opening (```lang) or closing (a bare ```) at a line start
_FENCE = re.compile(r"^```(\S*)\s*\n|^```\s*$", re.MULTILINE)


def matches(rec: dict) -> bool:
    """A row: ``instance_id`` and a ``trajectory`` of ``{role, text}`` turns (no chat ``content``)."""
    turns = rec.get("trajectory")
    return ("instance_id" in rec and isinstance(turns, list) and bool(turns) and type(turns[0]) is dict
            and isinstance(turns[0].get("role"), str) and "text" in turns[0] and "content" not in turns[0])


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import convert_records

    yield from convert_records(path, _records(path, data), lambda n, rec: convert(rec, path, n), "SWE-agent row",
                               skip_invalid=skip_invalid, on_invalid=on_invalid)


def _records(path: Path, data: Any) -> Iterator[tuple[str, Any]]:
    """(where, row): a JSON line (None where it does not parse), a JSON list's elements, or the one row."""
    if data is not None:
        for i, rec in enumerate(data if isinstance(data, list | ArrayRecords) else [data]):
            yield f"record {i}", rec
        return
    for lineno, raw in jsonl_lines(path):
        try:
            yield f"line {lineno}", jsontext.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            yield f"line {lineno}", None


def command(text: str) -> str | None:
    """The command of an ``ai`` turn: the last fenced block not nested in another (SWE-agent 0.x's
    ``ThoughtActionParser``), stripped; None when there is none."""
    stack: list[re.Match] = []
    last = None
    for m in _FENCE.finditer(text):
        if stack and not m.group(1):  # a closing fence
            start = stack.pop()
            if not stack:
                last = (start, m)
        elif m.group(1) is not None:  # an opening one
            stack.append(m)
    if last is None:
        return None
    return text[last[0].end():last[1].start()].strip() or None


def _verdict(rec: dict) -> float | None:
    target = rec.get("target")
    if target is None:
        return None
    if target is True or target is False or (type(target) is int and target in (0, 1)):
        return float(target)
    raise ValueError(f"target must be true or false (or 1 / 0), got {target!r}"[:200])


def convert(rec: Any, path: Path, n: int = 0) -> Trajectory:
    if not isinstance(rec, dict) or not matches(rec):
        raise ValueError("a SWE-agent row needs 'instance_id' and a 'trajectory' list of {role, text} turns")
    instance_id = rec["instance_id"]
    if not isinstance(instance_id, str) or not instance_id.strip():
        raise ValueError(f"instance_id must be a non-empty string, got {instance_id!r}"[:200])
    score = _verdict(rec)
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    task = None
    pending: str | None = None  # the call the next user turn answers
    answered: str | None = None  # the call last answered (a second observation in a row answers it again)
    steps = 0
    for i, turn in enumerate(rec["trajectory"]):
        if type(turn) is not dict or turn.get("role") not in ROLES:
            role = turn.get("role") if type(turn) is dict else None
            raise ValueError(f"trajectory[{i}] is not a turn with role system, user or ai (role {role!r})"[:200])
        text = turn.get("text")
        if turn["role"] == "system":
            prompt = turn.get("system_prompt")
            text = prompt if isinstance(prompt, str) and prompt else text
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise ValueError(f"trajectory[{i}].text must be a string, got {type(text).__name__}")
        if turn["role"] == "system":
            messages.append({"role": "system", "content": text})
        elif turn["role"] == "ai":
            steps += 1
            action = command(text)
            pending = answered = None
            if action is None:
                messages.append({"role": "assistant", "content": text})
                continue
            pending = f"call_{len(messages)}"
            messages.append({"role": "assistant", "content": text, "tool_calls": [
                {"id": pending, "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": action})}}]})
        elif pending or answered:
            call_id = pending or answered
            if swe_agent.REFUSAL.match(text[:300]):
                events.append(Event(type="tool_error", step=len(messages), detail=text[:500]))
            messages.append({"role": "tool", "tool_call_id": call_id, "name": "bash", "content": text})
            pending, answered = None, call_id
        else:
            task = text if task is None else task
            messages.append({"role": "user", "content": text})
    exit_status = rec.get("exit_status") if isinstance(rec.get("exit_status"), str) else ""
    termination, ended = swe_agent.ending(exit_status, max(len(messages) - 1, 0))
    events += ended
    patch = rec.get("generated_patch") if isinstance(rec.get("generated_patch"), str) else ""
    model = rec.get("model_name") if isinstance(rec.get("model_name"), str) and rec["model_name"] else None
    return Trajectory.with_messages(
        messages, checked=True,
        id=f"{path.stem}:{instance_id}:{n}",
        task_id=instance_id,
        model=model,
        task=task,
        events=events,
        final_answer=patch if termination == Termination.delivered else None,
        score=score,
        termination=termination,
        usage=Usage(steps=steps),
        meta={"source_format": "nebius-swe-agent", "exit_status": exit_status, **actions_from_text(messages)},
    )
