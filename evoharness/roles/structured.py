"""Ask a chat model for a pydantic object, with structured-output fallbacks and retries.

Methods are tried in order (``json_schema`` -> ``json_object_schema`` -> ``function_calling`` ->
``json_text``): one the model does not support (``with_structured_output`` raises, or the server
answers 400/404/422: `chat.Unsupported`) moves on to the next without spending a retry, and so does
a call that fails otherwise; ``json_text`` parses the JSON object out of the reply text. An invalid
reply (bad JSON, wrong schema, or a ``check`` that raises ``ValueError``/``EditRejected``) is retried
with the problem stated, up to ``max_retries`` times; then `RoleError` carries every problem. A
non-retryable `InfraError` (a missed deadline: the request was cancelled) aborts at once.

The endpoint's failures are not the model's: when the last attempt got no reply (unreachable, an HTTP error
status, a reply that is no chat completion) or the endpoint answered 404 to every method (no endpoint at that
URL, or no such model), `EndpointDown` (an `InfraError`, naming the role) is raised instead of `RoleError`, and the
run pauses until it answers. Every method refused otherwise (a 400 to the plain request too: a prompt past the
model's context; a 413, too large) is this request's failure, a `RoleError`: a pause would meet the same refusal
on every resume. So is an HTTP 500 to every attempt (each method in turn) while the endpoint answers a one-line
request at once (`probe`): a server that fails on this prompt, not a server down.

``json_schema`` is a tighter JSON schema than ``schema``'s own (enums of the ids the prompt shows,
length caps) for models that take one (`chat.OpenAIChat`): under a grammar it keeps a small model's
reply short and its ids valid. The reply is still validated against ``schema`` and ``check``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from evoharness.errors import EditRejected, InfraError
from evoharness.logging import get_logger
from evoharness.roles.chat import Unsupported
from evoharness.roles.errors import EndpointDown, RoleError
from evoharness.roles.prompts import render

T = TypeVar("T", bound=BaseModel)
log = get_logger(__name__)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def ask(model: Any, messages: Sequence[BaseMessage], schema: type[T], *, role: str, max_retries: int = 2,
        methods: Sequence[str] = ("json_schema", "json_object_schema", "function_calling", "json_text"),
        check: Callable[[T], Any] | None = None, json_schema: dict | None = None) -> Any:
    methods = list(methods) or ["json_text"]
    problems: list[str] = []
    convo = list(messages)
    idx, attempts = 0, 0
    down: Exception | None = None  # the last attempt's failure when it was the endpoint's (no reply at all)
    refused: list[int | None] = []  # the HTTP status of each method the endpoint refused
    http_500s = 0  # the attempts the endpoint answered with HTTP 500
    while attempts <= max_retries:
        method = methods[idx]
        runnable = _bind(model, schema, method, json_schema)
        if runnable is None:
            if idx + 1 >= len(methods):
                raise RoleError(role, f"the model supports none of the methods {methods}", attempts, problems)
            idx += 1
            continue
        attempts += 1
        try:
            out = runnable.invoke(convo)
        except Unsupported as e:  # the server does not take this request form: next method, no retry spent
            attempts -= 1
            problems.append(f"{method}: not supported by the endpoint ({e})")
            refused.append(e.status)
            if idx + 1 >= len(methods) and all(s == 404 for s in refused):  # a wrong roles.base_url or model
                raise EndpointDown(f"{role}: the endpoint refused every method {methods} (last: {e}); check "
                                   "roles.base_url and roles.model (a run keeps those it started with, in its "
                                   "settings.json)", retryable=False) from e
            if idx + 1 >= len(methods):  # e.g. a 400 for a prompt past the model's context: this request's failure
                raise RoleError(role, f"the endpoint refused every method {methods} (last: {e})", attempts,
                                problems) from e
            idx += 1
            continue
        except ValueError as e:  # the client parsed the reply itself and it was invalid (bad JSON, schema)
            down = None
            problems.append(_describe(e))
            convo = _with_feedback(messages, problems[-1], "")
            continue
        except EndpointDown as e:
            if not e.retryable:  # e.g. 401: the key
                raise EndpointDown(f"{role}: model call failed: {e}", retryable=False) from e
            down = e
            http_500s += e.status == 500
            problems.append(f"model call failed: {e}")
            if e.status == 500:  # a server error on this form: the next form may not meet it
                idx = min(idx + 1, len(methods) - 1)
            continue
        except InfraError as e:
            if not e.retryable:
                raise RoleError(role, f"model call failed: {e}", attempts, [*problems, str(e)]) from e
            down = None
            problems.append(f"model call failed: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - a provider error: retry; a refusal: also try the next method
            problems.append(f"{method}: model call failed: {type(e).__name__}: {e}")
            down = e if _transport(e) else None
            if not _transport(e):
                idx = min(idx + 1, len(methods) - 1)
            continue
        down = None
        try:
            value = _parse(out, schema)
            return check(value) if check else value
        except (ValueError, EditRejected) as e:
            problem = _describe(e)
            problems.append(problem)
            log.info("role.invalid_reply", role=role, attempt=attempts, method=method, problem=problem)
            convo = _with_feedback(messages, problem, _clip(_raw_text(out), 400))
    if isinstance(down, EndpointDown) and down.status == 500 and probe(model):
        # else what the request met, counted (a request form refused is no attempt): the last 500 says nothing of
        # the rest
        every = http_500s == attempts
        raise RoleError(role, f"the endpoint answered {'every' if every else 'the last'} attempt at this request with "
                        f"{down} while it answers a one-line request: this request's failure, not the endpoint's"
                        + ("" if every else f"; what it met: {_counted(problems)}"),
                        attempts, problems) from down
    if down is not None:
        raise EndpointDown(f"{role}: {problems[-1]} (after {attempts} attempt{'s' if attempts != 1 else ''})") from down
    raise RoleError(role, problems[-1] if problems else "no reply", attempts, problems)


def probe(model: Any) -> bool:
    """True when ``model``'s endpoint answers a one-line request with a completion (one token asked for). A model
    without the ``complete`` method of `chat.OpenAIChat` is not probed: False."""
    complete = getattr(model, "complete", None)
    if complete is None:
        return False
    try:
        complete([{"role": "user", "content": "Reply with OK."}], max_tokens=1)
    except Exception:  # noqa: BLE001 - any failure: the endpoint is not answering
        return False
    return True


def _with_feedback(messages: Sequence[BaseMessage], problem: str, previous: str) -> list[BaseMessage]:
    return [*messages, HumanMessage(content=render("retry.md", error=problem, previous=previous))]


def _transport(e: Exception) -> bool:
    """A connection / timeout / rate-limit error: the method is fine, the call just failed."""
    name = type(e).__name__
    return isinstance(e, ConnectionError | TimeoutError) or any(
        w in name for w in ("Connection", "Timeout", "RateLimit"))


def _bind(model: Any, schema: type[BaseModel], method: str, json_schema: dict | None = None) -> Any:
    if method == "json_text":
        return model
    try:
        if json_schema is not None and getattr(model, "accepts_json_schema", False):
            return model.with_structured_output(schema, method=method, include_raw=True, json_schema=json_schema)
        return model.with_structured_output(schema, method=method, include_raw=True)
    except (NotImplementedError, TypeError, ValueError, AttributeError):
        return None


def _parse(out: Any, schema: type[T]) -> T:
    if isinstance(out, dict) and "raw" in out:
        parsed = out.get("parsed")
        if isinstance(parsed, schema):
            return parsed
        if isinstance(parsed, dict):
            return schema.model_validate(parsed)
        if out.get("parsing_error") is not None:
            raise ValueError(f"the structured reply did not parse: {out['parsing_error']}")
        return parse_json_text(_raw_text(out), schema)
    return parse_json_text(_raw_text(out), schema)


def parse_json_text(text: str, schema: type[T]) -> T:
    """The ``schema`` object in ``text``: a fenced ```json block, or the outermost {...}."""
    m = _FENCE.search(text)
    body = m.group(1) if m else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the reply holds no JSON object")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {e}") from None
    return schema.model_validate(data)


def _raw_text(out: Any) -> str:
    msg = out.get("raw") if isinstance(out, dict) else out
    content = getattr(msg, "content", msg)
    if isinstance(content, list):
        return "".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
    return "" if content is None else str(content)


def _describe(e: Exception) -> str:
    if isinstance(e, ValidationError):
        errs = e.errors()[:3]
        return "wrong schema: " + "; ".join(f"{'.'.join(map(str, x['loc'])) or '(root)'}: {x['msg']}"
                                            for x in errs)
    if isinstance(e, EditRejected):
        return f"edit rejected: {e}"
    return str(e)


def _counted(problems: list[str]) -> str:
    """``2 x A; 1 x B``: each distinct problem (clipped) with how many tries met it, most first."""
    counts = Counter(_clip(p, 200) for p in problems)
    return "; ".join(f"{n} x {p}" for p, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
