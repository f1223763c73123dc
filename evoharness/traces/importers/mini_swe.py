"""mini-swe-agent ``*.traj.json`` trajectories, joined with SWE-bench ``report.json``.

mini-swe-agent speaks plain text: each assistant reply must hold exactly one fenced
```bash block. We turn a well-formed reply into an assistant message with one
``bash`` tool call and the following ``<returncode>...`` user message into the tool
result, so the loop and friction detectors see real tool calls. Replies the harness
rejected ("Please always provide EXACTLY ONE action ...") stay as text and become
``format_rejected`` events at the rejecting message.

Score: ``resolved`` from ``logs/<instance>/report.json`` (searched beside the file and
at ``<root>/logs/<instance>/report.json`` for a ``<root>/trajs/<instance>/`` layout):
1.0 resolved, 0.0 not; unscored when no report exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces.models import Event, Termination, Trajectory, Usage

BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n?```", re.DOTALL)
FORMAT_ERROR = re.compile(r"^\s*Please always provide EXACTLY ONE action", re.IGNORECASE)
OBSERVATION = re.compile(r"^\s*<returncode>", re.IGNORECASE)
TIMEOUT_MSG = re.compile(r"timed out|timeout", re.IGNORECASE)

_TERMINATION = {
    "submitted": Termination.delivered,
    "limitsexceeded": Termination.step_budget,
    "timeout": Termination.timeout,
    "executiontimeouterror": Termination.timeout,
    "contextwindowexceedederror": Termination.context_overflow,
}


def find_report(path: Path, instance_id: str) -> Path | None:
    candidates = [
        path.parent / "report.json",
        path.parent.parent.parent / "logs" / instance_id / "report.json",
        path.parent.parent / "logs" / instance_id / "report.json",
    ]
    return next((c for c in candidates if c.is_file()), None)


def _resolved(report_path: Path, instance_id: str) -> bool | None:
    try:
        report = json.loads(report_path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(str(report_path), f"unreadable report.json: {e}") from None
    if isinstance(report, dict) and instance_id in report and isinstance(report[instance_id], dict):
        report = report[instance_id]  # SWE-bench harness layout {instance_id: {...}}
    if not isinstance(report, dict) or "resolved" not in report:
        raise InputError(str(report_path), "report.json has no 'resolved' flag")
    return bool(report["resolved"])


def matches(rec: dict) -> bool:
    return "messages" in rec and isinstance(rec.get("info"), dict) and (
        "exit_status" in rec["info"] or str(rec.get("trajectory_format", "")).startswith("mini-swe-agent"))


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ValueError("mini-swe-agent trajectory needs a 'messages' list")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    instance_id = str(data.get("instance_id") or path.name.removesuffix(".traj.json"))
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    pending_call: str | None = None
    steps = 0
    task = None
    for i, m in enumerate(data["messages"]):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"message {i} has no string 'role'")
        role, content = m["role"], m.get("content")
        if isinstance(content, list):  # multimodal-style content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        content = content if isinstance(content, str) else ""
        step = len(messages)
        if role == "assistant":
            steps += 1
            blocks = BASH_BLOCK.findall(content)
            if len(blocks) == 1:
                pending_call = f"call_{step}"
                args = json.dumps({"command": blocks[0].strip()})
                messages.append({"role": "assistant", "content": content, "tool_calls": [
                    {"id": pending_call, "type": "function", "function": {"name": "bash", "arguments": args}}]})
            else:
                pending_call = None
                messages.append({"role": "assistant", "content": content})
        elif role == "user" and pending_call and OBSERVATION.match(content):
            messages.append({"role": "tool", "tool_call_id": pending_call, "name": "bash", "content": content})
            pending_call = None
        else:
            if role == "user" and FORMAT_ERROR.match(content):
                events.append(Event(type="format_rejected", step=step, detail=content[:300]))
            elif role == "user" and task is None:
                task = content
            messages.append({"role": role, "content": content})

    exit_status = str(info.get("exit_status") or "")
    termination = _TERMINATION.get(exit_status.lower(), Termination.error if exit_status else Termination.aborted)
    submission = info.get("submission")
    final_answer = submission if termination == Termination.delivered and isinstance(submission, str) else None
    if termination == Termination.delivered and final_answer is None:
        final_answer = ""
    if termination == Termination.step_budget:
        events.append(Event(type="budget_exhausted", step=max(len(messages) - 1, 0), detail=exit_status))
    elif termination == Termination.timeout:
        events.append(Event(type="timeout", step=max(len(messages) - 1, 0), detail=exit_status))

    score = None
    report = find_report(path, instance_id)
    if report is not None:
        score = 1.0 if _resolved(report, instance_id) else 0.0
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model = (config.get("model") or {}).get("model_name") if isinstance(config.get("model"), dict) else None
    return Trajectory(
        id=f"mini-swe-agent:{instance_id}",
        task_id=instance_id,
        model=model,
        task=task,
        messages=messages,
        events=events,
        final_answer=final_answer,
        score=score,
        termination=termination,
        usage=Usage(steps=steps),
        meta={"source_format": "mini-swe-agent", "exit_status": exit_status,
              "api_calls": stats.get("api_calls"), "cost": stats.get("instance_cost"),
              "mini_version": info.get("mini_version"), "report": str(report) if report else None},
    )
