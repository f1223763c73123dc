"""Validators for exported records: the OpenAI chat fine-tuning format and ShareGPT.

``openai_errors(record)`` returns every problem found (empty list = valid):

- the record is ``{"messages": [...], "tools": [...]}`` (``tools`` and ``parallel_tool_calls``
  optional, nothing else);
- roles are system / user / assistant / tool; system messages come only before the first other
  message; system and user messages have non-empty string content;
- an assistant message has string content or tool calls (or both); a tool call has a unique string
  ``id``, ``type == "function"``, a function ``name`` declared in ``tools`` and ``arguments`` that
  parse as a JSON object;
- each tool message answers, by ``tool_call_id``, a call of the assistant turn right before it that
  is not yet answered; every call is answered before the next non-tool message and before the end;
- at least one assistant message, and the last message is an assistant reply.

``sharegpt_errors(record)``: turns alternate human|observation and gpt|function_call, the last is a gpt reply, and
each function_call value is one LLaMA-Factory's function formatter reads as calls
(``llamafactory.function_call_problem``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from evoharness.traces.store import jsonl_lines

from .chat import tool_name_ok
from .llamafactory import function_call_problem

ROLES = {"system", "user", "assistant", "tool"}


def _tool_errors(tools) -> tuple[list[str], set[str]]:
    errs: list[str] = []
    names: set[str] = set()
    if not isinstance(tools, list):
        return ["tools: not a list"], names
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            errs.append(f"tools[{i}]: not a function tool")
            continue
        name = fn.get("name")
        if not tool_name_ok(name):
            errs.append(f"tools[{i}]: bad name {name!r}")
        elif name in names:
            errs.append(f"tools[{i}]: duplicate name {name!r}")
        else:
            names.add(name)
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            errs.append(f"tools[{i}]: parameters is not an object")
    return errs, names


def _surely_valid(messages: list, declared: set[str], check_arguments: bool) -> bool:
    """True only when ``openai_errors``' pass over ``messages`` would find nothing: the same rules, checked stricter
    and cheaper (exact ``dict`` / ``list`` / ``str`` types, a missing key or any other surprise is False), with no
    error text made. False sends the record through that pass, which says what is wrong (or finds nothing: a str
    subclass, say). The exporter checks every record it writes: this is ~2x cheaper on a valid one."""
    seen_ids: set[str] = set()
    pending: set[str] = set()
    seen_other = False
    try:
        for m in messages:
            if type(m) is not dict:
                return False
            role = m["role"]
            if role == "tool":
                cid = m["tool_call_id"]
                if type(cid) is not str or cid not in pending or type(m["content"]) is not str:
                    return False
                pending.remove(cid)
                seen_other = True
                continue
            if pending:
                return False
            content = m["content"]
            if role == "assistant":
                seen_other = True
                calls = m.get("tool_calls")
                if calls is None:
                    if type(content) is not str or not content or content.isspace():
                        return False
                    continue
                if type(calls) is not list or not calls or (content is not None and type(content) is not str):
                    return False
                for c in calls:
                    cid, fn = c["id"], c["function"]
                    if (type(cid) is not str or not cid or cid in seen_ids or type(fn) is not dict
                            or c["type"] != "function"):
                        return False
                    seen_ids.add(cid)
                    pending.add(cid)
                    name, args = fn["name"], fn["arguments"]
                    if type(name) is not str or name not in declared or type(args) is not str:
                        return False
                    if check_arguments and type(json.loads(args)) is not dict:
                        return False
                continue
            if role == "user":
                seen_other = True
            elif role != "system" or seen_other:
                return False
            if type(content) is not str or not content or content.isspace():
                return False
    except (KeyError, TypeError, ValueError, RecursionError):  # a missing key, a call that is no dict, bad JSON
        return False
    last = messages[-1]
    return not pending and last["role"] == "assistant" and not last.get("tool_calls")


def openai_errors(record, *, check_arguments: bool = True) -> list[str]:
    """Every problem of one record. ``check_arguments=False`` skips parsing each call's
    ``arguments`` (for records whose arguments the exporter itself parsed as JSON objects)."""
    if not isinstance(record, dict):
        return ["record: not an object"]
    errs: list[str] = []
    extra = set(record) - {"messages", "tools", "parallel_tool_calls"}
    if extra:
        errs.append(f"record: unexpected keys {sorted(extra)}")
    terr, declared = _tool_errors(record.get("tools", []))
    errs += terr
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        return errs + ["messages: missing or empty"]
    if _surely_valid(messages, declared, check_arguments):  # the messages hold none of the problems below
        return errs
    seen_ids: set[str] = set()
    pending: set[str] = set()
    seen_other = False
    for i, m in enumerate(messages):  # error texts are formatted only when there is an error
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":  # the commonest roles first; the checks are those of the docstring, in its order
            seen_other = True
            cid = m.get("tool_call_id")
            if isinstance(cid, str) and cid in pending:  # (ids are strings; a list or object is no id)
                pending.discard(cid)
            else:
                errs.append(f"messages[{i}]: tool_call_id {cid!r} answers no pending call")
            if not isinstance(m.get("content"), str):
                errs.append(f"messages[{i}]: tool content must be a string")
            continue
        if not isinstance(role, str) or role not in ROLES:
            errs.append(f"messages[{i}]: bad role {role!r}")
            continue
        content = m.get("content")
        if pending:
            errs.append(f"messages[{i}]: tool calls {sorted(pending)} not answered before this {role} message")
            pending = set()
        if role == "system":
            if seen_other:
                errs.append(f"messages[{i}]: system message after the conversation started")
        else:
            seen_other = True
        if role != "assistant":  # system or user
            if not isinstance(content, str) or not content or content.isspace():
                errs.append(f"messages[{i}]: {role} content must be a non-empty string")
            continue
        calls = m.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not calls):
            errs.append(f"messages[{i}]: tool_calls must be a non-empty list")
            calls = None
        if content is not None and not isinstance(content, str):
            errs.append(f"messages[{i}]: assistant content must be a string or null")
        if not calls:
            if not (isinstance(content, str) and content and not content.isspace()):
                errs.append(f"messages[{i}]: assistant message has neither content nor tool calls")
            continue
        for j, c in enumerate(calls):
            if isinstance(c, dict):
                fn, cid = c.get("function"), c.get("id")
            else:
                fn = cid = None
            if not isinstance(cid, str) or not cid:
                errs.append(f"messages[{i}].tool_calls[{j}]: missing id")
            elif cid in seen_ids:
                errs.append(f"messages[{i}].tool_calls[{j}]: duplicate id {cid!r}")
            else:
                seen_ids.add(cid)
                pending.add(cid)
            if not isinstance(fn, dict) or c.get("type") != "function":
                errs.append(f"messages[{i}].tool_calls[{j}]: not a function call")
                continue
            if not isinstance(fn.get("name"), str) or fn.get("name") not in declared:
                errs.append(f"messages[{i}].tool_calls[{j}]: function {fn.get('name')!r} not declared in tools")
            if not check_arguments:
                if not isinstance(fn.get("arguments"), str):
                    errs.append(f"messages[{i}].tool_calls[{j}]: arguments are not JSON")
                continue
            try:
                args = json.loads(fn.get("arguments"))
                if not isinstance(args, dict):
                    errs.append(f"messages[{i}].tool_calls[{j}]: arguments are not a JSON object")
            except (TypeError, ValueError):  # ValueError: JSONDecodeError, an integer past 4,300 digits
                errs.append(f"messages[{i}].tool_calls[{j}]: arguments are not JSON")
            except RecursionError:  # was a traceback
                errs.append(f"messages[{i}].tool_calls[{j}]: arguments are nested too deeply")
    if pending:
        errs.append(f"record: tool calls {sorted(pending)} never answered")
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    if last.get("role") != "assistant" or last.get("tool_calls"):
        errs.append("record: the last message is not an assistant reply")
    return errs


SHAREGPT_ASK = {"human", "observation"}
SHAREGPT_ANSWER = {"gpt", "function_call"}


def sharegpt_errors(record) -> list[str]:
    """ShareGPT (LLaMA-Factory layout): turns alternate human|observation, gpt|function_call."""
    if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
        return ["record: no conversations list"]
    errs = []
    turns = record["conversations"]
    if not turns:
        return ["conversations: empty"]
    for i, t in enumerate(turns):
        who = t.get("from") if isinstance(t, dict) else None
        want = SHAREGPT_ASK if i % 2 == 0 else SHAREGPT_ANSWER
        if not isinstance(who, str) or who not in want:
            errs.append(f"conversations[{i}]: from {who!r}, expected one of {sorted(want)}")
        if not isinstance(t.get("value") if isinstance(t, dict) else None, str):
            errs.append(f"conversations[{i}]: value is not a string")
        elif who == "function_call" and (why := function_call_problem(t["value"])):
            errs.append(f"conversations[{i}]: a function_call LLaMA-Factory cannot read: {why}")
    if not isinstance(turns[-1], dict) or turns[-1].get("from") != "gpt":
        errs.append("conversations: the last turn is not a gpt reply")
    if not isinstance(record.get("tools", ""), str):
        errs.append("tools: not a JSON string")
    return errs


def validate_file(path: Path | str, check: Callable[[dict], list[str]] = openai_errors) -> tuple[int, list[str]]:
    """Validate a JSONL export record by record with ``check``; returns (records, problems as 'line N: ...')."""

    n, problems = 0, []
    for lineno, raw in jsonl_lines(path):
        n += 1
        try:
            rec = json.loads(raw)
        except ValueError:  # also bytes in no UTF encoding
            problems.append(f"line {lineno}: not JSON")
            continue
        except RecursionError:
            problems.append(f"line {lineno}: JSON nested too deeply")
            continue
        problems += [f"line {lineno}: {e}" for e in check(rec)]
    return n, problems


def all_valid(records: Iterable[dict]) -> bool:
    return all(not openai_errors(r) for r in records)
