"""OTLP JSON traces (OpenTelemetry's OTLP/HTTP JSON encoding, and the file exporters' JSON lines: one
``{"resourceSpans": [...]}`` export request per line), in either attribute dialect:

- OpenTelemetry GenAI semantic conventions: ``gen_ai.operation.name`` (``chat`` / ``text_completion`` /
  ``generate_content``, ``execute_tool``, ``invoke_agent``), ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (JSON, message parts), ``gen_ai.tool.*``,
  ``gen_ai.agent.name``, ``gen_ai.usage.input_tokens`` / ``output_tokens``; also the older indexed
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes;
- OpenInference (Phoenix, Arize): ``openinference.span.kind`` (``LLM``, ``TOOL``, ``AGENT``, ``CHAIN``),
  ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*`` (with ``tool_calls``),
  ``llm.token_count.*``, ``llm.model_name``, ``tool.name``.

Spans are grouped by trace id: **one trajectory per trace**, in the order traces first appear. The
conversation is rebuilt from the LLM spans in start order: each call's input messages extend the
conversation where they continue it (a new agent's call with its own context adds only the messages not
seen yet), then its output messages follow, named after the agent that made the call (the nearest
``AGENT`` / ``invoke_agent`` span above it, or ``gen_ai.agent.name``). A tool call that no later LLM call
answered gets its result from the tool span (``gen_ai.tool.call.result`` / ``output.value``).
Errors: a tool span with status ERROR is a ``tool_error`` event at its result; a failed LLM span is a
``model_error`` event; a failed root span ends the trajectory with ``termination=error`` and a ``harness_error``
event -- an ``infra_error`` event (class E) where the exception it recorded (``exception.type``) is a model provider's
(``traces/endings.py``: ``openai.RateLimitError``, ...). Otherwise the
final answer is the last assistant text after the last tool call. Usage: the LLM spans' token counts.
Score: ``evoharness.score`` on the root span (what ``evoharness export-otel`` writes, with task id,
split, rollout, harness commit and its harness events as ``evoharness.event`` span events, which replace
the events read off span statuses), else a ``gen_ai.evaluation.result`` event's score in 0..1, else
unscored.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.endings import infra_event, provider_exception
from evoharness.traces.importers._shape import agent_name, arguments, arr, content_text, count, obj, text
from evoharness.traces.models import Event, Split, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error

LLM_OPERATIONS = {"chat", "text_completion", "generate_content"}
ERROR_CODES = (2, "2", "STATUS_CODE_ERROR", "ERROR")


def matches(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("resourceSpans"), list)


# ---- reading the file ------------------------------------------------------------------------------

def _requests(path: Path, data: Any, bad: Callable[[InputError], None]) -> Iterator[tuple[str, Any]]:
    """The export requests in the file; a JSON line that does not parse is handed to ``bad`` (which raises unless
    skipping) and the lines after it are read (a broken line took the whole file with it under --skip-invalid)."""
    if data is not None:
        for i, req in enumerate(data if isinstance(data, list) else [data]):
            yield (f"record {i}" if isinstance(data, list) else "resourceSpans"), req
        return
    from evoharness.traces.store import jsonl_lines

    for lineno, raw in jsonl_lines(path):
        try:
            req = jsontext.loads(raw)
        except (ValueError, RecursionError):
            bad(InputError(str(path), "invalid JSON (truncated or not JSON)", where=f"line {lineno}"))
            continue
        yield f"line {lineno}", req


def value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as plain JSON (``intValue`` is a string in OTLP/JSON)."""
    v = obj(v)
    if "stringValue" in v:
        return text(v["stringValue"]) or ""
    if "intValue" in v:
        iv = v["intValue"]
        try:
            return int(iv) if not isinstance(iv, bool) and isinstance(iv, int | str) and len(str(iv)) < 30 else None
        except ValueError:
            return None
    if "doubleValue" in v:
        return v["doubleValue"] if isinstance(v["doubleValue"], int | float) else None
    if "boolValue" in v:
        return v["boolValue"] is True
    if "arrayValue" in v:
        return [value(x) for x in arr(obj(v["arrayValue"]).get("values"))]
    if "kvlistValue" in v:
        return attributes(obj(v["kvlistValue"]).get("values"))
    if "bytesValue" in v:
        return text(v["bytesValue"])
    return None


def attributes(kvs: Any) -> dict[str, Any]:
    out = {}
    for kv in arr(kvs):
        kv = obj(kv)
        key = text(kv.get("key"))
        if key is not None:
            out[key] = value(kv.get("value"))
    return out


def _span_id(v: Any) -> str:
    """Span / trace ids as hex (OTLP/JSON writes hex; protobuf's JSON mapping writes base64)."""
    s = text(v) or ""
    if s and len(s) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in s):
        return s.lower()
    try:
        return base64.b64decode(s, validate=True).hex() if s else ""
    except ValueError:
        return s


class Span:
    def __init__(self, raw: dict[str, Any], resource: dict[str, Any], order: int) -> None:
        self.trace_id = _span_id(raw.get("traceId"))
        self.span_id = _span_id(raw.get("spanId"))
        self.parent_id = _span_id(raw.get("parentSpanId"))
        self.name = text(raw.get("name")) or ""
        self.start = count(raw.get("startTimeUnixNano"))
        self.end = count(raw.get("endTimeUnixNano"))
        self.order = order
        self.attrs = attributes(raw.get("attributes"))
        status = obj(raw.get("status"))
        self.error = status.get("code") in ERROR_CODES
        self.error_message = text(status.get("message")) or ""
        self.events = [(text(obj(e).get("name")) or "", attributes(obj(e).get("attributes")))
                       for e in arr(raw.get("events"))]
        if self.error and not self.error_message:
            self.error_message = next((text(a.get("exception.message")) or "" for n, a in self.events
                                       if n == "exception"), "")
        self.resource = resource
        # the exception the span recorded (OpenTelemetry's ``record_exception``: ``exception.type`` is the class,
        # module-qualified, e.g. ``openai.RateLimitError``)
        self.exception_type = next((text(a.get("exception.type")) or "" for n, a in self.events
                                    if n == "exception"), "") if self.error else ""

    @property
    def kind(self) -> str:
        oi = text(self.attrs.get("openinference.span.kind"))
        if oi:
            return oi.upper()
        op = text(self.attrs.get("gen_ai.operation.name")) or ""
        if op == "execute_tool":
            return "TOOL"
        if op in ("invoke_agent", "create_agent"):
            return "AGENT"
        if op in LLM_OPERATIONS or (not op and ("gen_ai.input.messages" in self.attrs
                                                or "gen_ai.prompt.0.role" in self.attrs)):
            return "LLM"
        return ""


def _spans(path: Path, data: Any, bad: Callable[[InputError], None]) -> list[Span]:
    spans: list[Span] = []
    for where, req in _requests(path, data, bad):
        if not matches(req):
            bad(InputError(str(path), "not an OTLP export request (no 'resourceSpans' list)", where=where))
            continue
        for rs in req["resourceSpans"]:
            rs = obj(rs)
            resource = attributes(obj(rs.get("resource")).get("attributes"))
            for ss in arr(rs.get("scopeSpans")) + arr(rs.get("instrumentationLibrarySpans")):
                for raw in arr(obj(ss).get("spans")):
                    if isinstance(raw, dict) and raw.get("traceId"):
                        spans.append(Span(raw, resource, len(spans)))
    return spans


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import report_invalid

    spans = _spans(path, data, lambda e: report_invalid(skip_invalid, on_invalid, e))
    if not spans:
        report_invalid(skip_invalid, on_invalid, InputError(str(path), "no spans in the OTLP file"))
        return
    traces: dict[str, list[Span]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    for trace_id, group in traces.items():
        try:
            yield convert(trace_id, group)
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=f"trace {trace_id}"))


# ---- messages in the two dialects ---------------------------------------------------------------

def _oi_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for key, val in attrs.items():
        if not key.startswith(prefix):
            continue
        idx, _, rest = key[len(prefix):].partition(".")
        if not idx.isdigit() or len(idx) > 6:
            continue
        m = found.setdefault(int(idx), {"calls": {}, "parts": {}})
        rest = rest.removeprefix("message.")
        if rest.startswith("tool_calls."):
            j, _, field = rest[len("tool_calls."):].partition(".")
            if j.isdigit() and len(j) < 6:
                m["calls"].setdefault(int(j), {})[field.removeprefix("tool_call.")] = val
        elif rest.startswith("contents."):
            j, _, field = rest[len("contents."):].partition(".")
            if j.isdigit() and len(j) < 6 and field.endswith("text"):
                m["parts"][int(j)] = val
        else:
            m[rest] = val
    out = []
    for _, m in sorted(found.items()):
        content = text(m.get("content"))
        if content is None and m["parts"]:
            content = "".join(text(v) or "" for _, v in sorted(m["parts"].items()))
        msg: dict[str, Any] = {"role": _role(m.get("role")), "content": content}
        calls = [{"id": text(c.get("id")) or f"call_{k}", "type": "function",
                  "function": {"name": text(c.get("function.name")) or "", "arguments":
                               arguments(c.get("function.arguments"))}}
                 for k, c in sorted(m["calls"].items())]
        if calls:
            msg["tool_calls"] = calls
        if text(m.get("tool_call_id")):
            msg["tool_call_id"] = text(m["tool_call_id"])
        if text(m.get("name")) and msg["role"] == "tool":
            msg["name"] = text(m["name"])
        out.append(msg)
    return out


def _genai_messages(raw: Any) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: JSON text of messages with typed parts."""
    if isinstance(raw, str):
        try:
            raw = jsontext.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return [{"role": "user", "content": raw}]
    out: list[dict[str, Any]] = []
    for m in arr(raw):
        m = obj(m)
        role = _role(m.get("role"))
        texts, calls = [], []
        for p in arr(m.get("parts")):
            p = obj(p)
            kind = p.get("type")
            if kind == "text":
                texts.append(text(p.get("content")) or "")
            elif kind == "tool_call":
                calls.append({"id": text(p.get("id")) or f"call_{len(calls)}", "type": "function",
                              "function": {"name": text(p.get("name")) or "",
                                           "arguments": arguments(p.get("arguments"))}})
            elif kind == "tool_call_response":
                resp = p.get("response")
                out.append({"role": "tool", "tool_call_id": text(p.get("id")) or "",
                            "content": resp if isinstance(resp, str) else arguments(resp)})
        if texts or calls or role != "tool":
            msg: dict[str, Any] = {"role": "assistant" if role == "tool" else role,
                                   "content": "".join(texts) if texts or not calls else None}
            if calls:
                msg["tool_calls"] = calls
            if role != "tool" or texts or calls:
                out.append(msg)
    return out


def _legacy_genai(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The older indexed ``gen_ai.prompt.N.role`` / ``.content`` attributes (OpenLLMetry and others)."""
    out = []
    for i in range(10_000):
        role = attrs.get(f"{prefix}.{i}.role")
        content = attrs.get(f"{prefix}.{i}.content")
        if role is None and content is None:
            break
        msg: dict[str, Any] = {"role": _role(role or "assistant"), "content": content_text(content)}
        calls = []
        for j in range(1000):
            name = attrs.get(f"{prefix}.{i}.tool_calls.{j}.name")
            if name is None:
                break
            calls.append({"id": text(attrs.get(f"{prefix}.{i}.tool_calls.{j}.id")) or f"call_{i}_{j}",
                          "type": "function", "function": {"name": text(name) or "", "arguments": arguments(
                              attrs.get(f"{prefix}.{i}.tool_calls.{j}.arguments"))}})
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def _role(role: Any) -> str:
    r = (text(role) or "user").lower()
    return {"human": "user", "ai": "assistant", "model": "assistant", "function": "tool"}.get(
        r, r if r in ("system", "user", "assistant", "tool") else "user")


def llm_io(span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    a = span.attrs
    if "openinference.span.kind" in a:
        return _oi_messages(a, "llm.input_messages."), _oi_messages(a, "llm.output_messages.")
    inputs = _genai_messages(a["gen_ai.input.messages"]) if "gen_ai.input.messages" in a \
        else _legacy_genai(a, "gen_ai.prompt")
    system = a.get("gen_ai.system_instructions")
    if system is not None:
        parts = system
        if isinstance(system, str):
            try:
                parts = jsontext.loads(system)
            except (json.JSONDecodeError, RecursionError):
                parts = system
        content = "".join(text(obj(p).get("content")) or "" for p in parts) if isinstance(parts, list) \
            else content_text(parts)
        inputs = [{"role": "system", "content": content}] + [m for m in inputs if m["role"] != "system"]
    outputs = _genai_messages(a["gen_ai.output.messages"]) if "gen_ai.output.messages" in a \
        else _legacy_genai(a, "gen_ai.completion")
    return inputs, outputs


def _key(m: dict[str, Any]) -> tuple:
    calls = tuple(c.get("id") for c in m.get("tool_calls") or [] if isinstance(c, dict))
    return m.get("role"), (m.get("content") or "").strip() if isinstance(m.get("content"), str) else "", calls, \
        m.get("tool_call_id")


# ---- one trace -> one trajectory ------------------------------------------------------------------

def convert(trace_id: str, spans: list[Span]) -> Trajectory:
    spans = sorted(spans, key=lambda s: (s.start, s.order))
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in by_id]
    root = min(roots, key=lambda s: (s.start, s.order)) if roots else spans[0]

    def agent_of(s: Span) -> str | None:
        seen = 0
        cur: Span | None = s
        while cur is not None and seen < 1000:
            name = text(cur.attrs.get("gen_ai.agent.name")) or text(cur.attrs.get("agent.name"))
            if name:
                return name
            if cur.kind == "AGENT" and cur is not s:
                return cur.name.removeprefix("invoke_agent ").strip() or None
            cur = by_id.get(cur.parent_id)
            seen += 1
        return None

    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    seen: set[tuple] = set()
    model = None
    prompt = completion = steps = 0
    for s in spans:
        if s.kind != "LLM":
            continue
        model = model or text(s.attrs.get("gen_ai.request.model")) or text(s.attrs.get("llm.model_name"))
        prompt += count(s.attrs.get("gen_ai.usage.input_tokens") or s.attrs.get("llm.token_count.prompt"))
        completion += count(s.attrs.get("gen_ai.usage.output_tokens") or s.attrs.get("llm.token_count.completion"))
        inputs, outputs = llm_io(s)
        keys = [_key(m) for m in messages]
        if [_key(m) for m in inputs[: len(messages)]] == keys:
            new = inputs[len(messages):]
        else:
            new = [m for m in inputs if _key(m) not in seen]
        for m in new:
            messages.append(m)
            seen.add(_key(m))
        agent = agent_of(s)
        for m in outputs:
            if m["role"] == "assistant":
                steps += 1
                if agent:
                    m = {**m, "name": agent_name(agent)}
            messages.append(m)
            seen.add(_key(m))
        if s.error:
            events.append(Event(type="model_error", step=max(len(messages) - 1, 0),
                                detail=(s.error_message or f"{s.name} failed")[:500]))
    _answer_tool_calls(messages, [s for s in spans if s.kind == "TOOL"], events)

    ra = root.attrs
    final_answer = None
    if not root.error:
        last_call = max((i for i, m in enumerate(messages) if m.get("tool_calls")), default=-1)
        final_answer = next((m["content"] for m in reversed(messages[last_call + 1:])
                             if m["role"] == "assistant" and isinstance(m.get("content"), str)
                             and m["content"].strip()), None)
    termination = Termination.error if root.error else (
        Termination.delivered if final_answer is not None else Termination.aborted)
    if "evoharness.termination" in ra and text(ra["evoharness.termination"]) in Termination.__members__:
        termination = Termination(text(ra["evoharness.termination"]))
        final_answer = text(ra.get("evoharness.final_answer")) if "evoharness.final_answer" in ra else final_answer
    if root.error and provider_exception(root.exception_type):  # the model provider failed the run: class E
        events.append(infra_event(max(len(messages) - 1, 0),
                                  f"{root.exception_type}: {root.error_message or f'{root.name} failed'}"))
    elif root.error:
        events.append(Event(type="harness_error", step=max(len(messages) - 1, 0),
                            detail=(root.error_message or f"{root.name} failed")[:500]))
    exported = [Event(type=text(a.get("evoharness.event.type")) or "event", step=min(count(
                    a.get("evoharness.event.step")), max(len(messages) - 1, 0)),
                      detail=text(a.get("evoharness.event.detail")) or "")
                for s in spans for name, a in s.events if name == "evoharness.event"]
    if "evoharness.trajectory_id" in ra:  # our own export: its harness events are the record, not our guesses
        events = sorted(exported, key=lambda e: e.step)
    split = text(ra.get("evoharness.split"))
    rollout = ra.get("evoharness.rollout")
    task_id = (text(ra.get("evoharness.task_id")) or text(ra.get("session.id"))
               or text(ra.get("gen_ai.conversation.id")) or trace_id or "trace")
    return Trajectory(
        id=text(ra.get("evoharness.trajectory_id")) or f"otlp:{trace_id}",
        task_id=task_id,
        split=split if split in Split.__members__ else Split.unknown,
        harness_commit=text(ra.get("evoharness.harness_commit")),
        model=text(ra.get("gen_ai.request.model")) or model,
        rollout=rollout if isinstance(rollout, int) and 0 <= rollout < 2**31 else 0,
        task=next((m["content"] for m in messages if m["role"] == "user" and isinstance(m.get("content"), str)),
                  None),
        messages=messages, events=events, final_answer=final_answer, score=_score(root, spans),
        termination=termination,
        usage=Usage(steps=steps, prompt_tokens=prompt, completion_tokens=completion,
                    wall_seconds=max(0.0, (root.end - root.start) / 1e9) if root.end >= root.start else 0.0),
        meta={"source_format": "otlp", "trace_id": trace_id, "root_span": root.name, "spans": len(spans),
              "service": text(root.resource.get("service.name")),
              "dialect": "openinference" if any("openinference.span.kind" in s.attrs for s in spans) else "gen_ai"},
    )


def _answer_tool_calls(messages: list[dict[str, Any]], tools: list[Span], events: list[Event]) -> None:
    """Insert a tool span's result for each call nothing answered; mark failed tool spans as events."""
    by_call = {text(t.attrs.get("gen_ai.tool.call.id")): t for t in tools if text(t.attrs.get("gen_ai.tool.call.id"))}
    by_name: dict[str, list[Span]] = {}
    for t in tools:
        name = text(t.attrs.get("gen_ai.tool.name")) or text(t.attrs.get("tool.name")) or t.name
        by_name.setdefault(name.removeprefix("execute_tool ").strip(), []).append(t)
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        for c in m.get("tool_calls") or []:
            fn = obj(c.get("function"))
            queue = by_name.get(text(fn.get("name")) or "", [])
            span = by_call.get(c.get("id")) or (queue[0] if queue else None)
            if span is not None and span in queue:
                queue.remove(span)
            if c.get("id") not in answered and span is not None:
                result = span.attrs.get("gen_ai.tool.call.result", span.attrs.get("output.value"))
                messages.insert(i, {"role": "tool", "tool_call_id": c.get("id"), "name": fn.get("name"),
                                    "content": content_text(result) if not span.error or result is not None
                                    else f"Error: {span.error_message}"})
                answered.add(c.get("id"))
                i += 1
            if span is not None and span.error:
                step = next((k for k, t in enumerate(messages) if t["role"] == "tool"
                             and t.get("tool_call_id") == c.get("id")), max(i - 1, 0))
                detail = span.error_message or content_text(messages[step].get("content"))
                events.append(Event(type=classify_tool_error(detail), step=step, detail=detail[:500]))


def _score(root: Span, spans: list[Span]) -> float | None:
    raw = root.attrs.get("evoharness.score")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 0 <= raw <= 1:
        return float(raw)
    for s in spans:
        for name, a in s.events:
            v = a.get("gen_ai.evaluation.score.value")
            if name == "gen_ai.evaluation.result" and isinstance(v, int | float) and not isinstance(v, bool) \
                    and 0 <= v <= 1:
                return float(v)
    return None
