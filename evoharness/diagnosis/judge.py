"""An optional LLM judge: reads a failed trajectory with the deterministic evidence and names the
failing step, its agent, the class and a quoted line -- falling back to the rule labeller on any error.

The judge sees the rule labeller's signals and the violation log as evidence. By default
(``window`` > 0) it reads one short excerpt per run, in one call: the task, and the messages within
``window`` of the step of each of the first ``FOCUS_SIGNALS`` located signals (the rules' first signal
first), cut to fit the model's context (``context_tokens``, about 3 characters a token, less the
prompt) by dropping the farthest messages; skipped runs of messages are marked. It is asked whether the
failure starts in the excerpt and where. With ``window=0`` it reads the whole transcript in chunks that
fit the context, in order, and the first chunk that claims the failure gives the verdict (one call per
chunk: a long run costs many calls). Either way the verdict's step must be a shown agent message or
tool result. Healthy runs are left to the rules (their label cannot change). A model error, an
unparseable or out-of-range reply, or no part claiming the failure gives the rule label, with the
reason in ``Label.labeller`` (``rules (llm fallback: ...)``).

``JudgeModel`` is any callable from chat messages to reply text; ``openai_judge_model`` builds one for
an OpenAI-compatible server (``openai:URL[#model]``), asking for a JSON object (grammar-constrained where
the server supports a schema; the schema's ``step`` is limited to the agent messages and tool results
shown) of at most ``max_tokens`` tokens, waiting at most ``timeout_s`` seconds for each reply
(``diagnose --judge-timeout``). ``LLMJudge(on_call=..., on_run=...)`` is told after each call and after each
run it was asked about, whether the model's verdict or the rules' label was kept (the CLI's progress line).

A busy endpoint: once ``TIMEOUTS_IN_A_ROW`` calls in a row have timed out, the judge pauses: the runs that follow
keep the rule label at once (``rules (llm fallback: judge paused: 3 calls in a row timed out, one try every 60s)``)
instead of waiting ``timeout_s`` for each, and the first run ``retry_after_s`` seconds (default
``LLMJudge.RETRY_AFTER_S``, 60; ``diagnose --judge-retry-after``; 0: no pause) after the last timed-out call is
judged again: an answer ends the pause, another timeout (``judge paused, tried again: TimeoutError: ...``) starts a
new wait. The wait is in seconds, not runs: paused runs take milliseconds each, so a try every N runs would cost a
fast job one whole timeout per N runs.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.detectors import FALLBACK_SIGNALS
from evoharness.diagnosis.labeller import Labeller, _agent_at, _quote_at
from evoharness.diagnosis.models import FailureClass, Label, Signal
from evoharness.errors import InputError
from evoharness.traces.models import Trajectory

JudgeModel = Callable[[list[dict[str, str]]], str]
OnCall = Callable[[str, int, int, float], None]  # (trajectory id, part, parts, seconds the call took), each call
OnRun = Callable[[str, bool], None]  # (trajectory id, whether the model's verdict was kept), each failed run
PROMPT = Path(__file__).parent / "prompts" / "judge.md"
MESSAGE_CHARS = 600  # one message's share of a chunk (longer ones are clipped in the transcript)
PROMPT_RESERVE_CHARS = 2500  # instructions, evidence and the reply
WINDOW = 3  # messages each side of a signal's step in the default excerpt
FOCUS_SIGNALS = 3  # located signals whose neighbourhoods the excerpt shows
EVIDENCE_SIGNALS, EVIDENCE_CHARS = 6, 160  # the rules' evidence in the prompt: how many signals, how long each
TIMEOUT_S = 120.0  # default wait for one reply (diagnose --judge-timeout)
TIMEOUTS_IN_A_ROW = 3  # calls timed out one after another, after which the judge stops calling (a busy endpoint)
RATE_LIMIT_RETRIES, RETRY_AFTER_MAX_S = 2, 30.0  # a 429 is asked again twice, after what Retry-After says (capped)
_OBJECT = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


class Verdict(BaseModel):
    failed_here: bool
    failure_class: Literal["F1", "F2", "F3", "F4", "E"] = "F4"
    step: int = Field(-1)
    agent: str = ""
    quote: str = ""
    reason: str = ""


VERDICT_SCHEMA = Verdict.model_json_schema()


def verdict_schema(steps: list[int]) -> dict[str, Any]:
    """The verdict's JSON schema with ``step`` limited to ``steps`` (the agent messages and tool results
    shown): a server that constrains its output to the schema cannot name a step the judge did not see."""
    schema = json.loads(json.dumps(VERDICT_SCHEMA))
    schema["properties"]["step"] = {"title": "Step", "type": "integer", "enum": steps}
    return schema


@lru_cache(maxsize=1)
def _template():
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    return env.from_string(PROMPT.read_text(encoding="utf-8"))


def render_message(i: int, m: dict[str, Any]) -> str:
    who = m.get("name") or m.get("role")
    text = m.get("content") if isinstance(m.get("content"), str) else ""
    if m.get("tool_calls"):
        calls = [tc.get("function", {}) for tc in m["tool_calls"] if isinstance(tc, dict)]
        text += " " + "; ".join(f"call {c.get('name')}({c.get('arguments')})" for c in calls if isinstance(c, dict))
    text = " ".join(text.split())
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    return f"[{i}] {who}: {text}"


def chunks(traj: Trajectory, budget_chars: int) -> list[tuple[int, int, str]]:
    """(first step, last step, transcript) windows of whole rendered messages within ``budget_chars``."""
    out: list[tuple[int, int, str]] = []
    lines: list[str] = []
    size, first = 0, 0
    for i, m in enumerate(traj.messages):
        line = render_message(i, m)
        if lines and size + len(line) + 1 > budget_chars:
            out.append((first, i - 1, "\n".join(lines)))
            lines, size, first = [], 0, i
        lines.append(line)
        size += len(line) + 1
    if lines:
        out.append((first, len(traj.messages) - 1, "\n".join(lines)))
    return out


def excerpt(traj: Trajectory, centres: list[int], window: int, budget_chars: int) -> tuple[list[int], str]:
    """(shown steps, transcript): the first user message and the messages within ``window`` of each centre,
    in order, skipped runs marked ``[... N messages ...]``; while over ``budget_chars`` the shown message
    farthest from every centre is dropped (a centre itself is kept)."""
    n = len(traj.messages)
    first_user = next((i for i, m in enumerate(traj.messages) if m.get("role") == "user"), None)
    centres = [c for c in centres if 0 <= c < n] or [max(n - 1, 0)]
    keep = {i for c in centres for i in range(max(0, c - window), min(n, c + window + 1))}
    if first_user is not None:
        keep.add(first_user)
    lines = {i: render_message(i, traj.messages[i]) for i in keep}

    def size() -> int:
        return sum(len(v) + 1 for v in lines.values()) + 30 * len(lines)

    by_distance = sorted(keep - set(centres) - {first_user}, key=lambda i: -min(abs(i - c) for c in centres))
    while size() > budget_chars and by_distance:
        lines.pop(by_distance.pop(0))
    shown = sorted(lines)
    out: list[str] = []
    prev = -1
    for i in shown:
        if i > prev + 1:
            out.append(f"[... {i - prev - 1} messages ...]")
        out.append(lines[i])
        prev = i
    if prev < n - 1:
        out.append(f"[... {n - 1 - prev} messages ...]")
    return shown, "\n".join(out)


def parse_verdict(text: str) -> Verdict:
    text = text.strip()
    for candidate in (text, *(m.group(0) for m in _OBJECT.finditer(text[:20_000]))):
        try:
            return Verdict.model_validate(json.loads(candidate))
        except (ValueError, ValidationError):
            continue
    raise ValueError(f"no verdict JSON in the reply: {text[:200]!r}")


class LLMJudge:
    """``label(traj)`` like `Labeller`, with the model's verdict where it gives a valid one."""

    RETRY_AFTER_S = 60.0  # by default, a paused judge tries one call again this long after the last timed-out call

    def __init__(self, model: JudgeModel, cfg: DiagnosisConfig | None = None, context_tokens: int = 8192,
                 window: int = WINDOW, on_call: OnCall | None = None, on_run: OnRun | None = None,
                 retry_after_s: float | None = None) -> None:
        self.model = model
        # `--judge-retry-after`: 0 tries every run again (no pause); a large value keeps the rules once paused
        self.retry_after_s = self.RETRY_AFTER_S if retry_after_s is None else retry_after_s
        if not (math.isfinite(self.retry_after_s) and self.retry_after_s >= 0):
            raise ValueError(f"retry_after_s must be a finite number of seconds >= 0, not {self.retry_after_s!r}")
        self.on_call = on_call
        self.on_run = on_run
        self.timeouts = 0  # calls timed out in a row; TIMEOUTS_IN_A_ROW of them pause the judge
        self.timed_out_at = 0.0  # time.monotonic() when the last timed-out call ended
        self.rules = Labeller(cfg)
        self.budget = max(1000, context_tokens * 3 - PROMPT_RESERVE_CHARS)
        self.window = window
        self.calls = 0  # model calls made so far (the judge's cost)

    def label(self, traj: Trajectory) -> Label:
        rule = self.rules.label(traj)
        if rule.failure_class in (FailureClass.healthy, FailureClass.unknown):  # its prompt says the run failed
            return rule
        lab = self._judged(traj, rule)
        if self.on_run:
            self.on_run(traj.id, lab.labeller == "llm")
        return lab

    def _judged(self, traj: Trajectory, rule: Label) -> Label:
        paused = self.timeouts >= TIMEOUTS_IN_A_ROW  # a busy endpoint: not the whole timeout again for each run
        if paused and time.monotonic() - self.timed_out_at < self.retry_after_s:
            why = f"judge paused: {TIMEOUTS_IN_A_ROW} calls in a row timed out, one try every {self.retry_after_s:g}s"
            return rule.model_copy(update={"labeller": f"rules (llm fallback: {why})"})
        try:
            verdict = self._judge(traj, rule)
        except Exception as e:  # noqa: BLE001 - any model or reply failure falls back to the rules, said so
            why = f"judge paused, tried again: {_short(e)}" if paused else _short(e)
            return rule.model_copy(update={"labeller": f"rules (llm fallback: {why})"})
        if verdict is None:
            return rule.model_copy(update={"labeller": "rules (llm fallback: no part of the run judged failing)"})
        cls = FailureClass(verdict.failure_class)
        signal = Signal(id=f"{cls.value}.llm_judge", failure_class=cls, step=verdict.step,
                        evidence=" ".join(f"{verdict.reason} — \"{verdict.quote}\"".split())[:400])
        return rule.model_copy(update={
            "failure_class": cls, "first_signal": signal, "signals": [signal, *rule.signals],
            "lever": self.rules.router.lever(cls), "agent": _agent_at(traj, signal) or _run_agent(traj, verdict.agent),
            "quote": _quote_at(traj, signal), "labeller": "llm",
        })

    def _judge(self, traj: Trajectory, rule: Label) -> Verdict | None:
        if self.window > 0:
            located = [s.step for s in rule.signals if s.id not in FALLBACK_SIGNALS]
            first = rule.first_signal.step if rule.first_signal else len(traj.messages) - 1
            centres = list(dict.fromkeys([first, *located]))[:FOCUS_SIGNALS]
            shown, transcript = excerpt(traj, centres, self.window, self.budget)
            parts = [(shown, transcript)]
        else:
            parts = [(list(range(a, b + 1)), text) for a, b, text in chunks(traj, self.budget)]
        evidence = [s.model_copy(update={"evidence": s.evidence[:EVIDENCE_CHARS]})
                    for s in rule.signals[:EVIDENCE_SIGNALS]]
        violations = [v.model_copy(update={"evidence": v.evidence[:EVIDENCE_CHARS]}) for v in rule.violations[:4]]
        for n, (shown, transcript) in enumerate(parts, start=1):
            prompt = _template().render(
                task=" ".join((traj.task or "")[:600].split()), score=traj.score, signals=evidence,
                violations=violations, first=shown[0], last=shown[-1], total=len(traj.messages), part=n,
                parts=len(parts), excerpt=self.window > 0, transcript=transcript)
            self.calls += 1
            messages = [{"role": "user", "content": prompt}]
            allowed = [i for i in shown if traj.messages[i].get("role") in ("assistant", "tool")] or shown
            start = time.monotonic()
            try:
                reply = self.model(messages, schema=verdict_schema(allowed)) if getattr(
                    self.model, "accepts_schema", False) else self.model(messages)
            except TimeoutError:
                self.timeouts += 1
                self.timed_out_at = time.monotonic()
                raise
            else:
                self.timeouts = 0
            finally:  # a call that failed (timed out) is reported too
                if self.on_call:
                    self.on_call(traj.id, n, len(parts), time.monotonic() - start)
            verdict = parse_verdict(reply)
            if verdict.failed_here:
                if verdict.step not in shown:
                    raise ValueError(f"step {verdict.step} is not among the messages shown "
                                     f"({shown[0]}-{shown[-1]})")
                role = traj.messages[verdict.step].get("role")
                if role not in ("assistant", "tool"):
                    raise ValueError(f"step {verdict.step} is a {role} message, not the agent's")
                return verdict
        return None


def _run_agent(traj: Trajectory, name: str) -> str | None:
    """The verdict's agent where the run has an agent of that name, else none: a small model invents
    names ("HuggyMoo" for a tau-bench run's one unnamed assistant)."""
    return name if name and any(m.get("name") == name for m in traj.messages) else None


def _post_within(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> Any:
    """POST ``body`` and read the whole reply, or TimeoutError once ``timeout_s`` seconds have passed: httpx's
    timeout bounds each read, so a reply trickling in (a proxy's keep-alive spaces) ran past it. A server gone
    silent is given up ``timeout_s`` after its last byte (the read timeout)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.stream("POST", url, json=body, headers=headers, timeout=timeout_s) as r:
        raw = []
        for chunk in r.iter_raw():
            if time.monotonic() > deadline:
                raise TimeoutError
            raw.append(chunk)
    return httpx.Response(r.status_code, headers=r.headers, content=b"".join(raw), request=r.request)


def _retry_after(value: str | None) -> float:
    """Seconds a 429's Retry-After asks for (a number; a date or nothing: 1 s), at most RETRY_AFTER_MAX_S."""
    try:
        wait = float(value or 1)
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.0), RETRY_AFTER_MAX_S) if math.isfinite(wait) else 1.0


def _short(e: Exception) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:200]


def openai_judge_model(spec: str, timeout_s: float = TIMEOUT_S, max_tokens: int = 200) -> JudgeModel:
    """A `JudgeModel` for ``openai:URL[#model]`` (without ``#model``: the server's one model), waiting at most
    ``timeout_s`` seconds for a reply (a call past it fails, and the run falls back to the rules)."""
    import httpx

    if not spec.startswith("openai:") or len(spec) <= len("openai:"):
        raise InputError("--model", f"{spec!r}: expected openai:URL[#model]")
    url, _, model = spec.removeprefix("openai:").partition("#")
    url = url.rstrip("/")
    key = os.environ.get("OPENAI_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if not model:
        try:
            ids = [m["id"] for m in httpx.get(f"{url}/models", headers=headers, timeout=10).json()["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
            raise InputError("--model", f"{spec!r}: cannot list the server's models ({e}); name one: "
                             "openai:URL#model") from None
        if len(ids) != 1:
            raise InputError("--model", f"{spec!r}: the server serves {len(ids)} models; name one: openai:URL#model")
        model = ids[0]
    schema_ok = [True]  # until the server refuses a schema-constrained reply

    def call(messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> str:
        limited = 0
        while True:
            body: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
            if schema_ok[0]:
                body["response_format"] = {"type": "json_object", "schema": schema or VERDICT_SCHEMA}
            try:
                r = _post_within(f"{url}/chat/completions", body, headers, timeout_s)
            except (httpx.TimeoutException, TimeoutError):
                raise TimeoutError(f"no reply within {timeout_s:g}s (--judge-timeout)") from None
            if r.status_code == 429 and limited < RATE_LIMIT_RETRIES:  # rate-limited: wait as told, ask again
                limited += 1
                time.sleep(_retry_after(r.headers.get("retry-after")))
                continue
            if r.status_code in (400, 422) and schema_ok[0]:
                schema_ok[0] = False  # the server takes no schema-constrained JSON: ask in plain text from now on
                continue
            r.raise_for_status()
            try:
                return r.json()["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):  # a proxy's error page, no choices
                ctype = r.headers.get("content-type", "").split(";")[0] or "no type"
                raise ValueError(f"HTTP {r.status_code} reply is no chat completion ({ctype}): "
                                 f"{r.text[:120]!r}") from None

    call.accepts_schema = True  # type: ignore[attr-defined]
    return call
