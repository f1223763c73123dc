"""A precomputed, read-only view of one trajectory that the detectors share."""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from typing import Any

from evoharness.traces.models import (
    ToolCallRecord,
    Trajectory,
    keep_tool_calls,
    kept_tool_calls,
    message_tool_calls,
    parse_arguments,
)

FAILED_JSON_CHARS = 100_000  # a result is read as a JSON error object this far (a longer one is none)


def failed_result(text: str) -> bool:
    """Whether a tool result says its call failed: it opens with ``error`` (any case, after leading white space:
    tau-bench's and tau2's ``Error: ...``, AG2's ``Error: <what the tool raised>``), or it is a JSON object with a
    true ``error`` or a false ``success`` / ``ok``. The one reading of a failed call for every rule that asks
    (``invariants.failed_call_ids``, ``outcome``). Literal gates first: a result is parsed only when it opens with
    ``{`` and holds one of those keys within ``FAILED_JSON_CHARS``."""
    head = text.lstrip()[:5]
    if head.lower() == "error":
        return True
    if head[:1] != "{":
        return False
    window = text if len(text) <= FAILED_JSON_CHARS else text[:FAILED_JSON_CHARS]
    # three `in` tests, not any() over a generator of finds: a tenth of the cost per result (tau-bench's results
    # are JSON objects, 1,164 of them per 200 records, and almost none holds a key)
    if '"error"' not in window and '"success"' not in window and '"ok"' not in window:
        return False
    try:
        parsed = json.loads(window)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return False
    return isinstance(parsed, dict) and bool(
        parsed.get("error") or parsed.get("success") is False or parsed.get("ok") is False)


class once:  # noqa: N801 -- used as a decorator, like the cached_property it stands for
    """``functools.cached_property`` without its lock: Python 3.11's takes a lock at every first read (a few
    microseconds, about a detector's whole cost on a run it skips; a view is read by one thread). The value is
    computed at the first read and kept in the instance's ``__dict__``, which later reads find first."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class ToolCall:
    """One tool call as the detectors read it (read-only). ``arguments`` (the raw argument text as the model
    wrote it) and ``canonical`` (canonical JSON of the parsed arguments, or the raw text stripped if it did not
    parse) are made from the trajectory's parsed call when read (``canonical`` once): most calls are never asked
    for either (a read tool's name says it changes nothing; a repeat needs its name to recur first)."""

    __slots__ = ("step", "id", "call_id", "name", "parsed_ok", "args", "_record", "_canonical", "writes", "in_place")

    def __init__(self, record: ToolCallRecord) -> None:
        step, index, ident, name, _, args, ok = record
        self.step: int = step  # index of the assistant message that made the call
        # the id the trace gave the call (``step.index`` where it gave none): what a harness event names
        self.call_id: str = ident if type(ident) is str and ident else str(ident or f"{step}.{index}")
        # this call's own key in the view (``TraceView.results``, every per-call set the rules keep): the trace's id,
        # or where the model reused one, the id with the occurrence's number ("call_1#2": ``TraceView``)
        self.id: str = self.call_id
        self.name: str = name if type(name) is str else str(name)
        self.parsed_ok: bool = ok
        self.args: object = args  # the parsed arguments (None when they did not parse)
        self._record = record
        self._canonical: str | None = None
        # ``detectors.changes_state``'s answer, kept there when first asked (None: not yet): the write, repeat,
        # friction and user-quit rules each ask it of the same calls, and a shell call's answer is a regex scan of
        # its command (a mini-swe-agent run asked it ~1.5 times a call)
        self.writes: bool | None = None
        self.in_place: bool | None = None  # ``detectors._edits_in_place``'s answer, kept there when first asked

    @property
    def arguments(self) -> str:
        return self._record.raw_text

    @property
    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = self._record.canonical
        return self._canonical

    def canonical_may_hold(self, word: str) -> bool:
        """False only where ``canonical`` cannot contain ``word`` (letters, digits and ``_``; no JSON punctuation), so
        that a caller can skip making it. Such a word lies inside one string of the canonical text, so inside a
        string of the parsed arguments (or of the stripped raw text, when they did not parse), which the raw text
        wrote either as it is or with a ``\\u`` escape (JSON's only escape that gives a letter, a digit or ``_``)."""
        raw = self._record.raw
        return not isinstance(raw, str) or word in raw or "\\u" in raw

    def canonical_lacks(self, words: tuple[str, ...]) -> bool:
        """True only where ``canonical`` holds none of ``words`` (each of ASCII letters and ``_``, perhaps ending in one
        ASCII blank), so that a caller can skip making it and searching it: the raw text is ASCII, holds no ``\\u``
        escape and none of the words. Such a text's strings are ASCII, which the canonical text writes as the raw text
        did (a word holds no escape or punctuation); a non-ASCII character is written there as ``\\uXXXX``, whose hex
        digits may begin a word (``\\u00edit`` holds "edit"), hence no shortcut for other text. The only blank of a
        parsed text's canonical form is a space inside a string (compact separators; control characters escaped),
        which the raw text wrote as itself. A number it rewrites (``1e400`` as ``Infinity``) is no such word's source;
        a text that did not parse is its own canonical text, stripped."""
        raw = self._record.raw
        return type(raw) is str and raw.isascii() and "\\u" not in raw and not any(map(raw.__contains__, words))

    def shape(self) -> frozenset | None:
        """A key that is equal for any two calls whose ``canonical`` texts are equal, made without the text (a count of
        shapes bounds a count of canonical texts from above): the arguments' top-level keys, each with its value if a
        string (a long one by its length and ends: a shell command writing a file runs to KB, hashed again for nothing),
        else its type. Canonical JSON writes each string one way, and each JSON type its own way (an integer never as a
        float, ``true`` never as ``1``), so equal texts have equal keys, strings and types. None for arguments that are
        no object parsed from text (a dict given as one may hold tuples, written as lists)."""
        args = self.args
        if type(args) is not dict or not self.parsed_ok or type(self._record.raw) is not str:
            return None
        return frozenset([(k, (v if len(v) <= 64 else (len(v), v[:16], v[-16:])) if type(v) is str else type(v))
                          for k, v in args.items()])

    def __repr__(self) -> str:
        return f"ToolCall(step={self.step}, id={self.id!r}, name={self.name!r}, arguments={self.arguments!r})"


def canonical_args(raw: object) -> tuple[str, bool]:
    args, ok = parse_arguments(raw)
    if ok:
        return ToolCallRecord(0, 0, None, None, raw, args, True).canonical, True
    return (raw.strip() if isinstance(raw, str) else str(raw)), False


class Run:
    """A trajectory's fields as plain attributes, read once per view (read-only; ``trajectory`` is the run itself).

    A pydantic model's attribute read goes through its class's ``__getattr__`` hook (~580 interpreter instructions
    against ~20 for a slot; the interpreter cannot specialise it), and the detectors read ``score``, ``messages``,
    ``final_answer``, ``events`` ... ~70 times a run: ~8 M instructions per 200 tau-bench runs. The values are the
    trajectory's own objects (the messages list, the events), not copies."""

    __slots__ = ("trajectory", "id", "task_id", "split", "harness_commit", "model", "rollout", "task", "messages",
                 "events", "final_answer", "score", "termination", "usage", "meta", "delivered", "scored")

    def __init__(self, traj: Trajectory) -> None:
        fields = traj.__dict__  # (a pydantic model keeps its field values there)
        self.trajectory = traj
        self.id, self.task_id, self.split = fields["id"], fields["task_id"], fields["split"]
        self.harness_commit, self.model, self.rollout = fields["harness_commit"], fields["model"], fields["rollout"]
        self.task, self.messages, self.events = fields["task"], fields["messages"], fields["events"]
        self.final_answer, self.score, self.termination = fields["final_answer"], fields["score"], fields["termination"]
        self.usage, self.meta = fields["usage"], fields["meta"]
        self.delivered = self.final_answer is not None
        self.scored = self.score is not None

    def tool_calls(self) -> list[ToolCallRecord]:
        return self.trajectory.tool_calls()

    def assistant_steps(self) -> list[int]:
        return self.trajectory.assistant_steps()


class TraceView:
    """One pass over the messages, shared by every detector: per message its role and its text (the
    content when it is a string, else ""), the steps of each role, the tool calls with their arguments
    parsed once, and the tool results by call (``results``, keyed by ``ToolCall.id``). A detector reads these
    instead of re-walking and re-checking the message dicts. Read-only; what a detector derives from it once per
    run is kept on it (``once`` properties, or its ``__dict__``).

    A call's result is the first tool message after it that names its id. A model may reuse an id (GPT-4o in 51 of
    the 407 tuning runs: a look-up, then a write under the same id): there each call is its own occurrence -- the
    second call with id X is "X#2" in ``ToolCall.id`` and ``results`` -- and reads its own result, not the last one
    under the id (``_per_occurrence``). ``answered(step)`` gives the call a tool message answers."""

    def __init__(self, traj: Trajectory) -> None:
        self.traj = Run(traj)  # the run's fields as plain attributes (``Run``); ``traj.trajectory`` is the run
        self.trajectory = traj
        self.roles: list[object] = []  # per message: its role
        self.texts: list[str] = []  # per message: its content if a string, else ""
        self.assistant_steps: list[int] = []
        self.user_steps: list[int] = []
        self.tool_steps: list[int] = []
        self.results: dict[str, tuple[int, str]] = {}  # call id -> (step, content)
        roles, texts, assistant, user, tool, results = self.roles, self.texts, self.assistant_steps, \
            self.user_steps, self.tool_steps, self.results
        # the tool calls parsed in this same walk (``message_tool_calls``, the trajectory's own parse) and kept on the
        # trajectory, unless it has parsed them already (export reads them there): one walk of the messages, not two
        messages = self.traj.messages
        records = kept_tool_calls(traj, messages)
        parsed = records is not None
        if records is None:
            records = []
        keep = records.append
        for i, m in enumerate(messages):
            role = m.get("role")
            content = m.get("content")
            roles.append(role)
            text = content if isinstance(content, str) else ""
            texts.append(text)
            if role == "assistant":
                assistant.append(i)
                if not parsed and (made := m.get("tool_calls")):
                    message_tool_calls(i, made, keep)
            elif role == "tool":
                tool.append(i)
                results[str(m.get("tool_call_id"))] = (i, text if text is content else str(content))
            elif role == "user":
                user.append(i)
        if not parsed:
            keep_tool_calls(traj, messages, records)
        self.calls: list[ToolCall] = list(map(ToolCall, records))  # arguments parsed once, kept on the trajectory
        calls = self.calls
        if len(calls) > 1 and len({c.id for c in calls}) < len(calls):  # (a C set: the common case pays only this)
            self._per_occurrence()

    def _per_occurrence(self) -> None:
        """Where the model reused a call id: each call after the first with its id gets the occurrence's number
        ("X#2", "X#3"; one more "#" where that is some call's own id), and ``results`` pairs each call with the first
        tool message after it naming its id that no earlier call took; a tool message no call waits for keeps its
        id as the key, as before (the later one, where two answer one call). Only the tool messages under a reused id
        or under an occurrence's key are paired again: a message under any other id keeps the walk's pairing (one
        call at most waits for that id, so every message under it goes under the id, the last one staying) and is
        answered by its own id (``answered``'s fall-back), and no key it writes is one of those paired again."""
        calls, msgs, results = self.calls, self.traj.messages, self.results
        taken = {c.call_id for c in calls}
        seen: dict[str, int] = {}
        reused: set[str] = set()
        again: set[str] = set()  # the ids whose tool messages are paired again: the reused ones and the new keys
        for c in calls:
            n = seen[c.call_id] = seen.get(c.call_id, 0) + 1
            if n > 1:
                reused.add(c.call_id)
                key = f"{c.call_id}#{n}"
                while key in taken:
                    key += "#"
                taken.add(key)
                again.add(key)
                c.id = key
        again |= reused
        for raw in again:
            results.pop(raw, None)
        mine = [c for c in calls if c.call_id in reused]
        answered: dict[int, str] = {}
        waiting: dict[str, list[str]] = {}
        k = 0
        for i in self.tool_steps:
            raw = str(msgs[i].get("tool_call_id"))
            if raw not in again:
                continue
            while k < len(mine) and mine[k].step < i:
                waiting.setdefault(mine[k].call_id, []).append(mine[k].id)
                k += 1
            queue = waiting.get(raw)
            key = queue.pop(0) if queue else raw
            content = msgs[i].get("content")
            results[key] = (i, content if isinstance(content, str) else str(content))
            answered[i] = key
        self.__dict__["_answered"] = answered

    def answered(self, step: int) -> str:
        """The ``ToolCall.id`` of the call the tool message at ``step`` answers (its ``tool_call_id``, or where the
        model reused ids, that occurrence's key)."""
        answered = self.__dict__.get("_answered")
        if answered is not None and step in answered:
            return answered[step]
        return str(self.traj.messages[step].get("tool_call_id"))

    @classmethod
    def of(cls, traj: Trajectory) -> TraceView:
        return cls(traj)

    def lowered(self, i: int) -> str:
        """Message ``i``'s text (``texts[i]``) lower-cased, once per view, when first asked for."""
        low = self.__dict__.get("_lowered")
        if low is None:
            low = self.__dict__["_lowered"] = [None] * len(self.texts)
        text = low[i]
        if text is None:
            text = low[i] = self.texts[i].lower()
        return text

    def turn_of(self, step: int) -> int | None:
        """The assistant turn (message index) that a step belongs to: the last one at or before it (a binary search:
        the friction rule asks at each friction step)."""
        steps = self.assistant_steps
        i = bisect.bisect_right(steps, step)
        return steps[i - 1] if i else None

    def next_turn(self, turn: int | None) -> int | None:
        steps = self.assistant_steps
        i = 0 if turn is None else bisect.bisect_right(steps, turn)
        return steps[i] if i < len(steps) else None

    @once
    def final_step(self) -> int:
        """Where the delivery (or its absence) is: the last assistant message, else the last message."""
        if self.assistant_steps:
            return self.assistant_steps[-1]
        return max(len(self.traj.messages) - 1, 0)

    @once
    def grounding_text(self) -> str:
        """Everything the agent was told or shown: task, system/user messages, tool results.

        In multi-agent logs (assistant messages carrying a ``name``), what *other* agents
        said counts as shown to the final speaker.
        """
        return "\n".join(self.grounding_parts)

    @once
    def grounding_parts(self) -> list[str]:
        """``grounding_text`` before joining: one string per source (each the same object as
        in the message, so a per-text cache keyed on it -- a system prompt shared by every
        trajectory of a benchmark -- hits)."""
        parts = [self.traj.task or ""]
        speaker = self.traj.messages[self.final_step].get("name") if self.traj.messages else None
        for m in self.traj.messages:
            role = m.get("role")
            if role in ("system", "user", "tool") or (
                role == "assistant" and speaker and m.get("name") and m.get("name") != speaker
            ):
                c = m.get("content")
                parts.append(c if isinstance(c, str) else json.dumps(c) if c is not None else "")
        return parts

    @once
    def violations(self) -> list:
        """The violation log (invariants.violation_log), computed once per trajectory."""
        from evoharness.diagnosis.invariants import violation_log

        return violation_log(self)
