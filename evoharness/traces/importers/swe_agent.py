"""SWE-agent ``<instance_id>.traj`` files, joined with SWE-bench results.

A ``.traj`` (SWE-agent/SWE-agent ``agent/agents.py`` ``get_trajectory_data``) is one JSON object:
``trajectory`` (per step: ``response``, ``thought``, ``action``, ``observation``, ``state``, ``query``, ...),
``history`` (the messages the model saw: ``role``, ``content`` as text or parts, ``agent``, ``message_type``
system_prompt / observation / action / demonstration, ``tool_calls`` and ``tool_call_ids`` with function
calling, ``is_demo`` for demonstrations), ``info`` (``exit_status``, ``submission``, ``model_stats``,
``swe_agent_version``, ...), ``replay_config`` (a JSON string of the run's config) and ``environment``.

Conversation: ``history`` without its demonstrations; an assistant message's ``tool_calls`` are kept, and one
without them whose ``action`` is a command gets that command as one ``bash`` tool call; a ``tool`` message
(``tool_call_ids``) or the next ``observation`` user message is its result. A file with no ``history`` (older
SWE-agent) is rebuilt from ``trajectory``: the first query's system and user messages, then per step the
response with its action as a call and the observation as its result. Steps with no ``query`` (SWE-agent 0.x
steps are ``action, observation, response, state, thought``; early 1.x steps add ``execution_time``) hold no
task: the task message is only in ``history``. Such a file's task is then the problem statement SWE-agent keeps
elsewhere -- ``replay_config``'s ``problem_statement.text`` (1.x), the ``<instance_id>.config.yaml`` run-batch
writes beside the ``.traj`` (1.x: the same config), or a ``text://`` ``environment.data_path`` in the ``args.yaml``
of the 0.x run directory -- as the first user message (``meta.task_from`` names where it was read). ``info`` and
``environment`` (the environment's name) never hold it, nor does a step's observation; a GitHub issue, a
Hugging Face data set or an instances file named there is not fetched or read. With none, the run is imported
without a task message and ``meta.import_warnings`` says so (one ``warning:`` line per directory).

A retry agent's file (``attempts``) is read from the attempt its retry loop chose (merged at the top level,
``info.best_attempt_idx``), else from its latest attempt (``meta.attempts`` says how many there were).

Steps: our step i is ``history[meta.source_index[i]]`` (``source_index`` absent when every history message
is kept, i.e. no demonstration; ``meta.source = "trajectory"`` when rebuilt from the steps, step 0/1 the first
query's system/user message, or step 0 the task read from elsewhere, then two per step).

Termination from ``info.exit_status``: ``submitted`` (also ``submitted (exit_cost)`` ...) delivered the
``submission``; ``exit_cost`` / ``exit_api_calls`` / ``exit_step_limit`` the budget; ``exit_context`` the
context window; ``exit_total_execution_time`` / ``exit_command_timeout`` a timeout; ``exit_format`` (too many
malformed replies) an error with a ``format_rejected`` event; other ``exit_*`` an error. An observation that is one
of SWE-agent's refusals (``REFUSAL``: the edit tools' linter refusing an edit that breaks the file's syntax, "Your
changes have NOT been applied"; a bash command that failed ``bash -n`` and was NOT executed; a blocked interactive
command) is a ``tool_error`` event at it: nothing ran, as with a tool error. Score: SWE-bench's
verdict, found as for mini-swe-agent (``mini_swe.find_results``: ``logs/<id>/report.json``, the harness's
logs and reports, sb-cli reports, SWE-bench/experiments' ``results/results.json``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.traces import jsontext
from evoharness.traces.endings import infra_event
from evoharness.traces.importers import dirscan, mini_swe
from evoharness.traces.importers._shape import actions_from_text, arguments, arr, content_text, obj
from evoharness.traces.models import Event, Termination, Trajectory, Usage

SUFFIXES = (".traj.json", ".traj", ".json")

_BUDGET = ("exit_cost", "exit_api_calls", "exit_step_limit", "exit_total_cost")
_TIMEOUT = ("exit_total_execution_time", "exit_command_timeout", "exit_timeout")
# the model API's retries ran out (``RetryError``), the sandbox runtime failed (``SwerexException``): class E
_INFRA = ("exit_api", "exit_environment_error")
# SWE-agent's refusals (its edit tools' _LINT_ERROR_TEMPLATE, the agent's shell_check_error_template and
# blocklist_error_template): the action did not run
REFUSAL = re.compile(r"\s*(?:Your proposed edit has introduced new syntax error\(s\)|"
                     r"Your bash command contained syntax errors and was NOT executed|"
                     r"Interactive operation '[^'\n]{0,200}' is not supported by this environment)")


def matches(rec: dict) -> bool:
    return (isinstance(rec.get("trajectory"), list) and isinstance(rec.get("info"), dict)
            and ("history" in rec or "replay_config" in rec or "environment" in rec)) or (
        isinstance(rec.get("history"), list) and isinstance(rec.get("info"), dict)  # no steps saved, only history
        and ("replay_config" in rec or "environment" in rec or _swe_history(rec["history"]))) or (
        isinstance(rec.get("attempts"), list) and bool(rec["attempts"]) and isinstance(rec["attempts"][0], dict)
        and isinstance(rec["attempts"][0].get("trajectory"), list))  # a retry agent's file


def _swe_history(history: list) -> bool:
    """Whether ``history`` reads as SWE-agent's: its messages carry ``message_type`` (system_prompt, observation,
    action, ...) beside ``role`` and ``agent``."""
    return any(isinstance(m, dict) and isinstance(m.get("role"), str) and "message_type" in m and "agent" in m
               for m in history[:3])


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def instance_of(path: Path) -> str:
    return next((path.name.removesuffix(s) for s in SUFFIXES if path.name.endswith(s)), path.stem)


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, dict):
        raise ValueError("a SWE-agent .traj must be a JSON object")
    info = obj(data.get("info"))
    meta: dict[str, Any] = {"source_format": "swe-agent"}
    run = data
    if isinstance(data.get("attempts"), list) and data["attempts"]:
        meta["attempts"] = len(data["attempts"])
        if not isinstance(data.get("history"), list) and not isinstance(data.get("trajectory"), list):
            # the chosen attempt is merged at the top level once the retry loop chose; before, the latest one
            best = info.get("best_attempt_idx")
            chosen = best if isinstance(best, int) and not isinstance(best, bool) and 0 <= best < len(
                data["attempts"]) else len(data["attempts"]) - 1
            run = obj(data["attempts"][chosen])
            info = {**obj(run.get("info")), **info}
    history = run.get("history")
    if isinstance(history, list) and history:
        messages, source_index, task, steps = _from_history(history)
        if len(source_index) != len(history):
            meta["source_index"] = source_index
        # a reply with tool calls of its own (a function-calling run): its calls were not read from text
        if not any(isinstance(m, dict) and m.get("role") == "assistant" and arr(m.get("tool_calls"))
                   for m in history):
            meta.update(actions_from_text(messages))
    elif isinstance(run.get("trajectory"), list):
        messages, task, steps = _from_steps(run["trajectory"])
        meta["source"] = "trajectory"
        meta.update(actions_from_text(messages))  # a function-calling run's response lacks its command
        if task is None:
            task, meta["task_from"] = problem_statement(path, run.get("replay_config") or data.get("replay_config"))
            if task is not None:
                lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
                messages.insert(lead, {"role": "user", "content": task})
    else:
        raise ValueError("a SWE-agent .traj needs a 'history' or 'trajectory' list")

    instance_id = mini_swe.instance_id_of(data.get("instance_id"), instance_of(path))
    exit_status = str(info.get("exit_status") or "")
    events = [Event(type="tool_error", step=i, detail=m["content"][:500]) for i, m in enumerate(messages)
              if m["role"] == "tool" and REFUSAL.match(m["content"][:300])]
    termination, ended = ending(exit_status, max(len(messages) - 1, 0))
    events += ended
    submission = info.get("submission")
    final_answer = (submission if isinstance(submission, str) else "") if termination == Termination.delivered else None

    model = _model(data)
    stats = obj(info.get("model_stats"))
    run_id = next((r for r in (data.get("run_id"), info.get("run_id")) if isinstance(r, str) and r), None)
    score, report, why, broken = mini_swe._score(path, instance_id, model, run_id)
    meta.update({"exit_status": exit_status, "swe_agent_version": info.get("swe_agent_version"),
                 "api_calls": stats.get("api_calls"), "cost": stats.get("instance_cost"),
                 **mini_swe.result_meta(report, why, broken)})
    if meta.get("task_from", "") is None:
        del meta["task_from"]
        meta["import_warnings"] = [*meta.get("import_warnings", ()), {
            "kind": "swe_agent_task", "file": str(path.parent), "reason": NO_TASK}]
    return Trajectory(
        id=f"swe-agent:{instance_id}",
        task_id=instance_id,
        model=model,
        task=task,
        messages=messages,
        events=events,
        final_answer=final_answer,
        score=score,
        termination=termination,
        usage=Usage(steps=steps),
        meta=meta,
    )


NO_TASK = ("SWE-agent .traj files with steps but no history: no task message, imported without one (no problem "
           "statement text in their replay_config, in <instance_id>.config.yaml beside them, nor a text:// "
           "environment.data_path in args.yaml beside them)")
_CONFIG_LIMIT = 16 << 20  # a config file beside a run is read up to this size (1.x's holds the agent's templates)


def problem_statement(path: Path, replay_config: Any) -> tuple[str | None, str | None]:
    """The problem statement of the run in ``path`` whose steps hold no task, and where it was read: the run's
    ``replay_config`` (1.x), the ``<instance_id>.config.yaml`` beside it (1.x run-batch), the ``args.yaml`` beside
    it (the 0.x run directory: a ``text://`` data path); (None, None) when none holds its text."""
    config = _mapping(replay_config)
    if (text := _text(config)) is not None:
        return text, "replay_config"
    beside = path.parent / f"{instance_of(path)}.config.yaml"
    if (text := _text(_yaml_beside(beside))) is not None:
        return text, beside.name
    if (text := _args_task(path.parent / "args.yaml")) is not None:
        return text, "args.yaml"
    return None, None


_ARGS_MAX = 8  # args.yaml files remembered; one rewritten in place (new inode, mtime or size) is read again, and
# one changed within dirscan.SETTLED_NS is not remembered (a rewrite in the same mtime tick, of the same size)
_args: OrderedDict[tuple[str, int, int, int], str | None] = OrderedDict()
_args_lock = threading.Lock()  # the service imports in threads


def _args_task(path: Path) -> str | None:
    """The task in a 0.x run directory's ``args.yaml`` (a ``text://`` ``environment.data_path``), None without one;
    remembered per (path, inode, mtime, size): every .traj of the directory asks, and it is parsed once."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    with _args_lock:
        if key in _args:
            _args.move_to_end(key)
            return _args[key]
    data_path = obj(obj(_yaml_beside(path)).get("environment")).get("data_path")
    text = data_path[7:] if isinstance(data_path, str) and data_path.startswith("text://") and data_path[7:].strip() \
        else None
    if time.time_ns() - st.st_mtime_ns > dirscan.SETTLED_NS:  # else being written: read again next time
        with _args_lock:
            _args[key] = text
            while len(_args) > _ARGS_MAX:
                _args.popitem(last=False)
    return text


def _text(config: dict) -> str | None:
    text = obj(config.get("problem_statement")).get("text")
    return text if isinstance(text, str) and text.strip() else None


def _mapping(config: Any) -> dict:
    """A run config given as an object or as a JSON string (``replay_config``; run-batch's ``.config.yaml`` is YAML
    holding that JSON string)."""
    if isinstance(config, str):
        try:
            config = jsontext.loads(config)
        except (ValueError, RecursionError):
            return {}
    return obj(config)


def _yaml_beside(path: Path) -> dict:
    """The YAML file ``path`` as a mapping; {} when it is missing, too large, unreadable or not YAML."""
    import yaml

    try:
        if not path.is_file() or path.stat().st_size > _CONFIG_LIMIT:
            return {}
        with path.open("rb") as f:
            return _mapping(yaml.safe_load(f.read(_CONFIG_LIMIT)))
    except (OSError, ValueError, RecursionError, yaml.YAMLError):  # ValueError: not UTF-8 text
        return {}


def ending(exit_status: str, last: int) -> tuple[Termination, list[Event]]:
    """How a run with SWE-agent's ``exit_status`` ended, and the events that say so at step ``last`` (the table in
    docs/traces.md). ``submitted (exit_X)``: the run ended on ``exit_X`` and SWE-agent submitted the patch it had left
    (``attempt_autosubmission_after_error``): delivered, with ``exit_X``'s events (a budget, a provider fault ...)."""
    status = exit_status.strip().lower()
    if status.startswith("submitted"):
        cause = status[len("submitted"):].strip()
        cause = cause[1:-1].strip() if cause.startswith("(") and cause.endswith(")") else ""
        return Termination.delivered, ending(cause, last)[1] if cause.startswith("exit_") else []
    if status in _BUDGET:
        return Termination.step_budget, [Event(type="budget_exhausted", step=last, detail=exit_status)]
    if status in _TIMEOUT:
        return Termination.timeout, [Event(type="timeout", step=last, detail=exit_status)]
    if status == "exit_context":
        return Termination.context_overflow, [Event(type="context_overflow", step=last, detail=exit_status)]
    if status in _INFRA:
        return Termination.error, [infra_event(last, exit_status)]
    if status == "exit_format":
        return Termination.error, [Event(type="format_rejected", step=last,
                                         detail="SWE-agent stopped: too many malformed replies")]
    if status in ("", "exit_forfeit", "exit_command"):
        return Termination.aborted, []
    return Termination.error, []


def _from_history(history: list) -> tuple[list[dict[str, Any]], list[int], str | None, int]:
    messages: list[dict[str, Any]] = []
    source_index: list[int] = []
    pending: list[str] = []
    task = None
    steps = 0
    for i, m in enumerate(history):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"history[{i}] has no string 'role'")
        if m.get("is_demo") or m.get("message_type") == "demonstration":
            continue
        role, content = m["role"], content_text(m.get("content"))
        step = len(messages)
        source_index.append(i)
        if role == "assistant":
            steps += 1
            calls = [_call(c, f"call_{step}_{k}") for k, c in enumerate(arr(m.get("tool_calls")))
                     if isinstance(c, dict)]
            action = m.get("action")
            if not calls and isinstance(action, str) and action.strip():
                calls = [{"id": f"call_{step}", "type": "function",
                          "function": {"name": "bash", "arguments": json.dumps({"command": action.strip()})}}]
            pending = [c["id"] for c in calls]
            messages.append({"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})})
        elif role == "tool":
            ids = [x for x in arr(m.get("tool_call_ids")) if isinstance(x, str)] or [str(m.get("tool_call_id") or "")]
            call_id = ids[0] or (pending[0] if pending else f"call_{step}")
            if call_id in pending:
                pending.remove(call_id)
            messages.append({"role": "tool", "tool_call_id": call_id, "name": _name(messages, call_id),
                             "content": content})
        elif role == "user" and pending and m.get("message_type") in (None, "observation"):  # 0.x: no type
            call_id = pending.pop(0)
            messages.append({"role": "tool", "tool_call_id": call_id, "name": _name(messages, call_id),
                             "content": content})
        else:
            if role == "user" and task is None:
                task = content
            messages.append({"role": role, "content": content})
    return messages, source_index, task, steps


def _from_steps(trajectory: list) -> tuple[list[dict[str, Any]], str | None, int]:
    messages: list[dict[str, Any]] = []
    first = next((s for s in trajectory if isinstance(s, dict) and isinstance(s.get("query"), list)), None)
    task = None
    for q in arr(first.get("query") if first else None)[:2]:
        if isinstance(q, dict) and q.get("role") in ("system", "user"):
            text = content_text(q.get("content"))
            messages.append({"role": q["role"], "content": text})
            task = text if q["role"] == "user" else task
    steps = 0
    for i, s in enumerate(trajectory):
        if not isinstance(s, dict):
            raise ValueError(f"trajectory[{i}] is not an object")
        steps += 1
        action = s.get("action") if isinstance(s.get("action"), str) else ""
        call_id = f"call_{len(messages)}"
        reply = content_text(s.get("response")) or content_text(s.get("thought"))
        if action.strip():
            messages.append({"role": "assistant", "content": reply, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": action.strip()})}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "name": "bash",
                             "content": content_text(s.get("observation"))})
        else:
            messages.append({"role": "assistant", "content": reply})
    return messages, task, steps


def _call(c: dict, fallback_id: str) -> dict[str, Any]:
    fn = obj(c.get("function"))
    name = fn.get("name")
    call_id = c.get("id")
    return {"id": call_id if isinstance(call_id, str) and call_id else fallback_id, "type": "function",
            "function": {"name": name if isinstance(name, str) and name else "bash",
                         "arguments": arguments(fn.get("arguments"))}}


def _name(messages: list[dict[str, Any]], call_id: str) -> str:
    for m in reversed(messages):
        for c in m.get("tool_calls") or ():
            if c["id"] == call_id:
                return c["function"]["name"]
    return "bash"


def _model(data: dict) -> str | None:
    """The model's name from ``replay_config`` (a JSON string, or an object): ``agent.model.name``."""
    cfg = data.get("replay_config")
    if isinstance(cfg, str):
        try:
            cfg = jsontext.loads(cfg)
        except ValueError:
            return None
    name = obj(obj(obj(cfg).get("agent")).get("model")).get("name")
    return name if isinstance(name, str) and name else None
