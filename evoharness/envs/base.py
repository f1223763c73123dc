"""The `Environment` protocol: tasks, their tools, a fresh per-rollout state, and a scorer.

Contract (every environment, real or synthetic):

- ``name`` / ``version`` identify the environment (``"agentdojo:workspace"``, ``"v1.2.2"``).
- ``list_tasks(split)`` returns the tasks of a split (``"dev"``, ``"heldout"`` or ``"all"``),
  in a stable order; the split is fixed and documented by each environment.
- ``get_task(task_id)`` returns one task or raises ``InputError``.
- ``reset(task)`` returns a FRESH state for one rollout; no state is shared between rollouts.
- ``tools(task)`` returns OpenAI tool schemas (``{"type": "function", "function": {...}}``).
- ``call_tool(state, name, args)`` runs a tool on the state and returns its result as text, or
  raises ``ToolError`` (``kind`` = ``unknown_tool`` | ``invalid_arguments`` | ``tool_error``).
- ``score(task, state, final_answer, messages)`` returns a float in 0..1 (``final_answer`` is
  None when the agent did not deliver).
- ``ground_truth_calls(task)`` returns the reference tool calls that solve the task. Only the
  scripted models read it (they are stand-ins for a model, not a model).
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from pydantic import BaseModel, Field

from evoharness.errors import InputError


class ToolError(Exception):
    """A tool call failed. ``kind``: ``unknown_tool`` | ``invalid_arguments`` | ``tool_error``."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")


class ToolCallSpec(BaseModel):
    """One reference tool call: a tool name and its arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(BaseModel):
    id: str
    prompt: str = Field(description="the task text given to the agent")
    split: str = Field(description="dev | heldout")
    meta: dict[str, Any] = Field(default_factory=dict)


class Environment(Protocol):
    name: str
    version: str

    def list_tasks(self, split: str = "dev") -> list[TaskSpec]: ...

    def get_task(self, task_id: str) -> TaskSpec: ...

    def reset(self, task: TaskSpec) -> Any: ...

    def tools(self, task: TaskSpec) -> list[dict[str, Any]]: ...

    def call_tool(self, state: Any, name: str, args: dict[str, Any]) -> str: ...

    def score(self, task: TaskSpec, state: Any, final_answer: str | None,
              messages: list[dict[str, Any]]) -> float: ...

    def ground_truth_calls(self, task: TaskSpec) -> list[ToolCallSpec]: ...


class TaskTable:
    """``list_tasks`` and ``get_task`` over ``self._tasks`` (id -> TaskSpec), for the environments."""

    name: str
    _tasks: dict[str, TaskSpec]

    def list_tasks(self, split: str = "dev") -> list[TaskSpec]:
        return select_split(list(self._tasks.values()), split)

    def get_task(self, task_id: str) -> TaskSpec:
        if task_id not in self._tasks:
            raise InputError(self.name, f"unknown task {task_id!r}")
        return self._tasks[task_id]


def hash_split(namespace: str, task_id: str, heldout_share: float = 0.3) -> str:
    """The fixed split rule: held-out iff ``sha256(namespace:task_id)`` falls in the top ``heldout_share``."""
    digest = hashlib.sha256(f"{namespace}:{task_id}".encode()).hexdigest()
    return "heldout" if int(digest[:8], 16) / 0x1_0000_0000 >= 1.0 - heldout_share else "dev"


def select_split(tasks: list[TaskSpec], split: str) -> list[TaskSpec]:
    if split in ("all", "any", "*"):
        return list(tasks)
    if split not in ("dev", "heldout"):
        raise InputError("split", f"unknown split {split!r} (dev, heldout or all)")
    return [t for t in tasks if t.split == split]


def rank_split(namespace: str, task_ids: list[str], heldout_share: float = 0.3) -> dict[str, str]:
    """Exactly ``round(share * n)`` held-out tasks: those with the highest ``sha256(namespace:id)``."""
    ranked = sorted(task_ids, key=lambda t: hashlib.sha256(f"{namespace}:{t}".encode()).hexdigest())
    n_held = round(heldout_share * len(ranked))
    held = set(ranked[len(ranked) - n_held:])
    return {t: "heldout" if t in held else "dev" for t in task_ids}
