"""The agent's chat messages: the package's own small types, what ``ChatModel.invoke`` is sent and returns.

They carry the attribute names langchain-core's messages have (``content``, ``type``, ``tool_calls`` with
parsed ``args`` dicts, ``invalid_tool_calls`` with the raw ``args`` string, ``tool_call_id``,
``usage_metadata``), so code written against those reads them unchanged, but importing them costs nothing: a
sandboxed worker serving an offline model never imports LangChain (its ``langchain_core.messages`` alone is
~24 MiB and ~400 modules, which every forked rollout child of a warm worker would carry). LangChain's own
messages are made only where a LangChain chat model is called (``agent.models.LangChainChatModel``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(eq=True)
class Message:
    content: Any = ""  # a str (a LangChain model's reply may hold a list of content blocks)
    type: ClassVar[str] = ""

    def __deepcopy__(self, memo: dict[int, Any]) -> Message:
        """A deep copy (strings and None shared: they cannot change), without ``copy``'s generic reduce."""
        new = object.__new__(type(self))
        for k, v in self.__dict__.items():
            new.__dict__[k] = v if v is None or type(v) is str else copy.deepcopy(v, memo)
        return new


@dataclass(eq=True)
class SystemMessage(Message):
    type: ClassVar[str] = "system"


@dataclass(eq=True)
class HumanMessage(Message):
    type: ClassVar[str] = "human"


@dataclass(eq=True)
class ToolMessage(Message):
    tool_call_id: str = ""
    type: ClassVar[str] = "tool"


@dataclass(eq=True)
class AIMessage(Message):
    # {"name", "args": dict, "id", "type": "tool_call"}
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # {"name", "args": raw str, "id", "error", "type": "invalid_tool_call"}
    invalid_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # {"input_tokens", "output_tokens", "total_tokens"} when the model reports usage
    usage_metadata: dict[str, int] | None = None
    type: ClassVar[str] = "ai"


BaseMessage = Message  # the name langchain-core gives the common base
_MESSAGES = (Message, SystemMessage, HumanMessage, ToolMessage, AIMessage)
_ATOMIC = (str, int, float, bool, type(None))


def plain_copy(value: Any) -> Any:
    """A deep copy of ``value`` made to be compared with later (``==``), not handed to harness code: dicts, lists and
    the package's messages are rebuilt and strings, numbers and None shared in Python code of its own (~5x faster than
    ``copy.deepcopy`` on a conversation: no memo, no reduce protocol; the loop and the gateway client copy every new
    message); anything else (another type, a subclass) goes to ``copy.deepcopy``. What it does not keep: two
    references to one list or dict inside ``value`` become two copies (equal, so every comparison gives the same);
    a ``value`` that contains itself is copied by ``copy.deepcopy``."""
    try:
        return _plain(value)
    except RecursionError:
        return copy.deepcopy(value)


def _plain(x: Any) -> Any:
    t = type(x)
    if t is dict:
        return {k: _plain(v) for k, v in x.items()}
    if t is list:
        return [_plain(v) for v in x]
    if t in _ATOMIC:
        return x
    if t in _MESSAGES:
        new = object.__new__(t)
        new.__dict__.update({k: _plain(v) for k, v in x.__dict__.items()})
        return new
    return copy.deepcopy(x)

# ``copy``/``pickle`` cache each class's slot names in the class's own ``__dict__`` on first use
# (``copyreg._slotnames``); set here, so copying a message in a warm worker's batch child changes no attribute of
# a package class (the child's check after each rollout would end the child over it).
for _cls in (Message, SystemMessage, HumanMessage, ToolMessage, AIMessage):
    _cls.__slotnames__ = []  # type: ignore[attr-defined]
del _cls

__all__ = ["AIMessage", "BaseMessage", "HumanMessage", "Message", "SystemMessage", "ToolMessage"]
