"""Trajectory -> a clean OpenAI chat fine-tuning record ``{"messages": [...], "tools": [...]}``.

What cleaning does (a record that cannot be cleaned is skipped with a reason, never patched up):

- roles are system / user / assistant / tool (``developer`` reads as system); content parts are
  joined into one string;
- assistant tool calls become ``{"id", "type": "function", "function": {"name", "arguments"}}``
  with ``arguments`` a JSON object serialised as a string;
- every tool result answers a pending call of the assistant turn before it (by ``tool_call_id``, or
  the oldest pending call when the id is missing); every call is answered before the next turn,
  except in the trajectory's *last* assistant turn: an agent's final action (e.g. a submit) often has
  no recorded result, so those unanswered calls are dropped and the turn keeps its text (a turn
  left with no text is dropped);
- trailing messages after the last assistant reply without tool calls are dropped (they teach
  nothing); a record with no such reply is skipped, and so is one with a system message after the
  conversation started (the chat format allows system messages only first);
- tool-call ids are re-keyed ``call00000``, ``call00001``, ... in record order (`call_id`): nine letters and
  digits, which Mistral's chat templates require of an id (they raise on any other) and every other format takes;
- ``tools`` declares every function called: the trajectory's own declarations
  (``meta["tools"]``, OpenAI tool objects or bare function objects) first, then for a called name not declared
  the declaration of the environment the rollout ran in (``meta["env"]``: `env_tools.EnvTools`, description and
  parameters), else one inferred from the calls (parameters typed from the argument values, no description).

A text-action trajectory (``meta["actions_from_text"]``: mini-swe-agent, SWE-agent, nebius' SWE-agent rows) is
written as the model saw and wrote it (`as_written`): each reply as its text (the fenced command in it, no
``tool_calls``), each observation as the ``user`` message it was. Its importer gave each command a ``bash`` call
and each observation a ``tool`` message, which labelling reads; exported as they are, a fine-tuned model would
learn to write every action twice, once in a format its own scaffold never parses.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from evoharness.traces.models import Trajectory, parse_arguments

# \A and \Z, not ^ and $: a Python ``$`` also matches before a final newline, so "lookup\n" (and 64 letters and a
# newline) passed as a name, was exported, and `dataset validate` called the record valid (until 2026-12-07)
TOOL_NAME = re.compile(r"\A[a-zA-Z0-9_-]{1,64}\Z")
_NAMES_CHECKED: dict[str, bool] = {}  # tool name -> whether TOOL_NAME matches it (``tool_name_ok``)
_NAMES_KEPT = 4096  # the most names remembered (names come from traces: bounded, as the export's memory is)


def tool_name_ok(name: Any) -> bool:
    """Whether ``name`` is a string ``TOOL_NAME`` matches. A record calls and declares a handful of names over and
    over (every call and every declaration is checked, by cleaning and by the record check): the answer for a short
    string is remembered, up to ``_NAMES_KEPT`` names, a dict lookup (~0.5k instructions) in place of the regex
    (~2.5k). A longer string is no name, unremembered."""
    if type(name) is not str:
        return isinstance(name, str) and TOOL_NAME.match(name) is not None
    ok = _NAMES_CHECKED.get(name)
    if ok is None:
        ok = TOOL_NAME.match(name) is not None
        if len(name) <= 65 and len(_NAMES_CHECKED) < _NAMES_KEPT:
            _NAMES_CHECKED[name] = ok
    return ok


_NOTHING: Mapping[str, Any] = MappingProxyType({})
_MISSING = object()
_ROLE_ALIASES = {"developer": "system"}


class RecordSkipped(Exception):  # noqa: N818 (a reason, not an error)
    """A trajectory that does not make a valid record; ``reason`` is a short slug."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def text_with_calls(record: dict) -> bool:
    """Whether an assistant reply of ``record`` holds text and tool calls: a turn that LLaMA-Factory's gemma*, llama2*
    and lfm2* templates cannot read (as ShareGPT) and Llama 3.1's and Mistral v3's chat templates write without its
    text (docs/datasets.md)."""
    return any(m.get("tool_calls") and m.get("content") for m in record["messages"])


def content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


# argument text -> its parsed value: ``Trajectory.tool_calls()``'s one parse, or (a ``dict``) filled by cleaning
Parsed = Mapping[str, Any]


def arguments_parsed(traj: Trajectory) -> dict[str, Any]:
    """The trajectory's argument texts that parsed, with their values, parsed once: those of
    ``Trajectory.tool_calls()`` when it has run (labelling runs it), else an empty dict that cleaning fills
    as it parses each call's arguments (``tool_calls()`` would build a record per call that export does not
    use: a tenth of an export's instructions)."""
    if not traj.tool_calls_parsed():
        return {}
    return {c.raw: c.args for c in traj.tool_calls() if c.parsed_ok and isinstance(c.raw, str)}


def _arguments(raw: Any, parsed: Parsed = _NOTHING) -> str:
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False)
    if raw is None or (isinstance(raw, str) and (not raw or raw.isspace())):
        return "{}"
    if isinstance(raw, str):
        value = parsed.get(raw, _MISSING)
        if value is _MISSING:
            value, ok = parse_arguments(raw)  # json.loads's value and failures
            if not ok:
                raise RecordSkipped("invalid_tool_arguments")
            if type(parsed) is dict:  # kept for ``declared_tools``
                parsed[raw] = value
        if isinstance(value, dict):
            return raw
    raise RecordSkipped("invalid_tool_arguments")


def _tool_call(call: Any, new_id: str, parsed: Parsed = _NOTHING) -> tuple[str | None, dict]:
    """(the call's own id or None, the clean call under ``new_id``)."""
    if not isinstance(call, dict):
        raise RecordSkipped("malformed_tool_call")
    fn = call.get("function")
    if not isinstance(fn, dict):
        fn = call
    name = fn.get("name")
    if not tool_name_ok(name):
        raise RecordSkipped("bad_tool_name")
    cid = call.get("id")
    args = fn.get("arguments")
    # the usual case first: a text that parsed as an object (never a blank one) is kept as written
    if type(args) is not str or type(parsed.get(args)) is not dict:
        args = _arguments(args, parsed)
    return (cid if isinstance(cid, str) and cid else None,
            {"id": new_id, "type": "function", "function": {"name": name, "arguments": args}})


def _blank(text: str | None) -> bool:
    # ``not text.strip()`` without copying the text (``isspace`` and ``strip`` share one notion of whitespace)
    return not text or text.isspace()


def clean_messages(messages: list[dict], parsed: Parsed = _NOTHING) -> list[dict]:
    """The trajectory's messages as valid OpenAI chat messages (see the module docstring).

    ``parsed`` maps argument texts already parsed (``arguments_parsed``) to their values, so they are not
    parsed again; a ``dict`` gets the texts parsed here added. Calls get their record ids (``call_0``, ...)
    as they are read: the calls dropped later (a final turn's unanswered ones, and those after the last
    reply) all come after every kept call, so the kept ones are numbered as ``rekey`` would number them.
    """
    out: list[dict] = []
    pending: list[tuple[str | None, dict]] = []  # (own id, clean call) of the turn's unanswered calls
    last_assistant = -1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            last_assistant = i
            break
    pending_at = pending_turn = -1  # where (in ``out``, in ``messages``) the pending calls were made
    n_calls = 0

    def drop_final_calls() -> None:
        msg = out[pending_at]
        msg.pop("tool_calls")
        answered = [m for m in out[pending_at + 1:] if m["role"] == "tool"]
        if answered:  # a partly answered final turn: keep it whole only if fully answered
            raise RecordSkipped("unanswered_tool_call")
        if msg["content"] is None:
            out.pop(pending_at)

    # blank text: ``not text or text.isspace()`` (``not text.strip()`` without copying the text; ``isspace``
    # and ``strip`` share one notion of whitespace), written out in the loop: it runs for every message
    for raw_i, m in enumerate(messages):
        role = m.get("role")
        if role == "developer":
            role = "system"
        text = m.get("content")
        if text is not None and type(text) is not str:
            text = content_text(text)
        if role == "tool":
            if not pending:
                raise RecordSkipped("unmatched_tool_result")
            cid = m.get("tool_call_id")
            k = 0
            if cid and pending[0][0] != cid:
                k = 1
                while k < len(pending) and pending[k][0] != cid:
                    k += 1
                if k == len(pending):
                    raise RecordSkipped("unmatched_tool_result")
            out.append({"role": "tool", "tool_call_id": pending.pop(k)[1]["id"], "content": text or ""})
            continue
        if pending:
            if pending_at < 0 or pending_turn != last_assistant:
                raise RecordSkipped("unanswered_tool_call")
            drop_final_calls()
            pending = []
        if role == "user" or role == "system":
            if text and not text.isspace():  # an empty system/user message carries nothing
                if role == "system" and out and out[-1]["role"] != "system":  # the chat format has none there
                    raise RecordSkipped("system_message_mid_conversation")
                out.append({"role": role, "content": text})
        elif role == "assistant":
            raw_calls = m.get("tool_calls")
            blank = not text or text.isspace()
            if raw_calls:
                if type(raw_calls) is not list:  # a number was a TypeError; an object or a text, malformed calls
                    raise RecordSkipped("malformed_tool_call")
                calls = []
                for c in raw_calls:
                    calls.append(_tool_call(c, record_call_id(n_calls), parsed))
                    n_calls += 1
                msg = {"role": "assistant", "content": None if blank else text,
                       "tool_calls": [c for _, c in calls]}
                pending, pending_at, pending_turn = calls, len(out), raw_i
            elif blank:
                raise RecordSkipped("empty_assistant_turn")
            else:
                msg = {"role": "assistant", "content": text}
            out.append(msg)
        else:
            raise RecordSkipped(f"unknown_role_{role}"[:40])
    if pending:
        if pending_turn != last_assistant:
            raise RecordSkipped("unanswered_tool_call")
        drop_final_calls()
    for last in range(len(out) - 1, -1, -1):
        m = out[last]
        if m["role"] == "assistant" and "tool_calls" not in m:
            del out[last + 1:]
            return out
    raise RecordSkipped("no_assistant_reply")


def call_id(n: int) -> str:
    """The record id of a record's ``n``-th tool call: ``call00000``, ``call00001``, ... Nine letters and digits
    (up to call 99,999: 100,000 calls a record; cleaning skips a record of more, ``MAX_CALLS``): Mistral's chat
    templates raise "Tool call IDs should be alphanumeric strings with length 9!" on any other id, such as the
    ``call_0`` written until the twelfth session."""
    return f"call{n:05d}"


MAX_CALLS = 100_000  # call ids are nine characters (``call_id``) up to call 99,999


def _later_id(n: int) -> str:
    """``call_id(n)`` for a call past the first ``_N_CALL_IDS``; a record with more than ``MAX_CALLS`` calls is
    skipped (``too_many_tool_calls``): its 100,001st id would be ten characters, which Mistral's chat templates
    refuse (until 2026-12-07 it was written so)."""
    if n >= MAX_CALLS:
        raise RecordSkipped("too_many_tool_calls")
    return call_id(n)


_N_CALL_IDS = 256
_CALL_IDS = tuple(call_id(n) for n in range(_N_CALL_IDS))  # the first ones made once, not formatted per call


def record_call_id(n: int) -> str:
    """The id a written record gives its ``n``-th tool call (``call_id``), for cleaning and ``rekey`` alike: past
    ``MAX_CALLS`` the record is skipped (``too_many_tool_calls``). ``rekey`` wrote ``call100000`` on: a placebo
    record takes its call turns from other records, so it can hold more calls than any record it came from."""
    return _CALL_IDS[n] if n < _N_CALL_IDS else _later_id(n)


def rekey(messages: list[dict]) -> list[dict]:
    """Give tool calls fresh ids (`record_call_id`: ``RecordSkipped`` past ``MAX_CALLS``) and point their results at
    them.

    Tool messages may hold the call dict itself or its old id; old ids are looked up among the calls of
    the assistant turn they follow.
    """
    n = 0
    current: dict[int, str] = {}
    by_old: dict[str, str] = {}
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            current, by_old, calls = {}, {}, []
            for c in m["tool_calls"]:
                new_id = record_call_id(n)
                n += 1
                current[id(c)] = new_id
                if c.get("id"):
                    by_old[c["id"]] = new_id
                calls.append({**c, "id": new_id})
            out.append({**m, "tool_calls": calls})
        elif m["role"] == "tool":
            ref = m["tool_call_id"]
            new_id = current.get(id(ref)) if isinstance(ref, dict) else by_old.get(ref)
            out.append({"role": "tool", "tool_call_id": new_id if new_id is not None else ref,
                        "content": m["content"]})
        else:
            out.append(m)
    return out


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "string"


# the exact types JSON parsing gives -> their JSON Schema type (what ``_json_type`` says, without the calls)
_JSON_TYPES = {str: "string", type(None): "string", bool: "boolean", int: "integer", float: "number",
               list: "array", dict: "object"}


def _declared(traj: Trajectory) -> list[dict]:
    raw = traj.meta.get("tools") if isinstance(traj.meta, dict) else None
    out = []
    for t in raw if isinstance(raw, list) else []:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and tool_name_ok(fn.get("name")):
            decl = {"name": fn["name"], "description": str(fn.get("description") or "")}
            params = fn.get("parameters")
            decl["parameters"] = params if isinstance(params, dict) else {"type": "object", "properties": {}}
            out.append({"type": "function", "function": decl})
    return out


def declared_tools(traj: Trajectory | None, messages: list[dict], extra: list[dict] = (),
                   parsed: Parsed = _NOTHING, known: Mapping[str, dict] = MappingProxyType({})) -> list[dict]:
    """Tools for a record: declarations (the trajectory's, then ``extra``), then for a called tool neither
    declares its declaration in ``known`` (the environment's: `env_tools.EnvTools`), then inferred ones."""
    tools: dict[str, dict] = {}
    for t in _declared(traj) if traj is not None else ():
        tools.setdefault(t["function"]["name"], t)
    for t in extra:
        tools.setdefault(t["function"]["name"], t)
    # in first-call order: a declared tool's None (its declaration is used as it is), an undeclared one's parameters
    # as inferred from its calls' arguments; a name's declaration is looked for at its first call only (``known`` is
    # the same mapping at every call)
    called: dict[str, dict[str, str] | None] = {}
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            continue
        for c in calls:
            fn = c["function"]
            name = fn["name"]
            props = called.get(name, _MISSING)
            if props is None:
                continue
            if props is _MISSING:
                if name not in tools and name in known:
                    tools[name] = copy.deepcopy(known[name])  # the record's own: shared, a writer's change would spread
                if name in tools:
                    called[name] = None
                    continue
                props = called[name] = {}
            text = fn["arguments"]
            args = parsed.get(text, _MISSING)
            if args is _MISSING:
                try:
                    args = json.loads(text)
                except json.JSONDecodeError:
                    args = {}
            for k, v in args.items():
                if k not in props:
                    props[k] = _JSON_TYPES.get(type(v)) or _json_type(v)
    # the called tools declared, then those inferred (each in first-call order), then those declared and not called
    out = [tools[name] for name, props in called.items() if props is None]
    n_declared = len(out)
    for name, props in called.items():
        if props is not None:
            out.append({"type": "function", "function": {
                "name": name, "description": "",
                "parameters": {"type": "object", "properties": {k: {"type": props[k]} for k in sorted(props)}}}})
    if n_declared < len(tools):
        out += [t for name, t in tools.items() if called.get(name, _MISSING) is not None]
    return out


def with_system(messages: list[dict], system: str | None) -> list[dict]:
    """Replace the leading system message(s) by ``system`` (None keeps the trajectory's own)."""
    if system is None:
        return messages
    i = 0
    while i < len(messages) and messages[i]["role"] == "system":
        i += 1
    return [{"role": "system", "content": system}, *messages[i:]]


def to_record(traj: Trajectory, renderer=None) -> dict:
    """One OpenAI chat fine-tuning record; raises ``RecordSkipped``."""
    return record_and_arguments(traj, renderer)[0]


TEXT_ACTIONS = "actions_from_text"  # the ``meta`` key text-action importers set (``_shape.actions_from_text``)


def as_written(messages: list[dict]) -> list[dict]:
    """A text-action trajectory's messages as the model saw and wrote them: the importer's synthesized calls taken
    off each reply (its text keeps the command) and each ``tool`` result given back as the ``user`` message it
    was (its text as imported)."""
    out = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            out.append({"role": "user", "content": m.get("content")})
        elif role == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content")})
        else:
            out.append(m)
    return out


def record_and_arguments(traj: Trajectory, renderer=None, *,
                         known_tools: Mapping[str, dict] = MappingProxyType({})) -> tuple[dict, Parsed]:
    """``to_record``, and the argument texts its calls were read from with their parsed values (the one parse:
    ``Trajectory.tool_calls()``'s when labelling ran it, else cleaning's), for a writer that needs a call's
    arguments as a value (ShareGPT) so that it does not parse them again. A call whose arguments were an object
    or blank has a text made here (``json.dumps``, ``{}``) that is not among them. ``known_tools``: the declarations
    of the trajectory's environment (`declared_tools`' ``known``)."""
    if isinstance(traj.meta, dict) and traj.meta.get(TEXT_ACTIONS) is True:
        parsed: Parsed = {}
        messages = clean_messages(as_written(traj.messages))
    else:
        parsed = arguments_parsed(traj)
        messages = clean_messages(traj.messages, parsed)
    tools = declared_tools(traj, messages, parsed=parsed, known=known_tools)
    if renderer is not None and renderer.active:
        messages = with_system(messages, renderer.render(traj, tools))
    return {"messages": messages, "tools": tools}, parsed
