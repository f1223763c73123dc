"""LangSmith runs: the run records ``Client.list_runs`` returns (and LangSmith's export writes), flat with
``parent_run_id`` / ``trace_id``, or as one run tree with nested ``child_runs``. Files: a JSON list of
runs, JSONL (one run a line), or ``{"runs": [...], "feedback": [...]}``.

One trajectory per trace (root run: no ``parent_run_id``):

- conversation: the last ``llm`` run of the trace (by start time) holds the whole history its model saw
  (``inputs.messages``) and its reply (``outputs.generations``); LangChain's message forms are read
  (``{"type": "human" | "ai" | "tool" | "system", ...}`` dumps and ``{"lc": 1, "kwargs": ...}``
  serialisations; ``tool_calls``, ``tool_call_id``, an ``ai`` message's ``name`` = the agent). When the
  root's ``outputs.messages`` (a LangGraph state) holds more, it is used instead. Without any, the root's
  inputs and outputs become one user and one assistant message.
- errors: a ``tool`` run with ``error`` is a ``tool_error`` event at its result (a tool message with
  ``status: "error"`` as well); a failed root run ends with ``termination=error`` and a ``harness_error`` event --
  an ``infra_error`` event (class E) where its ``error`` names a model provider's exception (LangChain's tracer writes
  ``repr(error)`` and then the traceback: ``RateLimitError("Error code: 429 ...")Traceback ...``; the names are
  ``traces/endings.py``'s); LangGraph's ``GraphRecursionError`` (its ``recursion_limit`` reached) is the step budget
  (``step_budget``, a ``budget_exhausted`` event).
- score: the root run's feedback -- a ``feedback`` record (``run_id``, ``key``, ``score``) of the file,
  else ``feedback_stats`` (the average of its first key); scores outside 0..1 are ignored. Unscored
  otherwise.
- usage: the ``llm`` runs' ``prompt_tokens`` / ``completion_tokens`` (or their ``usage_metadata``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.endings import infra_event, provider_exception
from evoharness.traces.importers._shape import agent_name, arguments, arr, content_text, count, obj, text
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error

ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "AIMessageChunk": "assistant",
         "tool": "tool", "system": "system", "HumanMessage": "user", "AIMessage": "assistant",
         "ToolMessage": "tool", "SystemMessage": "system"}


def is_run(rec: Any) -> bool:
    return isinstance(rec, dict) and isinstance(rec.get("run_type"), str) and "id" in rec and (
        "inputs" in rec or "parent_run_id" in rec or "trace_id" in rec)


def matches(data: Any) -> bool:
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        return bool(data["runs"]) and is_run(data["runs"][0])
    return is_run(data)


def _records(path: Path, data: Any, bad: Callable[[InputError], None]) -> tuple[list[tuple[str, Any]], list[Any]]:
    """(where, record) of each run or feedback record, and the feedback of a ``{runs, feedback}`` file; a JSON line
    that does not parse is handed to ``bad`` (which raises unless skipping) and the lines after it are read."""
    if data is None:
        from evoharness.traces.store import jsonl_lines

        out = []
        for lineno, raw in jsonl_lines(path):
            try:
                out.append((f"line {lineno}", jsontext.loads(raw)))
            except (ValueError, RecursionError):
                bad(InputError(str(path), "invalid JSON (truncated or not JSON)", where=f"line {lineno}"))
        return out, []
    if isinstance(data, dict) and "runs" in data:
        return [(f"runs[{i}]", r) for i, r in enumerate(arr(data.get("runs")))], arr(data.get("feedback"))
    if isinstance(data, list):
        return [(f"record {i}", r) for i, r in enumerate(data)], []
    return [("record 0", data)], []


def _flatten(run: dict[str, Any], parent: str | None, out: list[dict[str, Any]], depth: int = 0) -> None:
    if depth > 200:
        raise ValueError("run tree nested too deeply")
    rec = {k: v for k, v in run.items() if k != "child_runs"}
    if parent is not None and not rec.get("parent_run_id"):
        rec["parent_run_id"] = parent
    out.append(rec)
    for child in arr(run.get("child_runs")):
        if isinstance(child, dict):
            _flatten(child, text(run.get("id")), out, depth + 1)


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import report_invalid

    records, feedback = _records(path, data, lambda e: report_invalid(skip_invalid, on_invalid, e))
    runs: list[dict[str, Any]] = []
    for where, rec in records:
        if rec is not None and not is_run(rec) and not (isinstance(rec, dict) and "feedback_source" in rec):
            report_invalid(skip_invalid, on_invalid, InputError(
                str(path), "not a LangSmith run (needs 'id', 'run_type' and 'inputs')", where=where))
            continue
        if is_run(rec):
            try:
                _flatten(rec, None, runs)
            except ValueError as e:
                report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=where))
        elif isinstance(rec, dict):
            feedback.append(rec)
    by_id = {text(r.get("id")): r for r in runs}
    traces: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        traces.setdefault(_trace_of(r, by_id), []).append(r)
    for trace_id, group in traces.items():
        try:
            yield convert(trace_id, group, feedback)
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=f"trace {trace_id}"))


def _trace_of(run: dict[str, Any], by_id: dict[str | None, dict[str, Any]]) -> str:
    if text(run.get("trace_id")):
        return text(run["trace_id"]) or ""
    cur, hops = run, 0
    while text(cur.get("parent_run_id")) in by_id and hops < 1000:
        cur = by_id[text(cur.get("parent_run_id"))]
        hops += 1
    return text(cur.get("id")) or "trace"


# ---- LangChain messages ---------------------------------------------------------------------------

def message(m: Any) -> dict[str, Any] | None:
    """One LangChain message (a dump or an ``lc`` serialisation) as an OpenAI chat message."""
    if isinstance(m, list | tuple) and len(m) == 2 and isinstance(m[0], str):  # ("user", "text") tuples
        return {"role": ROLES.get(m[0], "user"), "content": content_text(m[1])}
    m = obj(m)
    if m.get("lc") is not None and isinstance(m.get("kwargs"), dict):
        kind = text(arr(m.get("id"))[-1]) if arr(m.get("id")) else None
        m = {**m["kwargs"], "type": m["kwargs"].get("type") or kind}
    role = ROLES.get(text(m.get("type")) or text(m.get("role")) or "")
    if role is None:
        return None
    msg: dict[str, Any] = {"role": role, "content": content_text(m.get("content"))}
    if role == "assistant":
        calls = []
        for k, c in enumerate(arr(m.get("tool_calls"))):
            c = obj(c)
            fn = obj(c.get("function"))
            name = text(c.get("name")) or text(fn.get("name"))
            if name:
                calls.append({"id": text(c.get("id")) or f"call_{k}", "type": "function", "function": {
                    "name": name, "arguments": arguments(c["args"] if "args" in c else fn.get("arguments"))}})
        if calls:
            msg["tool_calls"] = calls
            msg["content"] = msg["content"] or None
        if text(m.get("name")):
            msg["name"] = agent_name(text(m["name"]) or "")
    if role == "tool":
        msg["tool_call_id"] = text(m.get("tool_call_id")) or ""
        if text(m.get("name")):
            msg["name"] = text(m["name"])
        if m.get("status") == "error":
            msg["status"] = "error"
    return msg


def _messages(value: Any) -> list[dict[str, Any]]:
    items = arr(value)
    if len(items) == 1 and isinstance(items[0], list):  # llm runs: inputs.messages = [[...]]
        items = items[0]
    return [m for m in (message(x) for x in items) if m is not None]


def _llm_output(run: dict[str, Any]) -> list[dict[str, Any]]:
    out = obj(run.get("outputs"))
    gens = arr(out.get("generations"))
    first = arr(gens[0]) if gens and isinstance(gens[0], list) else gens
    msgs = []
    for g in first[:1]:
        g = obj(g)
        m = message(g.get("message")) if g.get("message") is not None else None
        if m is None and text(g.get("text")) is not None:
            m = {"role": "assistant", "content": text(g.get("text"))}
        if m is not None:
            msgs.append(m)
    return msgs


def _usage(run: dict[str, Any]) -> tuple[int, int]:
    p, c = count(run.get("prompt_tokens")), count(run.get("completion_tokens"))
    if p or c:
        return p, c
    for g in arr((arr(obj(run.get("outputs")).get("generations")) or [[]])[0]):
        u = obj(obj(obj(obj(g).get("message")).get("kwargs")).get("usage_metadata")) or obj(
            obj(obj(g).get("message")).get("usage_metadata"))
        p, c = p + count(u.get("input_tokens")), c + count(u.get("output_tokens"))
    return p, c


def convert(trace_id: str, runs: list[dict[str, Any]], feedback: list[Any]) -> Trajectory:
    runs = sorted(runs, key=lambda r: text(r.get("start_time")) or "")
    roots = [r for r in runs if not text(r.get("parent_run_id"))]
    root = roots[0] if roots else runs[0]
    llms = [r for r in runs if r.get("run_type") in ("llm", "chat_model")]
    messages: list[dict[str, Any]] = []
    if llms:
        last = llms[-1]
        messages = _messages(obj(last.get("inputs")).get("messages")) + _llm_output(last)
    state = _messages(obj(root.get("outputs")).get("messages"))
    if len([m for m in state if m["role"] != "system"]) > len([m for m in messages if m["role"] != "system"]):
        system = [m for m in messages if m["role"] == "system"][:1]
        messages = system + [m for m in state if m["role"] != "system"]
    if not messages:
        inputs, outputs = obj(root.get("inputs")), obj(root.get("outputs"))
        messages = [{"role": "user", "content": content_text(inputs.get("input", inputs.get("question")))
                     or json.dumps(inputs, default=str)[:10_000]}]
        answer = outputs.get("output", outputs.get("answer"))
        if answer is not None and not root.get("error"):
            messages.append({"role": "assistant", "content": content_text(answer) or json.dumps(answer, default=str)})

    events: list[Event] = []
    failed_tools = [r for r in runs if r.get("run_type") == "tool" and r.get("error")]
    for i, m in enumerate(messages):
        if m["role"] == "tool" and (m.pop("status", None) == "error" or any(
                text(r.get("name")) == m.get("name") for r in failed_tools)):
            detail = m["content"] or ""
            events.append(Event(type=classify_tool_error(detail), step=i, detail=detail[:500]))
    error = text(root.get("error"))
    final_answer = None
    if not error:
        last_call = max((i for i, m in enumerate(messages) if m.get("tool_calls")), default=-1)
        final_answer = next((m["content"] for m in reversed(messages[last_call + 1:])
                             if m["role"] == "assistant" and isinstance(m.get("content"), str)
                             and m["content"].strip()), None)
    name = _exception_name(error) if error else ""
    budget = name.rsplit(".", 1)[-1] == "GraphRecursionError"  # LangGraph's recursion_limit: the step budget it sets
    if error and provider_exception(name):  # the model provider failed the run: class E
        events.append(infra_event(max(len(messages) - 1, 0), error))
    elif budget:
        events.append(Event(type="budget_exhausted", step=max(len(messages) - 1, 0), detail=error[:500]))
    elif error:
        events.append(Event(type="harness_error", step=max(len(messages) - 1, 0), detail=error[:500]))
    prompt = completion = 0
    for r in llms:
        p, c = _usage(r)
        prompt, completion = prompt + p, completion + c
    model = next((text(obj(obj(r.get("extra")).get("invocation_params")).get("model")
                       or obj(obj(r.get("extra")).get("metadata")).get("ls_model_name")) for r in llms), None)
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"langsmith:{text(root.get('id')) or trace_id}", task_id=_task_id(root) or trace_id, model=model,
        task=next((m["content"] for m in messages if m["role"] == "user"), None),
        events=events, final_answer=final_answer, score=_score(root, feedback),
        termination=Termination.step_budget if budget else Termination.error if error else (
            Termination.delivered if final_answer is not None else Termination.aborted),
        usage=Usage(steps=sum(m["role"] == "assistant" for m in messages), prompt_tokens=prompt,
                    completion_tokens=completion),
        meta={"source_format": "langsmith", "trace_id": trace_id, "root_run": text(root.get("name")),
              "runs": len(runs), "session_id": text(root.get("session_id"))},
    )


def _task_id(root: dict[str, Any]) -> str | None:
    ref = text(root.get("reference_example_id"))
    meta = obj(obj(root.get("extra")).get("metadata"))
    return ref or text(meta.get("task_id")) or text(meta.get("thread_id"))


def _score(root: dict[str, Any], feedback: list[Any]) -> float | None:
    rid = text(root.get("id"))
    for f in feedback:
        f = obj(f)
        v = f.get("score")
        if text(f.get("run_id")) == rid and isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1:
            return float(v)
    for stats in obj(root.get("feedback_stats")).values():
        v = obj(stats).get("avg")
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1:
            return float(v)
    return None


_LEADING_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)\s*[(:]")


def _exception_name(error: str) -> str:
    """The exception class a run's ``error`` opens with (``repr(error)``: ``Name(...)``; or ``Name: ...``), else ""."""
    m = _LEADING_NAME.match(error[:300])
    return m.group(1) if m else ""
