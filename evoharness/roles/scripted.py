"""`ScriptedChatModel`: a langchain chat model that returns given replies in order (tests, offline demos).

It records every prompt it was sent in ``calls`` so tests can snapshot exactly what a role asked.
A reply may be a string, a dict (sent as its JSON), an ``AIMessage``, or an exception to raise.
When the script runs out it raises a non-retryable `InfraError`.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from evoharness.errors import InfraError


class ScriptedChatModel(BaseChatModel):
    replies: list[Any] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    position: int = 0

    @property
    def _llm_type(self) -> str:
        return "evoharness-scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        if self.position >= len(self.replies):
            raise InfraError(f"scripted chat model: no reply left (had {len(self.replies)})", retryable=False)
        reply = self.replies[self.position]
        self.position += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, AIMessage):
            msg = reply
        elif isinstance(reply, str):
            msg = AIMessage(content=reply)
        else:
            msg = AIMessage(content=json.dumps(reply))
        return ChatResult(generations=[ChatGeneration(message=msg)])

    @property
    def remaining(self) -> int:
        return len(self.replies) - self.position


def render_messages(messages: list[BaseMessage]) -> str:
    """A prompt as plain text, one ``=== role ===`` block per message (what snapshots store)."""
    return "".join(f"=== {m.type} ===\n{m.content}\n" for m in messages)
