"""A request FastAPI could not validate, said as a client can act on: where in the body, what was expected.

FastAPI's own words for a malformed JSON body are ``body.13: JSON decode error`` (13 is a character
offset), and for a body that is not an object ``Input should be a valid dictionary or object to extract
fields from``, whether the client sent a list or forgot ``Content-Type: application/json``.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel

_NOT_AN_OBJECT = {"model_attributes_type", "dict_type", "model_type"}


def body_model(request: Any) -> type[BaseModel] | None:
    """The pydantic model the matched route reads its JSON body into (None: the route takes none)."""
    field = getattr(request.scope.get("route"), "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # ``Model | None``
        annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), None)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def expected(request: Any) -> str:
    """``a JSON object with candidate (required), reason`` for the route's body model ('' when unknown)."""
    model = body_model(request)
    if model is None:
        return ""
    fields = [f"{name} (required)" if f.is_required() else name for name, f in model.model_fields.items()]
    return f"a JSON object with {', '.join(fields)}" if fields else "a JSON object"


def _where(body: Any, pos: int) -> str:
    if not isinstance(body, str | bytes):
        return f"at character {pos + 1}"
    if pos >= len(body):
        return "at its end (cut short?)"
    nl = "\n" if isinstance(body, str) else b"\n"
    line = body.count(nl, 0, pos) + 1
    column = pos - (body.rfind(nl, 0, pos) + 1) + 1
    near = body[pos:pos + 20]
    near = near.decode("utf-8", "replace") if isinstance(near, bytes) else near
    return f"at line {line}, column {column} (near {near!r})"


def _reason(msg: str) -> str:
    """json's reason, lower-cased, less the dangling 'at' of 'Unterminated string starting at' (json gives the
    position apart; the message said 'unterminated string starting at; expected ...')."""
    msg = msg.rstrip(".").removesuffix(" starting at").removesuffix(" at")
    return f"{msg[:1].lower()}{msg[1:]}"


def _message(error: dict[str, Any], request: Any, body: Any, want: str) -> tuple[str, str]:
    """(field, message) for one of FastAPI's validation errors."""
    loc = tuple(error.get("loc") or ())
    kind = error.get("type")
    hint = f"; expected {want}" if want else ""
    if kind == "json_invalid" and loc[:1] == ("body",):
        pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
        reason = str((error.get("ctx") or {}).get("error") or "not JSON")
        return "body", f"body is not valid JSON {_where(body, pos)}: {_reason(reason)}{hint}"
    if loc == ("body",) and kind == "missing":
        return "body", f"body is empty{hint}"
    if loc == ("body",) and kind in _NOT_AN_OBJECT:
        content_type = request.headers.get("content-type") or "none"
        if "json" not in content_type.lower():
            return "body", (f"body is not sent as JSON (Content-Type: {content_type}): send Content-Type: "
                            f"application/json{hint.replace('; expected', ' and')}")
        got = error.get("input")
        kind_of = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true or false",
                   type(None): "null"}
        return "body", f"body is {kind_of.get(type(got), 'of another type')}, not an object{hint}"
    field = ".".join(str(x) for x in loc)
    if kind == "extra_forbidden":
        return field, f"{error.get('msg', 'not a field')}{hint}"
    return field, str(error.get("msg", "invalid"))


def describe(request: Any, errors: list[dict[str, Any]], body: Any) -> dict[str, Any]:
    """The JSON answer to a request that failed validation: ``error`` (the first problem, one line) and
    ``errors`` (up to 50, each ``{"field", "error"}``)."""
    want = expected(request)
    found = [_message(e, request, body, want) for e in errors] or [("request", "invalid request")]
    field, message = found[0]
    first = message if message.startswith("body is ") else f"{field}: {message}"
    return {"error": first, "errors": [{"field": f, "error": m} for f, m in found[:50]]}


def unparsed(request: Any, cause: BaseException | None) -> str | None:
    """What is wrong with a JSON body FastAPI could not parse (its 400 'There was an error parsing the body'),
    from the exception underneath; None when that is not a parse failure we know."""
    return not_json(cause, expected(request))


def not_json(cause: BaseException | None, want: str) -> str | None:
    """What is wrong with a body `json.loads` refused with ``cause``, in the words every endpoint answers (``want``:
    what was expected, '' when unknown); None when that is not a parse failure we know."""
    from evoharness.traces.jsontext import DuplicateKey, NotFinite

    hint = f"; expected {want}" if want else ""
    if isinstance(cause, DuplicateKey):
        return (f"body holds {cause} (JSON readers differ on which value counts, so none is taken): send each key "
                f"once{hint}")
    if isinstance(cause, NotFinite):  # was stored as null where the value is free-form (meta, a message)
        return (f"body holds {cause} (no NaN or Infinity, nothing past a double): send null or a string (Python's "
                f"json.dumps(..., allow_nan=False) finds it){hint}")
    if isinstance(cause, json.JSONDecodeError):  # FastAPI's own json_invalid is worded in `_message`, as here
        return f"body is not valid JSON {_where(cause.doc, cause.pos)}: {_reason(cause.msg)}{hint}"
    if isinstance(cause, UnicodeDecodeError):
        return f"body is not UTF-8 text (byte {cause.start + 1} is {cause.object[cause.start:cause.start + 1]!r}){hint}"
    if isinstance(cause, RecursionError):
        return f"body is nested too deeply to parse{hint}"
    if isinstance(cause, ValueError) and "digits" in str(cause):  # Python's limit on int() of a long number
        return f"body holds an integer too long to parse (over 4,300 digits){hint}"
    return None
