"""ATIF: the Agent Trajectory Interchange Format (Harbor / terminal-bench, NeMo Agent Toolkit).

One JSON object per file: ``schema_version`` ``"ATIF-v1.x"``, ``agent`` (name, model_name), ``steps``
and optional ``final_metrics``. Each step becomes chat messages:

- ``source: system`` -> a system message, ``user`` -> a user message (``message`` text; a list of content
  parts gives its text parts);
- ``source: agent`` -> an assistant message named after the agent, with its ``tool_calls``
  (``tool_call_id``, ``function_name``, ``arguments``) as OpenAI tool calls; then each
  ``observation.results`` entry with a ``source_call_id`` becomes the ``tool`` result of that call, one
  without (a non-tool action, a system event) a user message named ``environment``. A result whose text
  reads like an error (``Error...``, ``Traceback``, ``Permission denied``, ``command not found``)
  becomes a ``tool_error`` (or infrastructure) event at that tool message. The step's ``reasoning_content`` (the
  model's thinking) is kept in ``meta["reasoning"]`` (``{step, text}``), not in the message's text.

Final answer: the last agent step's text when that step made no tool call (else not delivered).
Usage: ``final_metrics`` totals, else the sum of the steps' ``metrics``.
Score: ATIF itself carries none. In Harbor's trial layout (``<trial>/agent/trajectory.json``) the
reward is ``verifier_result.rewards.reward`` of ``<trial>/result.json``; else ``extra.reward`` of the
root object; else unscored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.importers._shape import (
    agent_name,
    arguments,
    arr,
    content_text,
    count,
    keep_reasoning,
    obj,
    score,
    text,
)
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error

ERRORISH = re.compile(r"^\s*(error\b|traceback|exception\b)|permission denied|command not found|no such file",
                      re.IGNORECASE)


def matches(data: Any) -> bool:
    return isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF-") and "steps" in data


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def convert(path: Path, data: Any) -> Trajectory:
    if not matches(data):
        raise ValueError("ATIF trajectory needs 'schema_version' (\"ATIF-v1.x\") and 'steps'")
    steps = data["steps"]
    if not isinstance(steps, list) or not steps:
        raise ValueError("ATIF 'steps' must be a non-empty list")
    agent = obj(data.get("agent"))
    name = agent_name(text(agent.get("name")) or "agent")
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    final_answer: str | None = None
    prompt = completion = agent_steps = 0
    reasoning: list[dict[str, Any]] = []  # {step, text}: an agent step's reasoning_content
    model = text(agent.get("model_name"))
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ValueError(f"step {i} is not an object")
        source = step.get("source")
        if source not in ("system", "user", "agent"):
            raise ValueError(f"step {i}: 'source' must be system, user or agent, got {source!r}"[:200])
        body = content_text(step.get("message"))
        if source != "agent":
            messages.append({"role": source, "content": body})
            _observations(step, {}, messages, events)
            continue
        agent_steps += 1
        model = model or text(step.get("model_name"))
        metrics = obj(step.get("metrics"))
        prompt += count(metrics.get("prompt_tokens"))
        completion += count(metrics.get("completion_tokens"))
        calls, names = [], {}
        for j, c in enumerate(arr(step.get("tool_calls"))):
            c = obj(c)
            fn = text(c.get("function_name"))
            if not fn:
                raise ValueError(f"step {i}: tool call {j} has no 'function_name'")
            call_id = text(c.get("tool_call_id")) or f"call_{i}_{j}"
            names[call_id] = fn
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": fn, "arguments": arguments(c.get("arguments"))}})
        msg: dict[str, Any] = {"role": "assistant", "name": name, "content": body or None}
        if calls:
            msg["tool_calls"] = calls
        messages.append(msg)
        keep_reasoning(reasoning, len(messages) - 1, step.get("reasoning_content"))
        final_answer = body if not calls and body.strip() else None
        _observations(step, names, messages, events)

    totals = obj(data.get("final_metrics"))
    usage = Usage(steps=agent_steps,
                  prompt_tokens=count(totals.get("total_prompt_tokens")) or prompt,
                  completion_tokens=count(totals.get("total_completion_tokens")) or completion)
    result = _harbor_result(path)
    reward = _harbor_reward(result, path) if result else score(obj(data.get("extra")).get("reward"))
    session = text(data.get("session_id")) or text(data.get("trajectory_id")) or path.stem
    task_id = text(obj(result).get("task_name")) or text(obj(data.get("extra")).get("task_id")) or session
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"atif:{session}", task_id=task_id, model=model,
        task=next((m["content"] for m in messages if m["role"] == "user"), None),
        events=events, final_answer=final_answer, score=reward,
        termination=Termination.delivered if final_answer is not None else Termination.aborted,
        usage=usage,
        meta={"source_format": "atif", "schema_version": data.get("schema_version"), "agent": text(agent.get("name")),
              "agent_version": text(agent.get("version")), "cost_usd": totals.get("total_cost_usd"),
              "notes": text(data.get("notes")), **({"reasoning": reasoning} if reasoning else {})},
    )


def _observations(step: dict[str, Any], names: dict[str, str], messages: list[dict[str, Any]],
                  events: list[Event]) -> None:
    for r in arr(obj(step.get("observation")).get("results")):
        r = obj(r)
        content = content_text(r.get("content"))
        call_id = text(r.get("source_call_id"))
        if call_id and call_id in names:
            messages.append({"role": "tool", "tool_call_id": call_id, "name": names[call_id], "content": content})
            if ERRORISH.search(content):
                events.append(Event(type=classify_tool_error(content), step=len(messages) - 1, detail=content[:500]))
        else:
            messages.append({"role": "user", "name": "environment", "content": content})


def _harbor_result(path: Path) -> dict[str, Any] | None:
    """Harbor's ``<trial>/result.json`` beside ``<trial>/agent/trajectory.json``, if there is one."""
    candidate = path.parent.parent / "result.json"
    if path.parent.name != "agent" or not candidate.is_file():
        return None
    try:
        data = jsontext.loads(candidate.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InputError(str(candidate), f"unreadable Harbor result.json: {e}") from None
    if not isinstance(data, dict):
        raise InputError(str(candidate), "Harbor result.json is not an object")
    return data


def _harbor_reward(result: dict[str, Any], path: Path) -> float | None:
    rewards = obj(obj(result.get("verifier_result")).get("rewards"))
    try:
        return score(rewards.get("reward"))
    except ValueError as e:
        raise InputError(str(path.parent.parent / "result.json"), str(e), where="verifier_result.rewards") from None
