"""AG2's / AutoGen 0.2's ``ChatResult.chat_history`` with tool calls (read by ``agentrx``, as its named lists).

AG2 keeps a chat as OpenAI messages seen from one agent: ``role`` is that agent's view (the other agent's turns are
``user``) and ``name`` says who spoke -- on every message but a model's tool-call reply (``tool_calls``, or the older
``function_call``; named in a group chat, unnamed in a two-agent chat). The executing agent answers with one
``role: tool`` message holding every result in ``tool_responses`` (``{tool_call_id, role, content}``) and their
contents joined in ``content``; the older function calling answers with ``role: function``, ``name`` the function.
A tool that raised comes back as ``Error: ...`` (AG2's ``execute_function``).
"""

from __future__ import annotations

from typing import Any

from evoharness.traces.importers._shape import arguments, content_text, obj, text

CALL_KEYS = ("tool_calls", "function_call")


def is_history(data: Any) -> bool:
    """An AG2 chat history with tool calls: a bare list of ``{role, content}`` objects in which a tool's results come
    as ``tool_responses`` (AG2's own key), or that makes calls and names the speaker of every message that makes none.
    (An OpenAI chat list names no user or assistant: ``openai``; a list without calls: ``agentrx``, read by name.)"""
    if not isinstance(data, list) or not data or not all(type(m) is dict and isinstance(m.get("role"), str)
                                                         for m in data):
        return False
    if {"messages", "traj", "task_id"} & data[0].keys():
        return False
    if any(isinstance(m.get("tool_responses"), list) for m in data):
        return True
    return any(makes_calls(m) for m in data) and all(speaker(m) for m in data if not makes_calls(m))


def makes_calls(m: dict[str, Any]) -> bool:
    return (isinstance(m.get("tool_calls"), list) and bool(m["tool_calls"])) or isinstance(m.get("function_call"), dict)


def speaker(m: dict[str, Any]) -> str | None:
    name = m.get("name")
    return name if isinstance(name, str) and name.strip() else None


def calls(m: dict[str, Any], i: int) -> list[dict[str, Any]]:
    """Message ``i``'s calls as chat tool calls (an id each: ``call_<i>_<k>`` where it has none)."""
    raw = m["tool_calls"] if isinstance(m.get("tool_calls"), list) else [{"function": m["function_call"]}]
    out = []
    for k, c in enumerate(raw):
        fn = obj(obj(c).get("function"))
        out.append({"id": text(obj(c).get("id")) or f"call_{i}_{k}", "type": "function",
                    "function": {"name": text(fn.get("name")) or "tool", "arguments": arguments(fn.get("arguments"))}})
    return out


def results(m: dict[str, Any]) -> list[tuple[str | None, str]] | None:
    """(call id or None, content) of each result message ``m`` holds; None when it is no result message."""
    if isinstance(m.get("tool_responses"), list) and m["tool_responses"]:
        return [(text(obj(r).get("tool_call_id")), _content(obj(r).get("content"))) for r in m["tool_responses"]]
    if m.get("role") in ("tool", "function"):
        return [(text(m.get("tool_call_id")), _content(m.get("content")))]
    return None


def speakers(data: list[dict[str, Any]]) -> set[str]:
    """The names of the agents that speak in ``data`` (not a result's, not a call's)."""
    return {s for m in data if results(m) is None and not makes_calls(m) and (s := speaker(m))}


def caller(data: list[dict[str, Any]], i: int, names: set[str]) -> str:
    """Who made the unnamed calls of message ``i`` (a two-agent chat; ``names``: ``speakers(data)``): the one speaker
    that is not the agent answering them, else the latest speaker before it that is not, else ``assistant``."""
    executor = next((speaker(data[j]) for j in range(i + 1, len(data)) if results(data[j]) is not None), None)
    others = names - {executor}
    if len(others) == 1:
        return next(iter(others))
    return next((s for j in range(i - 1, -1, -1) if results(data[j]) is None and not makes_calls(data[j])
                 and (s := speaker(data[j])) and s != executor), "assistant")


def _content(value: Any) -> str:
    if isinstance(value, str | list):
        return content_text(value)
    return "" if value is None else str(value)
