"""Our trajectories as OpenTelemetry GenAI spans (``evoharness export-otel``).

One trace per trajectory:

- root ``invoke_agent <agent>`` span: ``gen_ai.operation.name=invoke_agent``, ``gen_ai.agent.name``,
  ``gen_ai.request.model``, the token usage, and the evoharness view of the rollout as ``evoharness.*``
  attributes: ``trajectory_id``, ``task_id``, ``split``, ``rollout``, ``harness_commit``, ``score``,
  ``termination``, ``final_answer``, ``failure_class``, ``first_signal``, ``first_signal_step``,
  ``first_signal_evidence``, ``lever`` (the rule labeller's verdict on the trajectory) and, from a run
  directory's ``summary.json``, ``verdict`` (merged | rejected), ``candidate`` and ``reason`` (`_verdicts`) for
  rollouts of a candidate commit. Status ERROR when the rollout ended in error.
- one ``chat <model>`` span per assistant turn (``gen_ai.input.messages`` = the conversation before it,
  ``gen_ai.output.messages`` = the turn, ``gen_ai.system_instructions``), in the GenAI JSON message-part
  form;
- one ``execute_tool <name>`` span per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id`` /
  ``arguments`` / ``result``), status ERROR when a harness event marked its result as an error;
- harness events (``blocked_call``, ``tool_error``, ...) as span events ``evoharness.event`` on the span of
  their step.

Span times are laid out from the trajectory's wall time (spread evenly over the messages). The file
form is OTLP/JSON lines (OpenTelemetry's JSON encoder, one export request per trajectory); the endpoint
form is OTLP/HTTP protobuf to ``URL`` (``.../v1/traces`` appended when missing). ``evoharness import``
reads either file back (the ``otlp`` importer restores the ``evoharness.*`` fields).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evoharness.diagnosis.labeller import label_trajectory as label
from evoharness.errors import InputError
from evoharness.traces.importers._shape import arr, obj
from evoharness.traces.models import Trajectory
from evoharness.traces.store import replacing

ERROR_EVENTS = {"tool_error", "tool_infra_error", "unknown_tool", "invalid_arguments", "blocked_call"}


def _calls(m: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of a message that are objects: a canonical trace keeps its messages as given (any JSON), so
    ``tool_calls`` may be a string, an object or a list of non-objects (read as none, as ``Trajectory.tool_calls``
    reads them)."""
    return [c for c in arr(m.get("tool_calls")) if isinstance(c, dict)]


def _parts(m: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    content = m.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for c in _calls(m):
        fn = obj(c.get("function"))
        args = fn.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            pass
        parts.append({"type": "tool_call", "id": c.get("id"), "name": fn.get("name"), "arguments": args})
    return parts


def genai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if m["role"] == "tool":
            out.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": m.get("tool_call_id"),
                                                   "response": m.get("content")}]})
        elif m["role"] != "system":
            msg = {"role": m["role"], "parts": _parts(m)}
            if m.get("name"):
                msg["name"] = m["name"]
            out.append(msg)
    return out


def _verdicts(run_dir: Path | None) -> dict[str, dict[str, str]]:
    """harness commit -> {verdict, candidate, reason} from a run's summary.json. A rejected entry's reason is its
    own; a merged entry has none, so its reason is its verdict's (from the run's rounds) and the approval, as
    `review` prints them: "all gates passed; approved by reviewer: the lesson reads right"."""
    if run_dir is None or not (run_dir / "summary.json").is_file():
        return {}
    try:
        s = json.loads((run_dir / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(str(run_dir / "summary.json"), f"unreadable run summary: {e}") from None
    if not isinstance(s, dict):
        raise InputError(str(run_dir / "summary.json"), "unreadable run summary: not a JSON object")
    judged = {str(c["verdict"].get("commit") or c.get("commit")): str(c["verdict"].get("reason") or "")
              for r in arr(s.get("rounds")) if isinstance(r, dict)
              for c in arr(r.get("candidates")) if isinstance(c, dict) and isinstance(c.get("verdict"), dict)}
    out = {}
    for verdict, key in (("merged", "merged"), ("rejected", "rejected")):
        for c in arr(s.get(key)):  # a field of another type (a hand-edited summary): read as absent
            if isinstance(c, dict) and c.get("commit"):
                reason = (str(c.get("reason", "")) if verdict == "rejected" else
                          "; ".join(str(x) for x in (judged.get(str(c["commit"])), c.get("approval")) if x))
                out[str(c["commit"])] = {"verdict": verdict, "candidate": str(c.get("branch", "")), "reason": reason}
    return out


def build_spans(trajectories: Iterable[Trajectory], provider: Any, run_dir: Path | None = None) -> int:
    """Record each trajectory as one trace on ``provider``; returns the number of trajectories."""
    from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

    tracer = provider.get_tracer("evoharness.export_otel")
    verdicts = _verdicts(run_dir)
    n = 0
    clock = time.time_ns()
    for t in trajectories:
        n += 1
        lab = label(t)
        agent = next((m.get("name") for m in t.messages if m["role"] == "assistant" and m.get("name")), "agent")
        steps = max(len(t.messages), 1)
        tick = max(int(t.usage.wall_seconds * 1e9 / steps), 1_000_000)
        start = clock
        clock += tick * (steps + 2)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.usage.input_tokens": t.usage.prompt_tokens, "gen_ai.usage.output_tokens": t.usage.completion_tokens,
            "evoharness.trajectory_id": t.id, "evoharness.task_id": t.task_id, "evoharness.split": t.split.value,
            "evoharness.rollout": t.rollout, "evoharness.termination": t.termination.value,
            "evoharness.failure_class": str(lab.failure_class), "evoharness.lever": str(lab.lever),
            "evoharness.steps": t.usage.steps,
        }
        optional = {"gen_ai.request.model": t.model, "evoharness.harness_commit": t.harness_commit,
                    "evoharness.score": t.score, "evoharness.final_answer": t.final_answer}
        if lab.first_signal is not None:
            optional.update({"evoharness.first_signal": lab.first_signal.id,
                             "evoharness.first_signal_step": lab.first_signal.step,
                             "evoharness.first_signal_evidence": lab.first_signal.evidence[:1000]})
        v = verdicts.get(t.harness_commit or "")
        if v:
            optional.update({f"evoharness.{k}": val for k, val in v.items() if val})
        attrs.update({k: val for k, val in optional.items() if val is not None})
        root = tracer.start_span(f"invoke_agent {agent}", kind=SpanKind.INTERNAL, attributes=attrs, start_time=start)
        ctx = set_span_in_context(root)
        system = next((m.get("content") for m in t.messages if m["role"] == "system"), None)
        events_at: dict[int, list] = {}
        for e in t.events:
            events_at.setdefault(e.step, []).append(e)
        for i, m in enumerate(t.messages):
            at = start + tick * (i + 1)
            if m["role"] == "assistant":
                chat = {"gen_ai.operation.name": "chat",
                        "gen_ai.input.messages": json.dumps(genai_messages(t.messages[:i])),
                        "gen_ai.output.messages": json.dumps(genai_messages([m]))}
                if t.model:
                    chat["gen_ai.request.model"] = t.model
                if system:
                    chat["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
                span = tracer.start_span(f"chat {t.model or 'model'}", context=ctx, kind=SpanKind.CLIENT,
                                         start_time=at, attributes=chat)
                _events(span, events_at.pop(i, []), at)
                span.end(at + tick // 2)
                for c in _calls(m):
                    _tool_span(tracer, ctx, t, c, at + tick // 2, tick, events_at)
            elif i in events_at and m["role"] != "tool":
                _events(root, events_at.pop(i), at)
        for evs in events_at.values():
            _events(root, evs, start + tick * steps)
        if t.termination.value == "error":
            root.set_status(Status(StatusCode.ERROR, next((e.detail for e in t.events if e.detail), "error")[:500]))
        root.end(start + tick * (steps + 1))
    return n


def _tool_span(tracer: Any, ctx: Any, t: Trajectory, call: dict[str, Any], at: int, tick: int,
               events_at: dict[int, list]) -> None:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    fn = obj(call.get("function"))
    step = next((k for k, m in enumerate(t.messages)
                 if m["role"] == "tool" and m.get("tool_call_id") == call.get("id")), None)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(fn.get("name") or ""),
             "gen_ai.tool.call.id": str(call.get("id") or ""),
             "gen_ai.tool.call.arguments": str(fn.get("arguments") or "")}
    if step is not None:
        attrs["gen_ai.tool.call.result"] = str(t.messages[step].get("content") or "")
    span = tracer.start_span(f"execute_tool {fn.get('name')}", context=ctx, kind=SpanKind.INTERNAL, start_time=at,
                             attributes=attrs)
    evs = events_at.pop(step, []) if step is not None else []
    _events(span, evs, at)
    bad = next((e for e in evs if e.type in ERROR_EVENTS), None)
    if bad is not None:
        span.set_status(Status(StatusCode.ERROR, (bad.detail or bad.type)[:500]))
    span.end(at + max(tick // 4, 1))


def _events(span: Any, events: list, at: int) -> None:
    for e in events:
        span.add_event("evoharness.event", {"evoharness.event.type": e.type, "evoharness.event.step": e.step,
                                            "evoharness.event.detail": e.detail[:1000]}, timestamp=at)


DEFAULT_TIMEOUT = 10.0  # seconds one request may take, the exporter's retries included


class _SendLog(logging.Handler):
    """The OTLP HTTP exporter's own log while we send: its retries become one short ``on_retry`` line each
    (not its multi-line warnings), and the last failure's reason is kept for the error line."""

    _ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")

    def __init__(self, on_retry: Callable[[str], None] | None) -> None:
        super().__init__()
        self.on_retry = on_retry
        self.reason = ""
        self.refused = False  # the receiver answered with an error that is not retried (e.g. HTTP 400)

    def _short(self, what: object) -> str:
        text = str(what)
        found = self._ERRNO.search(text)
        return (found.group(1) if found else text).strip()[:200]

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if str(record.msg).startswith("Transient error") and len(args) == 3:
            self.reason = self._short(args[0])
            if self.on_retry is not None:
                self.on_retry(f"{self.reason}; retrying in {float(args[2]):.1f} s")
        elif "code: %s, reason: %s" in str(record.msg) and len(args) == 3:
            self.reason = f"HTTP {args[1]}: {self._short(args[2])}" if args[1] else self._short(args[2])
            self.refused = True


# --timeout's accepted range, a tenth of a second to an hour: outside it the exporter misreports (1e-300 came
# back as the receiver refusing the spans, and 1e300 broke its deadline arithmetic with the same message)
TIMEOUT_RANGE = (0.1, 3600.0)


def export(trajectories: Iterable[Trajectory], *, out: Path | None = None, endpoint: str | None = None,
           run_dir: Path | None = None, service_name: str = "evoharness", timeout: float = DEFAULT_TIMEOUT,
           on_retry: Callable[[str], None] | None = None) -> int:
    """Write (``out``) or send (``endpoint``) the trajectories as OTLP traces; returns how many.

    Sending: one request per trace; a request that the receiver has not taken within ``timeout`` seconds
    (the exporter's retries with back-off included: a dead receiver is retried after ~1, 2, 4 ... s while
    the time lasts) stops the export with an ``InputError`` naming the reason and how many traces went.
    ``on_retry`` gets one line per retry (progress: the reason and the wait)."""
    if endpoint is not None and not (TIMEOUT_RANGE[0] <= timeout <= TIMEOUT_RANGE[1]):  # NaN fails both
        raise InputError("--timeout", f"must be {TIMEOUT_RANGE[0]:g} to {TIMEOUT_RANGE[1]:g} seconds, got {timeout}")
    if not service_name.strip() or not service_name.isprintable():  # a receiver files the traces under it
        raise InputError("--service-name", f"must be a printable, non-blank name, got {service_name!r}")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError as e:
        raise _missing("export-otel", e) from None
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    n = build_spans(trajectories, provider, run_dir)
    provider.shutdown()
    spans = memory.get_finished_spans()
    by_trace: dict[int, list] = {}
    for s in spans:
        by_trace.setdefault(s.context.trace_id, []).append(s)
    if out is not None:
        try:
            from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
        except ImportError as e:
            raise _missing("--out", e) from None

        with replacing(out, "w") as fh:  # in place, a full disk or ^C left a cut file where a whole one had been
            for group in by_trace.values():
                fh.write(json.dumps(encode_spans(group).to_dict(), separators=(",", ":")) + "\n")
    if endpoint is not None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as e:
            raise _missing("--endpoint", e) from None
        from opentelemetry.sdk.trace.export import SpanExportResult

        url = endpoint.rstrip("/")
        url = url if url.endswith("/v1/traces") else url + "/v1/traces"
        sender = OTLPSpanExporter(endpoint=url, timeout=timeout)
        exporter_log = logging.getLogger(OTLPSpanExporter.__module__)
        handler, kept = _SendLog(on_retry), (exporter_log.propagate, exporter_log.level)
        exporter_log.addHandler(handler)
        exporter_log.propagate, exporter_log.level = False, logging.WARNING
        try:
            for sent, group in enumerate(by_trace.values()):
                if sender.export(group) != SpanExportResult.SUCCESS:
                    why = f" ({handler.reason})" if handler.reason else ""
                    what = "refused the spans" if handler.refused else \
                        f"did not take the spans within --timeout {timeout:g} s"
                    raise InputError("--endpoint", f"the OTLP receiver at {url} {what}{why}; {sent} of "
                                                   f"{len(by_trace)} traces sent")
        finally:
            exporter_log.removeHandler(handler)
            exporter_log.propagate, exporter_log.level = kept
            sender.shutdown()
    return n


def _missing(what: str, e: ImportError) -> InputError:
    """One error line for an [otel] install that lacks a piece (the SDK, the JSON encoder, the HTTP exporter)."""
    return InputError(what, f"needs the OpenTelemetry packages: pip install 'evoharness[otel]' ({e})")
