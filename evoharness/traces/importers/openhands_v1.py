"""OpenHands' V1 agent SDK events (``openhands/sdk/event``) in an evaluation ``output.jsonl`` of OpenHands/benchmarks.

The benchmarks' ``EvalOutput`` (``benchmarks/utils/models.py``) is the classic record -- ``instance_id``,
``test_result.git_patch``, ``instruction``, ``metadata`` (``llm.model``), ``metrics``, ``error`` -- but its ``history``
holds the SDK's events, each a pydantic model dumped with its class in ``kind`` and ``id``, ``timestamp``, ``source``
(agent / user / environment). :mod:`openhands` reads the record; this module turns those events into the chat the
agent's LLM saw (``LLMConvertibleEvent.to_llm_message``, ``events_to_messages``):

- ``SystemPromptEvent``: the system message (``system_prompt.text``, then ``dynamic_context.text``).
- ``MessageEvent``: ``llm_message`` (``role``, ``content`` text parts; ``extended_content`` after them) as the user's
  turn (the first one is the task) or the agent's.
- ``ActionEvent``: an assistant tool call named ``tool_name`` (``terminal``, ``file_editor``, ``finish``, ``think``,
  ...; the SDK before 1.0: ``execute_bash``, ``str_replace_editor``), id ``tool_call_id``, its arguments as the model
  wrote them (``tool_call.arguments``), else the ``action``'s fields; ``thought`` the text. Actions of one
  ``llm_response_id`` are one assistant message.
- The model's ``reasoning_content`` (an ``ActionEvent``'s, a ``MessageEvent``'s ``llm_message``'s) is kept in
  ``meta.reasoning`` (``{step, text}`` per assistant turn), never in the turn's text: it is the model's thinking,
  not what the agent said, and the Trajectory has no field of its own for it.
- ``ObservationEvent``: the ``tool`` result of ``tool_call_id``; ``observation.content`` (text parts, or the SDK
  before 1.0's ``output``), a command's with its ``metadata`` prefix and suffix and the exit-code line
  (``TerminalObservation.to_llm_content``). ``is_error`` (or the early ``error``) is also an event there: the editor's
  refusal a ``tool_error`` (its text quotes the agent's ``old_str``), another tool's typed by its text.
- ``AgentErrorEvent`` (a call the SDK could not run: an unknown tool, arguments that do not validate): the call's
  result, ``error``, and an event; ``UserRejectObservation``: the call's result, ``Action rejected: <reason>``.
- ``CondensationSummaryEvent``: a user message (the summary the LLM reads). ``ConversationErrorEvent``: an event;
  ``ConversationIterationLimitEvent``: the iteration limit (a ``step_budget`` run when the record has no ``error``).
  The rest (``PauseEvent``, ``ConversationStateUpdateEvent``, ``Condensation``, ``CondensationRequest``,
  ``TokenEvent``, ...; a kind this reader does not know) is left out, counted in ``meta.skipped_events``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from evoharness.traces.importers._shape import arguments, arr, keep_reasoning, obj
from evoharness.traces.models import Event
from evoharness.traces.patterns import classify_tool_error

# the SDK's editors: a refusal quotes the agent's own text back (an old_str naming a timeout is no infrastructure fault)
EDITORS = frozenset({"file_editor", "str_replace_editor", "planning_file_editor", "edit", "write_file", "read_file"})
_ACTION_BOOKKEEPING = ("kind", "security_risk", "summary")


def is_v1(history: Any) -> bool:
    """Whether ``history`` holds the V1 SDK's events: its first event is an object with a ``kind`` (the classic
    events carry ``action`` / ``observation`` instead)."""
    first = history[0] if isinstance(history, list) and history else None
    return isinstance(first, dict) and isinstance(first.get("kind"), str) and not any(
        isinstance(first.get(k), str) for k in ("action", "observation"))


def events(history: list) -> Iterator[tuple[int, dict]]:
    """(history index, event) of each V1 event; anything else is a ``ValueError`` naming it."""
    for i, e in enumerate(history):
        if not isinstance(e, dict) or not isinstance(e.get("kind"), str):
            raise ValueError(f"history[{i}] is no OpenHands V1 SDK event (an object with a 'kind'), though "
                             f"history[0] is: a history mixes the classic events and the V1 SDK's")
        yield i, e


class ConversationState:
    """What both OpenHands readers build, one event at a time: the chat ``messages`` and each one's event index
    (``source_index``), ``events``, the ``task``, the counts of ``steps`` and ``skipped`` events, whether the agent
    ``finished``; and while reading, the calls not answered yet and the model response of the last assistant
    message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.source_index: list[int] = []
        self.events: list[Event] = []
        self.task: str | None = None
        self.steps = 0
        self.skipped = 0
        self.finished = False
        self.iteration_limit: str | None = None  # the V1 SDK's ConversationIterationLimitEvent's detail only
        self.pending: dict[str, str] = {}  # call id -> tool name, calls not answered yet
        self.response: Any = None  # the model response id of the last assistant message (None: none)
        self.reasoning: list[dict[str, Any]] = []  # {step, text}: the model's reasoning_content of an assistant turn

    def _append(self, i: int, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.source_index.append(i)
        if message["role"] != "tool":
            self.response = None

    def _call(self, i: int, call: dict[str, Any], response: Any, thought: str, reasoning: Any = None) -> None:
        """A tool call of event ``i``: into the last assistant turn when the same model response made it (its results
        follow the turn), else a turn of its own with ``thought`` as its text; ``reasoning`` the model's
        ``reasoning_content`` for that turn."""
        self.pending[call["id"]] = call["function"]["name"]
        if response is not None and response == self.response:
            step = next(k for k in range(len(self.messages) - 1, -1, -1) if self.messages[k]["role"] == "assistant")
            self.messages[step]["tool_calls"].append(call)
            self._reason(step, reasoning)
            return
        self.steps += 1
        self._append(i, {"role": "assistant", "content": thought, "tool_calls": [call]})
        self.response = response
        self._reason(len(self.messages) - 1, reasoning)

    def _reason(self, step: int, text: Any) -> None:
        keep_reasoning(self.reasoning, step, text)


class Conversation(ConversationState):
    """The chat messages the V1 events make, built one event at a time."""

    def add(self, i: int, e: dict) -> None:
        kind = e["kind"]
        handler = _HANDLERS.get(kind)
        if handler is None:  # bookkeeping (PauseEvent, Condensation, ...) or a kind not known here
            self.skipped += 1
        else:
            handler(self, i, e)

    def _system(self, i: int, e: dict) -> None:
        parts = [_text(obj(e.get("system_prompt")).get("text")), _text(obj(e.get("dynamic_context")).get("text"))]
        self._append(i, {"role": "system", "content": "\n".join(p for p in parts if p)})

    def _message(self, i: int, e: dict) -> None:
        msg = obj(e.get("llm_message"))
        said = content_text(msg.get("content"))
        extended = content_text(e.get("extended_content"))
        content = "\n".join(p for p in (said, extended) if p)
        if msg.get("role") == "assistant" or (msg.get("role") is None and e.get("source") == "agent"):
            self.steps += 1
            self._append(i, {"role": "assistant", "content": content})
            self._reason(len(self.messages) - 1, msg.get("reasoning_content") or e.get("reasoning_content"))
            return
        if self.task is None and e.get("source") == "user":
            self.task = said
        self._append(i, {"role": "user", "content": content})

    def _action(self, i: int, e: dict) -> None:
        tool_call = obj(e.get("tool_call"))
        action = obj(e.get("action"))
        call_id = _name(e.get("tool_call_id")) or _name(tool_call.get("id")) or f"call_{i}"
        name = _name(e.get("tool_name")) or _name(tool_call.get("name")) or _tool_of(action.get("kind"))
        args = tool_call.get("arguments")
        if not isinstance(args, str):
            args = arguments({k: v for k, v in action.items() if k not in _ACTION_BOOKKEEPING})
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        self.finished = self.finished or name == "finish" or action.get("kind") == "FinishAction"
        response = e.get("llm_response_id") if _name(e.get("llm_response_id")) else None
        self._call(i, call, response, content_text(e.get("thought")), e.get("reasoning_content"))

    def _observation(self, i: int, e: dict) -> None:
        ob = obj(e.get("observation"))
        content = observation_text(ob)
        failed = ob.get("is_error") is True or ob.get("error") is True or bool(_name(ob.get("error")))
        name = self._result(i, e, content)
        if failed:
            editor = name in EDITORS or "Editor" in _text(ob.get("kind"))
            self.events.append(Event(type="tool_error" if editor else classify_tool_error(content),
                                     step=len(self.messages) - 1, detail=content[:500]))

    def _agent_error(self, i: int, e: dict) -> None:
        error = _text(e.get("error"))
        self._result(i, e, error)
        self.events.append(Event(type=classify_tool_error(error), step=len(self.messages) - 1, detail=error[:500]))

    def _rejected(self, i: int, e: dict) -> None:
        self._result(i, e, f"Action rejected: {_text(e.get('rejection_reason')) or 'User rejected the action'}")

    def _result(self, i: int, e: dict, content: str) -> str | None:
        """The tool message answering the call ``e`` names (a user message when it answers none); its tool."""
        call_id = _name(e.get("tool_call_id"))
        if call_id not in self.pending:
            call_id = next(iter(self.pending)) if len(self.pending) == 1 and call_id is None else None
        if call_id is None:
            self._append(i, {"role": "user", "content": content})
            return _name(e.get("tool_name"))
        name = self.pending.pop(call_id)
        response = self.response
        self._append(i, {"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
        self.response = response  # a result between two calls of one response keeps them one turn
        return name

    def _summary(self, i: int, e: dict) -> None:
        self._append(i, {"role": "user", "content": _text(e.get("summary"))})

    def _conversation_error(self, i: int, e: dict) -> None:
        detail = ": ".join(p for p in (_text(e.get("code")), _text(e.get("detail"))) if p)
        self.skipped += 1
        self.events.append(Event(type=classify_tool_error(detail), step=max(len(self.messages) - 1, 0),
                                 detail=detail[:500]))

    def _iteration_limit(self, i: int, e: dict) -> None:
        self.skipped += 1
        self.iteration_limit = _text(e.get("detail")) or "maximum iterations reached"


_HANDLERS = {"SystemPromptEvent": Conversation._system, "MessageEvent": Conversation._message,
             "ActionEvent": Conversation._action, "ObservationEvent": Conversation._observation,
             "AgentErrorEvent": Conversation._agent_error, "UserRejectObservation": Conversation._rejected,
             "CondensationSummaryEvent": Conversation._summary,
             "ConversationErrorEvent": Conversation._conversation_error,
             "ConversationIterationLimitEvent": Conversation._iteration_limit}


def content_text(value: Any) -> str:
    """The text of an SDK content list (``TextContent`` parts, ``{"type": "text", "text": ...}``; an image is left
    out) or of a plain string, parts joined by new lines."""
    if isinstance(value, str):
        return value
    return "\n".join(p["text"] for p in arr(value) if isinstance(p, dict) and isinstance(p.get("text"), str))


def observation_text(ob: dict) -> str:
    """What the agent read of an observation: ``content`` (the SDK before 1.0: ``output``, and an editor's ``error``
    text when it has no output); a command's as ``TerminalObservation.to_llm_content`` gives it (prefix, output,
    suffix, the working directory and interpreter lines, ``[Command finished with exit code N]``)."""
    text = content_text(ob.get("content")) or _text(ob.get("output")) or _name(ob.get("error")) or ""
    md = obj(ob.get("metadata"))
    if "exit_code" not in ob and "exit_code" not in md:
        return text
    text = f"{_text(md.get('prefix'))}{text}{_text(md.get('suffix'))}"
    if _text(md.get("working_dir")):
        text += f"\n[Current working directory: {md['working_dir']}]"
    if _text(md.get("py_interpreter_path")):
        text += f"\n[Python interpreter: {md['py_interpreter_path']}]"
    code = md.get("exit_code", ob.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and code != -1:
        text += f"\n[Command finished with exit code {code}]"
    return text


def _tool_of(kind: Any) -> str:
    """A tool's name from its action's class when the event names none (``TerminalAction`` -> ``terminal``)."""
    if not isinstance(kind, str) or not kind:
        return "unknown"
    base = kind.removesuffix("Action") or kind
    return "".join(f"_{c.lower()}" if c.isupper() and k else c.lower() for k, c in enumerate(base))


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
