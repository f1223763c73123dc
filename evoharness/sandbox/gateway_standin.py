"""The offline agent models served host-side, behind the model gateway: the task's reference never
enters the sandbox.

The stand-in models (``standin:weak``/``standin:strong``) and the seeded scripted ones
(``scripted:weak``/``scripted:oracle``) are handed the task's reference solution (``bind_task``: the
environment's ground-truth calls) as what they would like to do. Built inside the sandbox, beside the
harness's code, that reference is one ``gc.get_objects()`` away from a middleware that wants to steer
the agent toward it. So with a sandbox the executor serves them here, in its own process: each rollout's
gateway token is bound (``bind``) to its task id, seed and rollout number; the rollout's first request
builds the model (``model_specs.agent_model``) and binds it to the task and the ground truth read from
the host's own copy of the environment. The sandboxed worker talks to it as to any OpenAI-compatible
endpoint (``gateway:SOCKET?rollout=TOKEN#standin:weak``) and receives only its replies.

The draws are the in-process ones: the model is keyed by the same ``(seed, task id, rollout)`` and sees
the same messages (OpenAI dicts converted with ``agent.models.to_messages``), so a rollout served here
gives the same trajectory as one run in-process. Usage is reported as 0 tokens, as in-process: a
stand-in has no tokenizer, and an estimate would be a number nothing measured.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from evoharness.envs import get_environment
from evoharness.model_specs import agent_model
from evoharness.sandbox.gateway_upstream import ModelUpstream, UpstreamReply, error_payload


@dataclass(frozen=True)
class Binding:
    """What one rollout token's model is for."""

    task_id: str
    seed: int
    rollout: int


class StandInUpstream(ModelUpstream):
    """Serves ``model_spec`` (an offline agent model) for each bound rollout token, host-side.

    ``env_spec`` is the run's environment, loaded here (lazily, once) to read each task and its
    ground-truth calls. A request on a token that was never bound is refused (403).
    """

    name = "standin"
    estimate_usage = False

    def __init__(self, model_spec: str, env_spec: str) -> None:
        super().__init__(self._unbound, model_spec)
        self.model_spec, self.env_spec = model_spec, env_spec
        self._env: Any = None
        self._env_lock = threading.Lock()
        self._bindings: dict[str, Binding] = {}

    def bind(self, rollout: str, task_id: str, seed: int, rollout_no: int) -> None:
        """Token ``rollout`` serves the model of task ``task_id``, seed ``seed``, rollout ``rollout_no``."""
        with self._lock:
            self._bindings[rollout] = Binding(task_id, seed, rollout_no)

    @staticmethod
    def _unbound() -> Any:
        raise RuntimeError("no model for an unbound rollout")

    def env(self) -> Any:
        with self._env_lock:
            if self._env is None:
                self._env = get_environment(self.env_spec)
            return self._env

    def model_for(self, rollout: str) -> Any:
        with self._lock:
            model = self._models.get(rollout)
            binding = self._bindings.get(rollout)
        if model is not None:
            return model
        if binding is None:
            raise LookupError("this rollout token is not bound to a task")
        model = agent_model(self.model_spec, binding.seed)
        env = self.env()
        with self._env_lock:
            task = env.get_task(binding.task_id)
            truth = env.ground_truth_calls(task)
        model.bind_task(task, truth, rollout=binding.rollout)
        with self._lock:
            return self._models.setdefault(rollout, model)

    def chat(self, body: dict[str, Any], rollout: str) -> UpstreamReply:
        with self._lock:
            bound = rollout in self._bindings
        if not bound:
            why = "this rollout token is not bound to a task"
            return UpstreamReply(403, error_payload(why, code="forbidden"), 0, why)
        return super().chat(body, rollout)

    def end(self, rollout: str) -> None:
        with self._lock:
            self._models.pop(rollout, None)
            self._seen.pop(rollout, None)
            self._bindings.pop(rollout, None)

    def close(self) -> None:
        with self._lock:
            self._models.clear()
            self._seen.clear()
            self._bindings.clear()
