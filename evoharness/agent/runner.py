"""Entry points: ``run_rollout`` (in-process) and ``make_model``.

``run_rollout`` never raises for an agent or harness failure: a harness that does not load, a
template error, a crashing hook or a failing model call all come back as a failed Trajectory
(``termination=error``, an event saying why, score from the environment's scorer on what the
agent left behind). It raises ``InputError`` only for unusable input (unknown env, task or model).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from evoharness.agent.harness import HarnessError, load_harness
from evoharness.agent.hooks import HookCrash
from evoharness.agent.loop import Agent, RolloutResult
from evoharness.envs import get_environment
from evoharness.logging import get_logger
from evoharness.model_specs import OFFLINE_PREFIXES, agent_model
from evoharness.sandbox.api import rollout_id
from evoharness.sandbox.scoring import Recorder
from evoharness.traces.endings import provider_exception
from evoharness.traces.models import EventType, Split, Termination, Trajectory

log = get_logger(__name__)


def make_model(model_spec: str, seed: int) -> Any:
    """The agent's ChatModel for ``model_spec`` (the grammar and schemes: `evoharness.model_specs`).
    No request is made."""
    return agent_model(model_spec, seed)


def run_rollout(harness_dir: Path, env_spec: str, task_id: str, model_spec: str, seed: int,
                rollout: int = 0, split: str = "dev", harness_commit: str | None = None,
                model: Any = None, model_via: str | None = None, env_via: str | None = None,
                env_calls: list | None = None, log_failures: bool = True) -> Trajectory:
    """Run one rollout of the harness at ``harness_dir`` and return its Trajectory.

    ``model`` (optional) overrides ``make_model(model_spec, seed)``, e.g. a ``ScriptedModel``.
    ``model_via`` (optional): the spec the model is actually reached through (the executor's
    ``gateway:...`` spec); ``model_spec`` still names the model in the trajectory and its id.
    ``env_via`` (optional): likewise for the environment (``env_spec`` with its simulated user's model
    reached through the gateway); ``env_spec`` still names it in the trajectory.
    ``env_calls`` (optional): a list that receives an ``EnvCall`` per call made on the environment (the
    worker sends them to the host, which replays them to score: ``sandbox/scoring.py``).
    ``log_failures``: log a failed rollout (``rollout_failed``) as well as recording it in the trajectory; the
    sandboxed worker passes False (the host sees the trajectory's event; logging would import structlog into the
    worker, and in a warm worker's batch child that new module would end the child).
    """
    env = Recorder(get_environment(env_via or env_spec))
    task = env.get_task(task_id)
    chat = model if model is not None else make_model(model_via or model_spec, seed)
    if hasattr(chat, "bind_task"):  # scripted stand-ins are handed the reference solution
        chat.bind_task(task, env.ground_truth_calls(task), rollout=rollout)
    r = RolloutResult()
    start = time.monotonic()
    failure: tuple[str, str] | None = None
    error: BaseException | None = None
    try:
        harness = load_harness(harness_dir)
        Agent(harness, env, chat).run(task, r)
    except (HarnessError, HookCrash) as e:
        failure = (EventType.harness_error, e.reason)
    except Exception as e:  # noqa: BLE001 -- model/endpoint or agent bug: still a trajectory, with the reason
        failure, error = ("model_error", f"{type(e).__name__}: {e}"), e
    if failure is not None:
        kind, reason = failure
        if log_failures:
            log.info("rollout_failed", task_id=task_id, seed=seed, kind=kind, reason=reason[:300])
        r.event(kind, reason)
        if kind == "model_error" and infrastructure_fault(error):
            r.event("infra_error", reason)  # class E (``environment.InfraErrorDetector``): neither lever
        r.final_answer, r.termination = None, Termination.error
        r.usage.wall_seconds = round(time.monotonic() - start, 4)
    score = 0.0
    try:  # a harness that failed before the first step leaves a fresh state: scored as such (as the host does)
        state = r.state if r.state is not None else env.reset(task)
        score = float(env.score(task, state, r.final_answer, r.messages))
    except Exception as e:  # noqa: BLE001 -- scorer failure: record, score 0
        r.event(EventType.tool_infra_error, f"scorer raised {type(e).__name__}: {e}")
    if env_calls is not None:
        env_calls.extend(env.calls)
    try:
        split_v = Split(split)
    except ValueError:
        split_v = Split.unknown
    return Trajectory(
        id=rollout_id(task_id, harness_commit, split, seed), task_id=task_id, split=split_v,
        harness_commit=harness_commit, model=model_spec, rollout=rollout, task=task.prompt,
        messages=r.messages, events=r.events, final_answer=r.final_answer, score=min(max(score, 0.0), 1.0),
        termination=r.termination, usage=r.usage,
        meta={"env": env_spec, "env_version": env.version, "seed": seed, "task_split": task.split,
              "agent": "evoharness.agent",
              "model_kind": "scripted stand-in (not a real model)" if model_spec.startswith(OFFLINE_PREFIXES)
              else "chat"},
    )


# the gateway's reply that the upstream failed (``GatewayChatModel``: "gateway HTTP <status>: ..."): a timeout, a rate
# limit, a server error -- after the gateway's own retries
_UPSTREAM_FAILED = re.compile(r"gateway HTTP (?:408|429|5\d\d)\b")


def infrastructure_fault(e: BaseException | None) -> bool:
    """Whether the exception that ended a rollout is the infrastructure's, not the agent's or its harness's: an
    environment's own (``environment_fault``, e.g. tau2's simulated customer whose model failed), the model provider's
    (an OpenAI / LiteLLM exception by name: ``endings.PROVIDER_EXCEPTIONS``), the connection to the model
    (``ConnectionError``, ``TimeoutError``) or the gateway's answer that the upstream failed (HTTP 408, 429, 5xx). A
    4xx the request earned (too large, malformed) and any other exception are not."""
    if e is None:
        return False
    if getattr(e, "environment_fault", False) is True or isinstance(e, ConnectionError | TimeoutError):
        return True
    return provider_exception(type(e).__name__) or (
        type(e).__name__ == "GatewayError" and _UPSTREAM_FAILED.match(str(e)) is not None)
