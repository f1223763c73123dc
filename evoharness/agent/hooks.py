"""Middleware hook contracts (functions defined in a harness's ``middleware/*.py``).

Every hook is called as ``hook(payload, ctx)`` (or ``hook(payload)`` if it takes one argument)
and returns None to change nothing. ``ctx`` is a dict: ``step`` (model calls so far),
``max_steps``, ``task`` (text), ``task_id``, ``policies``, ``tools`` (names), ``messages`` (a copy
of the conversation, OpenAI dicts: the hook's own list; editing it or its dicts changes neither the
conversation nor what another hook is handed) and ``scratch`` (a dict kept for the whole rollout).

- ``before_model(messages, ctx)`` -> a replacement list of messages to send (the recorded
  conversation is not changed).
- ``after_model(message, ctx)`` -> a replacement assistant message dict (e.g. repaired
  ``tool_calls[i].function.arguments``); it is what gets recorded and executed.
- ``before_tool(call, ctx)`` with ``call = {"id", "name", "arguments": dict}`` -> a replacement
  call dict, or a string: the call is blocked and the string is the tool result the model sees.
- ``after_tool(call, result, ctx)`` -> a replacement result string.
- ``on_finish(final_answer, ctx)`` (``final_answer`` None = the model ended without one) -> a
  string to push back: it is sent to the model as a user message and the rollout continues
  (an exit gate). At most ``MAX_FINISH_PUSHBACKS`` times per rollout.

A hook that raises makes the rollout a failed trajectory (``harness_error``), never a crash.
Every hook that changes something is recorded as a ``middleware_action`` event.
"""

from __future__ import annotations

import inspect
from typing import Any

from evoharness.agent.harness import Hook

MAX_FINISH_PUSHBACKS = 2


class HookCrash(Exception):
    def __init__(self, hook: Hook, error: BaseException) -> None:
        self.reason = f"middleware/{hook.module}: {hook.name} raised {type(error).__name__}: {error}"
        super().__init__(self.reason)


def call_hook(hook: Hook, *args: Any) -> Any:
    try:
        try:
            n = len(inspect.signature(hook.function).parameters)
        except (TypeError, ValueError):
            n = len(args)
        return hook.function(*args[: max(n, 1)])
    except Exception as e:  # noqa: BLE001 -- any middleware failure is the harness's failure
        raise HookCrash(hook, e) from e
