"""AutoGen AgentChat runs (autogen-agentchat 0.4 and later, Magentic-One's ``MagenticOneGroupChat`` included).

A run is what ``team.run()`` / ``agent.run()`` returns, a ``TaskResult``, as AgentChat serialises it: an object
``{"messages": [...], "stop_reason": ...}`` (``TaskResult.model_dump_json()``), or its messages alone, a JSON list
(``[m.dump() for m in result.messages]``). A file may also hold a JSON list of ``TaskResult`` objects, or JSONL with
one per line: one trajectory each. Every message carries ``source`` (the agent's name, ``user`` for the task) and
``type``; none carries a chat ``role``, which tells these files apart from OpenAI chat records.

Messages become canonical chat messages, one step each:

- chat messages (``TextMessage``, ``MultiModalMessage``, ``StopMessage``, ``HandoffMessage``,
  ``ToolCallSummaryMessage``, ``StructuredMessage[...]``) and the events that carry an agent's text
  (``ThoughtEvent``, ``CodeGenerationEvent``, ``CodeExecutionEvent``'s output, ``MemoryQueryEvent``, ``SelectorEvent``)
  become assistant messages named after their ``source`` (an event's type is kept in ``role_detail``); a message from
  ``user``, or from a user proxy (a source that asked for input: ``UserInputRequestedEvent``), is a user message. A
  multimodal message's images become ``<image>``, as AgentChat renders them.
- ``ToolCallRequestEvent`` is an assistant message with ``tool_calls`` (a ``ThoughtEvent`` just before it from the same
  agent is its text); ``ToolCallExecutionEvent`` is one ``tool`` message per result (an empty ``call_id``, as a model
  that gives no call ids leaves it, answers the call in its place in the latest request), and a result with
  ``is_error: true`` is a ``tool_error`` event there (or ``tool_infra_error`` where it reads like an infrastructure
  fault).
- ``ModelClientStreamingChunkEvent`` (partial text the full message repeats), ``UserInputRequestedEvent`` and
  ``SelectSpeakerEvent`` are no step; their count is ``meta["skipped_events"]``.

The task is the first user message; the final answer the last agent text that is not a bare ``TERMINATE``.
``stop_reason`` (kept in ``meta``) gives the termination: a message, turn, round or token limit is ``step_budget`` (with
a ``budget_exhausted`` event), a timeout ``timeout``; otherwise the run delivered, or aborted with no agent text.
AgentChat records no outcome, so the run is unscored (never called healthy).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.importers._shape import agent_name, arguments, count, obj, text
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error

SKIPPED = frozenset({"ModelClientStreamingChunkEvent", "UserInputRequestedEvent", "SelectSpeakerEvent"})
BUDGET = ("Maximum number of messages", "Maximum number of turns", "Max rounds reached", "Token usage limit")


def is_message(m: Any) -> bool:
    """An AgentChat message as dumped: a string ``source`` and ``type``, no chat ``role``."""
    return isinstance(m, dict) and isinstance(m.get("source"), str) and isinstance(m.get("type"), str) \
        and "role" not in m


def is_message_list(data: Any) -> bool:
    """A non-empty JSON list of AgentChat messages (a ``TaskResult``'s messages dumped alone)."""
    return isinstance(data, list) and bool(data) and all(is_message(m) for m in data)


def matches(rec: Any) -> bool:
    """A ``TaskResult`` object: ``messages``, a non-empty list of AgentChat messages."""
    return isinstance(rec, dict) and is_message_list(rec.get("messages"))


def _records(path: Path, data: Any) -> Iterator[tuple[str | None, str, Any]]:
    """(where, trajectory source name, record) for each run in the file."""
    if data is None:  # JSONL: one TaskResult a line, read line by line
        with path.open("rb") as fh:
            n = 0
            for lineno, raw in enumerate(fh, start=1):
                if raw.strip():
                    try:
                        rec: Any = jsontext.loads(raw)
                    except (UnicodeDecodeError, ValueError, RecursionError):
                        rec = ValueError("invalid JSON (truncated or not JSON)")
                    yield f"line {lineno}", f"{path.stem}:{n}", rec
                    n += 1
    elif isinstance(data, list) and not is_message_list(data):  # a JSON list of TaskResults
        for i, rec in enumerate(data):
            yield f"record {i}", f"{path.stem}:{i}", rec
    else:  # one TaskResult, its messages alone, or something else (refused by convert)
        yield None, path.stem, data


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import report_invalid

    for where, source, rec in _records(path, data):
        try:
            if isinstance(rec, ValueError):
                raise rec
            yield convert(rec, source)
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=where))


def _text(content: Any) -> str:
    """A message's content as text: a string as is, a multimodal list's strings with ``<image>`` for an image (as
    AgentChat's ``to_text`` renders it), anything else (a structured message's object) as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p if isinstance(p, str) else "<image>" for p in content)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def convert(rec: Any, source: str) -> Trajectory:
    if is_message_list(rec):
        rec = {"messages": rec}
    if not isinstance(rec, dict) or not isinstance(rec.get("messages"), list):
        raise ValueError("an AutoGen TaskResult needs a 'messages' list (or is that list)")
    raw = rec["messages"]
    proxies = {m["source"] for m in raw if isinstance(m, dict) and m.get("type") == "UserInputRequestedEvent"
               and isinstance(m.get("source"), str)}
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    prompt = completion = skipped = 0
    task = final_answer = None
    pending: list[str] = []  # the call ids of the latest ToolCallRequestEvent
    for j, m in enumerate(raw):
        if not is_message(m):
            raise ValueError(f"message {j} needs a string 'source' and 'type' (an AgentChat message)")
        kind, who = m["type"], m["source"]
        usage = obj(m.get("models_usage"))
        prompt += count(usage.get("prompt_tokens"))
        completion += count(usage.get("completion_tokens"))
        if kind in SKIPPED:
            skipped += 1
        elif kind == "ToolCallRequestEvent":
            calls = [_call(c, j, k) for k, c in enumerate(m.get("content") or [])] if isinstance(
                m.get("content"), list) else None
            if calls is None:
                raise ValueError(f"message {j}: a ToolCallRequestEvent's content must be a list of calls")
            pending = [c["id"] for c in calls]
            last = messages[-1] if messages else {}
            if last.get("role_detail") == "ThoughtEvent" and last.get("name") == agent_name(who) \
                    and "tool_calls" not in last:
                del last["role_detail"]  # the thought is the text of the message that makes the calls
                last["tool_calls"] = calls
            else:
                messages.append({"role": "assistant", "name": agent_name(who), "content": "", "tool_calls": calls})
        elif kind == "ToolCallExecutionEvent":
            if not isinstance(m.get("content"), list):
                raise ValueError(f"message {j}: a ToolCallExecutionEvent's content must be a list of results")
            for k, r in enumerate(m["content"]):
                r = obj(r)
                out = _text(r.get("content"))
                # a model that gives no call ids (Gemini through AutoGen: id '') leaves the results' call_id empty too:
                # the k-th result answers the k-th call of the latest request
                cid = text(r.get("call_id")) or (pending[k] if k < len(pending) else f"call_{j}_{k}")
                msg = {"role": "tool", "tool_call_id": cid, "content": out}
                if isinstance(r.get("name"), str):
                    msg["name"] = r["name"]
                messages.append(msg)
                if r.get("is_error") is True:
                    events.append(Event(type=classify_tool_error(out), step=len(messages) - 1, detail=out[:500]))
        else:
            said = _said(m, kind)
            if who.strip().lower() == "user" or who in proxies:
                messages.append({"role": "user", "content": said})
                task = said if task is None else task
                continue
            msg = {"role": "assistant", "name": agent_name(who), "content": said}
            if kind != "TextMessage":
                msg["role_detail"] = f"{kind} -> {m['target']}" if isinstance(m.get("target"), str) else kind
            messages.append(msg)
            if said.strip() and said.strip() != "TERMINATE":
                final_answer = said
    stop = text(rec.get("stop_reason"))
    termination = Termination.delivered if final_answer is not None else Termination.aborted
    if stop and stop.startswith(BUDGET):
        termination = Termination.step_budget
        events.append(Event(type="budget_exhausted", step=max(len(messages) - 1, 0), detail=stop[:500]))
    elif stop and stop.startswith("Timeout of"):
        termination = Termination.timeout
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"autogen:{source}", task_id=source, task=task, events=events,
        final_answer=final_answer if termination == Termination.delivered else None, score=None,
        termination=termination,
        usage=Usage(steps=sum(1 for x in messages if x["role"] == "assistant"), prompt_tokens=prompt,
                    completion_tokens=completion),
        meta={"source_format": "autogen", "stop_reason": stop, "skipped_events": skipped},
    )


def _said(m: dict[str, Any], kind: str) -> str:
    """The text of a message that is no tool call or result."""
    if kind == "CodeExecutionEvent":  # result: {exit_code, output}
        result = m.get("result")
        return _text(obj(result).get("output")) if isinstance(result, dict) else _text(result)
    if kind == "MemoryQueryEvent":  # content: [{content, mime_type, metadata}]
        items = m.get("content")
        return "\n".join(_text(obj(x).get("content")) for x in items) if isinstance(items, list) else _text(items)
    return _text(m.get("content"))


def _call(c: Any, j: int, k: int) -> dict[str, Any]:
    c = obj(c)
    name = text(c.get("name"))
    if not name:
        raise ValueError(f"message {j}: tool call {k} has no 'name'")
    return {"id": text(c.get("id")) or f"call_{j}_{k}", "type": "function",
            "function": {"name": name, "arguments": arguments(c.get("arguments"))}}
