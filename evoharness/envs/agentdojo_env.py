"""AgentDojo adapter: a suite's utility (user) tasks, its real tools and its real utility checks.

- Data: the suite's ``environment.yaml`` shipped inside the ``agentdojo`` package (loaded offline,
  with the injection vectors at their benign defaults -- no injection attacks, ever).
- Tools: the suite's own functions, run by AgentDojo's ``FunctionsRuntime``; schemas are the
  functions' pydantic parameter models; results are rendered as AgentDojo renders them (YAML).
- Scorer: the task's own ``utility_from_traces`` / ``utility(model_output, pre_env, post_env)``,
  1.0 if it passes, else 0.0 (``final_answer=None`` is scored as an empty model output).
- Split (fixed, documented): a task is held-out iff ``hash_split("agentdojo:<suite>", task_id)``
  puts it in the top 30% of sha256 space; all others are dev. For workspace v1.2.2 that is 40 tasks.
- Ground truth: ``task.ground_truth(pre_environment)`` -- read only by the scripted models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from evoharness.envs.base import TaskSpec, TaskTable, ToolCallSpec, ToolError, hash_split
from evoharness.errors import InfraError, InputError

DEFAULT_VERSION = "v1.2.2"


@dataclass
class AgentDojoState:
    """One rollout's world: the task environment, its pristine copy and the call trace."""

    env: Any
    pre_env: Any
    trace: list[Any] = field(default_factory=list)


def _task_number(task_id: str) -> int:
    m = re.search(r"(\d+)$", task_id)
    return int(m.group(1)) if m else 0


class AgentDojoEnv(TaskTable):
    def __init__(self, suite: str, version: str | None = None) -> None:
        self.suite_name = suite
        self.version = version or DEFAULT_VERSION
        self.name = f"agentdojo:{suite}"

    @cached_property
    def _suite(self) -> Any:
        try:
            from agentdojo.task_suite.load_suites import get_suites
        except ImportError as e:
            raise InfraError(f"AgentDojo is not installed (pip install agentdojo): {e}", retryable=False) from e

        suites = get_suites(self.version)
        if not suites:
            raise InputError("env", f"unknown AgentDojo benchmark version {self.version!r}")
        if self.suite_name not in suites:
            raise InputError("env", f"unknown AgentDojo suite {self.suite_name!r} ({', '.join(sorted(suites))})")
        return suites[self.suite_name]

    @cached_property
    def _default_env(self) -> Any:
        return self._suite.load_and_inject_default_environment({})

    @cached_property
    def _runtime(self) -> Any:
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

        self._function_call, self._result_text = FunctionCall, tool_result_to_str  # bound once, not at every call
        return FunctionsRuntime(self._suite.tools)

    @cached_property
    def _tasks(self) -> dict[str, TaskSpec]:
        out = {}
        for tid in sorted(self._suite.user_tasks, key=_task_number):
            t = self._suite.user_tasks[tid]
            out[tid] = TaskSpec(id=tid, prompt=t.PROMPT, split=hash_split(self.name, tid),
                                meta={"suite": self.suite_name, "version": self.version,
                                      "difficulty": getattr(getattr(t, "DIFFICULTY", None), "name", None)})
        return out

    def _user_task(self, task: TaskSpec) -> Any:
        return self._suite.user_tasks[task.id]

    def reset(self, task: TaskSpec) -> AgentDojoState:
        env = self._user_task(task).init_environment(self._default_env.model_copy(deep=True))
        return AgentDojoState(env=env, pre_env=env.model_copy(deep=True))

    def tools(self, task: TaskSpec) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": f.name, "description": f.description, "parameters": f.parameters.model_json_schema()}}
            for f in self._suite.tools]

    def call_tool(self, state: AgentDojoState, name: str, args: dict[str, Any]) -> str:
        if name not in self._runtime.functions:
            raise ToolError("unknown_tool", f"The requested function `{name}` is not available.")
        state.trace.append(self._function_call(function=name, args=dict(args)))
        result, error = self._runtime.run_function(state.env, name, args)
        if error is not None:
            kind = "invalid_arguments" if error.startswith("ValidationError") else "tool_error"
            raise ToolError(kind, error)
        return self._result_text(result)

    def score(self, task: TaskSpec, state: AgentDojoState, final_answer: str | None,
              messages: list[dict[str, Any]]) -> float:
        ut = self._user_task(task)
        text = final_answer or ""
        try:
            ok = ut.utility_from_traces(text, state.pre_env, state.env, state.trace)
            if ok is None:
                ok = ut.utility(text, state.pre_env, state.env)
        except Exception:  # noqa: BLE001 -- a utility check that trips over a garbled world scores 0
            return 0.0
        return 1.0 if ok else 0.0

    def ground_truth_calls(self, task: TaskSpec) -> list[ToolCallSpec]:
        pre = self._user_task(task).init_environment(self._default_env.model_copy(deep=True))
        return [ToolCallSpec(name=c.function, args=dict(c.args)) for c in self._user_task(task).ground_truth(pre)]


def from_spec(spec: str) -> AgentDojoEnv:
    """``agentdojo:<suite>[@<version>]``."""
    suite, _, version = spec.removeprefix("agentdojo").removeprefix(":").partition("@")
    if not suite:
        raise InputError("env", f"{spec!r}: name a suite, e.g. agentdojo:workspace")
    return AgentDojoEnv(suite, version or None)
