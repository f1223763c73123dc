"""The canonical trajectory: one rollout of one agent on one task.

Conventions every layer relies on:

- ``messages`` are OpenAI chat messages (``system`` / ``user`` / ``assistant`` with
  optional ``tool_calls`` / ``tool`` with ``tool_call_id``), kept as plain dicts so
  that importing 10,000 traces stays close to the cost of ``json.loads``.
- A *step* is a 0-based index into ``messages``. Signals and events point at steps.
- ``final_answer is None`` means the agent did not deliver.
- ``score is None`` means unscored (e.g. failure-only logs); an unscored trajectory
  is never called healthy.
- Tool-call arguments stay in ``messages`` as the model wrote them (usually a JSON string);
  ``Trajectory.tool_calls()`` parses each once and keeps the result, so labelling and export
  share one parse. Treat ``messages`` as read-only once ``tool_calls()`` has been called.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any, NamedTuple

from jiter import from_json
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# the C encoder behind _CANONICAL.encode, built once (``encode`` builds one per call): same text. No circular
# check, so only for values parsed from JSON text (which cannot be circular)
_CANONICAL_C = c_make_encoder(None, _CANONICAL.default, encode_basestring_ascii, None, ":", ",", True, False,
                              True) if c_make_encoder is not None else None


class Split(StrEnum):
    dev = "dev"
    heldout = "heldout"
    unknown = "unknown"


class Termination(StrEnum):
    delivered = "delivered"
    step_budget = "step_budget"
    timeout = "timeout"
    context_overflow = "context_overflow"
    error = "error"
    aborted = "aborted"


class EventType(StrEnum):
    """Harness-side events. Importers and the agent may also record other strings."""

    blocked_call = "blocked_call"
    unknown_tool = "unknown_tool"
    invalid_arguments = "invalid_arguments"
    format_rejected = "format_rejected"
    tool_error = "tool_error"
    tool_infra_error = "tool_infra_error"
    infra_error = "infra_error"  # the infrastructure ended the run (``traces.endings``)
    middleware_action = "middleware_action"
    budget_exhausted = "budget_exhausted"
    timeout = "timeout"
    context_overflow = "context_overflow"
    sandbox_violation = "sandbox_violation"
    harness_error = "harness_error"
    tampered = "tampered"


class Event(BaseModel):
    """Something the harness did or saw at a step (not part of the chat itself)."""

    model_config = ConfigDict(extra="allow")

    type: str
    step: int = Field(ge=0, description="index into Trajectory.messages")
    detail: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    steps: int = Field(0, ge=0, description="agent (assistant) turns")
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    # finite: an infinity (1e999) was taken and written as null, which no reader took back (a stored trajectory the
    # service could not give back, every later export of ingested trajectories a 500)
    wall_seconds: float = Field(0.0, ge=0, allow_inf_nan=False)

    @field_validator("wall_seconds", mode="before")
    @classmethod
    def _null_is_unmeasured(cls, v: Any) -> Any:
        """null reads as 0.0, not measured (the default): until the twenty-third session an infinity was written as
        null, so a store row, a queued trajectory or an `import` output of then reads back (it was a 500 on every read
        of the row and on every export of the store, and the daemon's sweep stopped at it)."""
        return 0.0 if v is None else v


class ToolCallRecord(NamedTuple):
    """One tool call of an assistant message, its arguments parsed once.

    ``raw`` is the arguments as the model wrote them (a dict is kept as given); ``args`` the
    parsed JSON value, or None when ``raw`` did not parse (``parsed_ok`` False). An absent or blank
    ``arguments`` parses as no arguments (``{}``) only for export's sake: ``raw`` stays ``""``.
    A named tuple (immutable, built without a per-field ``__setattr__``: a trajectory set has hundreds
    of thousands of calls).
    """

    step: int  # index of the assistant message
    index: int  # position in that message's tool_calls
    id: str | None
    name: Any
    raw: Any
    args: Any
    parsed_ok: bool

    @property
    def raw_text(self) -> str:
        """The arguments as text (a dict the model gave as an object is serialised)."""
        if isinstance(self.raw, str):
            return self.raw
        return json.dumps(self.raw, ensure_ascii=False)

    @property
    def canonical(self) -> str:
        """Compact JSON with sorted keys (equal arguments, equal text); the raw text stripped
        when the arguments did not parse."""
        if self.parsed_ok:
            if _CANONICAL_C is not None and isinstance(self.raw, str):  # parsed from text: acyclic
                return "".join(_CANONICAL_C(self.args, 0))
            return _CANONICAL.encode(self.args)
        return self.raw.strip() if isinstance(self.raw, str) else str(self.raw)


_SCAN = json.JSONDecoder().scan_once  # the scanner json.loads ends in (the C one where built), same settings
_SPACE = json.decoder.WHITESPACE.match


def loads(text: str) -> Any:
    """``json.loads(text)`` for a ``str``: the same value, and an error (ValueError or StopIteration,
    or RecursionError) for the same texts, without its three Python-level wrappers (a tool call's
    arguments are short, so those were about half of their parse)."""
    # the whitespace regex only where there may be whitespace: a text that starts with a blank (or is empty),
    # one whose value ends before its end
    value, end = _SCAN(text, _SPACE(text, 0).end() if text[:1] in " \t\n\r" else 0)
    if end != len(text) and _SPACE(text, end).end() != len(text):
        raise ValueError("extra data")
    return value


def parse_arguments(raw: Any) -> tuple[Any, bool]:
    """(parsed value, ok) for a tool call's ``arguments`` as found in a message."""
    if isinstance(raw, dict):
        return raw, True
    if not isinstance(raw, str):
        return None, False
    try:
        return loads(raw), True
    except (StopIteration, RecursionError, ValueError):  # JSONDecodeError is a ValueError
        return None, False


_GET, _object_setattr = object.__getattribute__, object.__setattr__
# a record made from its fields' tuple in one C call: the named tuple's own ``__new__`` is a Python function
_new_record = tuple.__new__


def message_tool_calls(step: int, calls: Any, append: Callable[[ToolCallRecord], object]) -> None:
    """``append`` the record of each tool call of the assistant message at ``step``, whose (truthy) ``tool_calls``
    value is ``calls``: ``Trajectory.tool_calls()``' parse of one message, for it and for a reader that walks the
    messages itself (``keep_tool_calls``). Calls that are not objects are skipped; a ``function`` that is
    not an object reads as one with no name and no arguments."""
    for j, tc in enumerate(calls if isinstance(calls, list) else ()):  # a hostile trace: any JSON
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function")
        if not isinstance(fn, dict):
            fn = {}
        raw = fn.get("arguments", "")
        if type(raw) is str:
            # jiter first (``traces.importers.jsonstream``: json.loads' values, about half its instructions here with
            # the encoding: 8.4 -> 4.2 M for tau-bench airline's 1,164 calls); what it refuses -- a lone surrogate,
            # nesting over 200 deep, any text that is no JSON -- the stdlib's scanner decides, as before
            # (``parse_arguments`` and ``loads`` written out: two Python calls less a call). jiter accepts no text the
            # scanner refuses (tests/traces/test_traces_arguments_jiter.py)
            try:
                args, ok = from_json(raw.encode()), True
            except ValueError:  # (UnicodeEncodeError too: a lone surrogate)
                try:
                    args, end = _SCAN(raw, _SPACE(raw, 0).end() if raw[:1] in " \t\n\r" else 0)
                    ok = end == len(raw) or _SPACE(raw, end).end() == len(raw)
                    if not ok:
                        args = None  # extra data after the value
                except (StopIteration, RecursionError, ValueError):
                    args, ok = None, False
        else:
            args, ok = parse_arguments(raw)
        append(_new_record(ToolCallRecord, (step, j, tc.get("id"), fn.get("name", ""), raw, args, ok)))


class _CallCache:
    """``Trajectory.tool_calls()``'s parse and the messages list it was read from. A new ``messages`` list, or one
    that grew or shrank, is parsed again."""

    __slots__ = ("calls", "messages", "n")

    def __init__(self) -> None:
        self.messages: list | None = None
        self.n = -1
        self.calls: list[ToolCallRecord] = []


def _call_cache(traj: Trajectory) -> _CallCache:
    """The slot ``_call_memo`` of ``traj``, made at the first read (read from the slot directly: an attribute pydantic
    does not find goes through its ``__getattr__``, ~17k interpreter instructions)."""
    try:
        return _GET(traj, "_call_memo")
    except AttributeError:  # not read yet (a new trajectory, or a copy of one: its copy parses again)
        cache = _CallCache()
        _object_setattr(traj, "_call_memo", cache)
        return cache


def kept_tool_calls(traj: Trajectory, messages: list[dict[str, Any]]) -> list[ToolCallRecord] | None:
    """``traj.tool_calls()`` where it has parsed ``messages`` (``traj.messages``) as they are now, else None. With
    ``keep_tool_calls``, for a reader that walks the messages anyway and parses the calls in that walk
    (``message_tool_calls``: the diagnosis view), so that they are walked once, not twice. Functions, not methods:
    they read nothing through the model's attributes."""
    cache = _call_cache(traj)
    return cache.calls if cache.messages is messages and cache.n == len(messages) else None


def keep_tool_calls(traj: Trajectory, messages: list[dict[str, Any]], calls: list[ToolCallRecord]) -> None:
    """Keep ``calls`` as ``traj.tool_calls()``' answer for ``messages`` (``traj.messages``) as they are now. ``calls``
    must be what ``tool_calls()`` would give (``message_tool_calls`` of each assistant message with calls)."""
    cache = _call_cache(traj)
    cache.messages, cache.n, cache.calls = messages, len(messages), calls


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # ``tool_calls()``' parse (a ``_CallCache``), made at its first call. A slot, not a pydantic private attribute:
    # equality, copies and pickles do not read it (whether the calls were parsed yet is no part of a trajectory's
    # value; a copy parses again), and a private attribute cost every trajectory ~12k instructions when made
    # (pydantic's ``init_private_attributes``, a Python function), ~7% of an import's record -> trajectory conversion.
    # ``__weakref__``: a class that declares slots has no weak-reference slot unless it names one, and a trajectory
    # is weakly referenced (caches, the labeller's tests of what a label keeps alive)
    __slots__ = ("_call_memo", "__weakref__")

    id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    split: Split = Split.unknown
    harness_commit: str | None = None
    model: str | None = None
    rollout: int = Field(0, ge=0, description="the rollout's index among the task's k rollouts (0-based)")
    task: str | None = Field(None, description="the task text given to the agent, if known")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    final_answer: str | None = None
    score: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    termination: Termination = Termination.delivered
    usage: Usage = Field(default_factory=Usage)
    meta: dict[str, Any] = Field(default_factory=dict, description=(
        "source-specific facts (source_format, tools, env, source_index, import_warnings, ...; docs/traces.md). "
        "actions_from_text: true when the assistant's tool calls were read from its text (a fenced command) and "
        "their results were user messages (mini-swe-agent, SWE-agent, nebius' SWE-agent rows): "
        "`dataset export` writes them back as text and user turns"))

    @field_validator("rollout", "score", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any, info: ValidationInfo) -> Any:
        """``true`` or ``"1"`` is no rollout index or score (lax validation read it as 1): a record that wrote one
        is refused, not read as a success."""
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be a number, not a boolean ({str(value).lower()})")
        if isinstance(value, str):  # "1" was read as 1.0: a record that wrote its score as text is not trusted
            raise ValueError(f"{info.field_name} must be a number, not a string ({value[:40]!r})")
        return value

    @field_validator("messages")
    @classmethod
    def _messages_have_roles(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, m in enumerate(value):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ValueError(f"message {i} has no string 'role'")
        return value

    @classmethod
    def with_messages(cls, messages: list[dict[str, Any]], *, checked: bool = False, **fields: Any) -> Trajectory:
        """A trajectory that takes ``messages`` over as they are, every other field validated.

        For importers that have just parsed the messages and checked each is a dict with a string
        ``role`` (what validation checks): validation would copy every message dict, a third of an
        import's cost. The list is the caller's no more: nothing else may hold or change it. ``checked``:
        the caller has made that check itself (a list of plain dicts, each with a string ``role``).
        """
        if not checked and (type(messages) is not list
                            or not all(type(m) is dict and isinstance(m.get("role"), str) for m in messages)):
            return cls(messages=messages, **fields)  # anything else is validated (and fails) as usual
        # what ``cls(**fields)`` then ``traj.messages = messages`` do, without their Python frames (``__init__`` and its
        # keyword arguments, ``__setattr__``'s handler): ~10k fewer instructions a trajectory (tau-bench: 2.1 M of 200)
        traj = cls.__pydantic_validator__.validate_python(fields)
        traj.__dict__["messages"] = messages  # no validate_assignment: kept, not copied
        traj.__pydantic_fields_set__.add("messages")
        return traj

    @property
    def delivered(self) -> bool:
        return self.final_answer is not None

    @property
    def scored(self) -> bool:
        return self.score is not None

    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call of every assistant message, in order, arguments parsed once (cached).

        Calls that are not objects are skipped; a ``function`` that is not an object reads as
        one with no name and no arguments.
        """
        cache = _call_cache(self)
        if cache.messages is not self.messages or cache.n != len(self.messages):
            out: list[ToolCallRecord] = []
            append = out.append
            for i, m in enumerate(self.messages):
                calls = m.get("tool_calls")
                if calls and m.get("role") == "assistant":
                    message_tool_calls(i, calls, append)
            cache.messages, cache.n, cache.calls = self.messages, len(self.messages), out
        return cache.calls

    def tool_calls_parsed(self) -> bool:
        """Whether ``tool_calls()`` has parsed this trajectory's calls already (and would not parse them again)."""
        cache = _call_cache(self)
        return cache.messages is self.messages and cache.n == len(self.messages)

    def assistant_steps(self) -> list[int]:
        """Indices of the assistant messages, in order."""
        return [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
