"""Command agents: external agents (OpenCode-, Codex-CLI-style) that a harness runs as a shell command.

A harness whose ``harness.toml`` says ``[agent] kind = "command"`` has the executor run
``cd HARNESS && <command> TASK.json OUT.json`` in the sandbox (harness read-only, no network).

``TASK.json`` (``task_file``) holds everything the agent needs, version 1:

- ``task_id``, ``prompt`` (the task text), ``tools`` (OpenAI tool schemas of the environment);
- ``harness_dir`` (where the harness checkout is, read-only), ``output`` (where to write the result);
- ``model``: ``spec`` (the run's model spec), ``name``, and, when the executor runs a model gateway
  for this rollout, ``gateway`` (``gateway:SOCKET?rollout=TOKEN#NAME``), ``socket`` and ``base_url``
  (``http://gateway/r/TOKEN/v1``: an OpenAI-compatible endpoint reached over the Unix socket);
  without a gateway the three are null and the agent has no model to call;
- ``tool_command``: an argv that runs one environment tool, ``[*tool_command, NAME, ARGS_JSON]``
  printing ``{"ok": true, "content": ...}`` or ``{"ok": false, "error": {"kind", "message"}}``
  (the environment's state carries over between calls of one rollout);
- ``env_spec``, ``seed``, ``rollout``, ``split``, ``harness_commit``, ``model_spec``, ``gateway``
  (the reference worker's request fields, kept for agents that run the evoharness agent).

``OUT.json`` is either a canonical ``Trajectory`` (its score is recomputed as below; a score it
carries that differs from the host's marks the rollout tampered: score 0) or plain OpenAI chat
messages: a JSON list of messages, or ``{"messages": [...], "final_answer": ..., "termination": ...,
"usage": {...}}`` (all but ``messages`` optional).
Messages become a Trajectory with the request's task id, harness commit, model, rollout and seed;
the final answer is the last assistant message's text unless given (``null`` = not delivered).

Scoring: a fresh environment state is rebuilt by replaying the tool calls of the assistant
messages in order, then the environment's own scorer runs on it with the final answer and the
messages. This assumes a deterministic environment (the built-in ones are). Replayed calls the
environment rejects become ``unknown_tool`` / ``invalid_arguments`` / ``tool_error`` events. If
the replay or the scorer cannot run, ``score`` is left None and ``meta.score_note`` says why.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.harness_repo.manifest import MANIFEST_NAME, Manifest
from evoharness.model_specs import model_name
from evoharness.sandbox.api import RolloutRequest, rollout_id
from evoharness.traces.models import Event, Split, Termination, Trajectory, Usage

TASK_FILE_VERSION = 1
TOOL_LOG = "tool_calls.jsonl"
ROLES = ("system", "user", "assistant", "tool")


class BadOutput(Exception):
    """The command's output file is missing or is neither a Trajectory nor OpenAI messages."""


def uses_command_agent(tree: Path) -> bool:
    """Whether the harness at ``tree`` runs a command agent (a bad manifest raises ``InputError``)."""
    path = tree / MANIFEST_NAME
    return path.is_file() and Manifest.load(path).agent.kind == "command"


def _gateway_parts(spec: str | None) -> tuple[str | None, str | None]:
    """``gateway:SOCKET?rollout=TOKEN#NAME`` -> (socket, base_url)."""
    if not spec:
        return None, None
    socket, _, rest = spec.removeprefix("gateway:").partition("?rollout=")
    token = rest.partition("#")[0]
    return socket, f"http://gateway/r/{token}/v1"


class CommandRollout:
    """One command-agent rollout: writes its task file, turns its output file into a Trajectory."""

    def __init__(self, env_spec: str, model_spec: str, req: RolloutRequest, sha: str | None) -> None:
        from evoharness.envs import get_environment

        self.env_spec, self.model_spec, self.req, self.sha = env_spec, model_spec, req, sha
        self.env = get_environment(env_spec)
        self.task = self.env.get_task(req.task_id)

    def task_file(self, payload: dict[str, Any], output: str) -> dict[str, Any]:
        """The task file: the worker request ``payload`` plus prompt, tools, output, model and tool command."""
        socket, base_url = _gateway_parts(payload.get("gateway"))
        name = model_name(self.model_spec)  # the gateway sets the spec's temperature on each request
        return payload | {
            "version": TASK_FILE_VERSION, "prompt": self.task.prompt, "tools": self.env.tools(self.task),
            "output": output,
            "model": {"spec": self.model_spec, "name": name, "gateway": payload.get("gateway"), "socket": socket,
                      "base_url": base_url},
            "tool_command": [sys.executable, "-m", "evoharness.sandbox.command_agent", "tool",
                             str(Path(output).parent / "request.json")],
        }

    def read(self, out: Path, wall_seconds: float) -> Trajectory:
        """The trajectory in ``out`` (raises ``BadOutput`` with the reason)."""
        from evoharness.sandbox.scoring import OutputError, read_output

        try:
            data = json.loads(read_output(out))
        except OutputError as e:
            if str(e) == "no output file":
                raise BadOutput("command exited 0 but wrote no output file") from None
            raise BadOutput(f"command output refused: {e}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise BadOutput(f"command wrote invalid JSON: {e}"[:300]) from None
        if isinstance(data, dict) and "task_id" in data:
            try:
                traj = Trajectory.model_validate(data)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(x) for x in first["loc"])
                raise BadOutput(f"command wrote an invalid trajectory: {loc}: {first['msg']}"[:300]) from None
            if traj.task_id != self.req.task_id:
                raise BadOutput(f"command wrote a trajectory of task {traj.task_id!r}, not {self.req.task_id!r}")
            traj.meta.setdefault("output_format", "trajectory")
            claimed = traj.score
            traj.score, note, events = self.score(traj.messages, traj.final_answer)
            traj.events += events
            traj.meta["score_note"] = note
            if claimed is not None and traj.score is not None and abs(claimed - traj.score) > 1e-9:
                from evoharness.sandbox.scoring import mark_tampered

                return mark_tampered(traj, f"the command reported score {claimed:g}, the host's replay gives "
                                           f"{traj.score:g}")
            return traj
        return self._from_messages(data, wall_seconds)

    def _from_messages(self, data: Any, wall_seconds: float) -> Trajectory:
        extra: dict[str, Any] = {}
        if isinstance(data, dict) and "messages" in data:
            extra, data = data, data["messages"]
        if not isinstance(data, list):
            raise BadOutput("command output is neither a Trajectory, a list of OpenAI messages, nor "
                            "{\"messages\": [...]}")
        for i, m in enumerate(data):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                raise BadOutput(f"message {i} is not an OpenAI chat message (role one of {', '.join(ROLES)})")
        final = extra["final_answer"] if "final_answer" in extra else _last_answer(data)
        if final is not None and not isinstance(final, str):
            raise BadOutput("final_answer must be a string or null")
        try:
            termination = Termination(extra.get("termination") or
                                      (Termination.delivered if final is not None else Termination.aborted))
        except ValueError:
            raise BadOutput(f"unknown termination {extra.get('termination')!r}") from None
        usage = extra.get("usage") if isinstance(extra.get("usage"), dict) else {}
        score, note, events = self.score(data, final)
        req = self.req
        try:
            return Trajectory(
                id=rollout_id(req.task_id, self.sha, req.split, req.seed), task_id=req.task_id,
                split=req.split if req.split in Split.__members__ else Split.unknown, harness_commit=self.sha,
                model=self.model_spec, rollout=req.rollout, task=self.task.prompt, messages=data, events=events,
                final_answer=final, score=score, termination=termination,
                usage=Usage(steps=sum(1 for m in data if m["role"] == "assistant"),
                            prompt_tokens=_count(usage.get("prompt_tokens")),
                            completion_tokens=_count(usage.get("completion_tokens")),
                            wall_seconds=max(0.0, wall_seconds)),
                meta={"env": self.env_spec, "env_version": getattr(self.env, "version", ""), "seed": req.seed,
                      "task_split": self.task.split, "agent": "command", "output_format": "openai_messages",
                      "score_note": note, **({"agent_meta": extra["meta"]} if isinstance(extra.get("meta"), dict)
                                             else {})},
            )
        except ValidationError as e:
            raise BadOutput(f"command output does not make a trajectory: {e.errors()[0]['msg']}"[:300]) from None

    def score(self, messages: list[dict[str, Any]], final: str | None) -> tuple[float | None, str, list[Event]]:
        """Replay the messages' tool calls on a fresh state and score; (None, why, events) if that fails."""
        try:
            state, events = replay(self.env, self.task, tool_calls_of(messages))
            value = float(self.env.score(self.task, state, final, messages))
        except Exception as e:  # noqa: BLE001 -- an environment that cannot replay or score: unscored, said why
            return None, f"unscored: {type(e).__name__}: {e}"[:300], []
        n = sum(1 for _ in tool_calls_of(messages))
        return min(max(value, 0.0), 1.0), f"scored by the environment after replaying {n} tool calls", events


def _last_answer(messages: list[dict[str, Any]]) -> str | None:
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None or last.get("tool_calls"):
        return None
    text = _text(last.get("content"))
    return text if text.strip() else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _count(v: Any) -> int:
    return v if isinstance(v, int) and v >= 0 else 0


def tool_calls_of(messages: list[dict[str, Any]]):
    """(step, name, raw arguments) of each assistant tool call, in order."""
    for step, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        calls = m.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            yield step, fn.get("name"), fn.get("arguments")


def replay(env: Any, task: Any, calls) -> tuple[Any, list[Event]]:
    """A fresh state with ``calls`` applied; an event per call the environment rejected."""
    from evoharness.envs.base import ToolError

    state = env.reset(task)
    events: list[Event] = []
    for step, name, raw in calls:
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as e:
            events.append(Event(type="format_rejected", step=step, detail=f"{name}: arguments are not JSON: {e}",
                                data={"source": "replay"}))
            continue
        if not isinstance(args, dict):
            events.append(Event(type="invalid_arguments", step=step, detail=f"{name}: arguments are not an object",
                                data={"source": "replay"}))
            continue
        try:
            env.call_tool(state, name, args)
        except ToolError as e:
            events.append(Event(type=e.kind, step=step, detail=f"{name}: {e.message}", data={"source": "replay"}))
    return state, events


# ---- the tool command: `python -m evoharness.sandbox.command_agent tool TASK.json NAME ARGS_JSON` ----

def run_tool(task_path: Path, name: str, raw_args: str) -> dict[str, Any]:
    """Run one environment tool for a command agent; state = a replay of this rollout's earlier calls."""
    from evoharness.envs import get_environment
    from evoharness.envs.base import ToolError

    spec = json.loads(task_path.read_text())
    env = get_environment(spec["env_spec"])
    task = env.get_task(spec["task_id"])
    log = Path(spec["output"]).parent / TOOL_LOG
    earlier = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    state, _ = replay(env, task, [(0, c["name"], c["args"]) for c in earlier])
    try:
        args = json.loads(raw_args)
    except json.JSONDecodeError as e:
        return {"ok": False, "error": {"kind": "format_rejected", "message": f"arguments are not JSON: {e}"}}
    if not isinstance(args, dict):
        return {"ok": False, "error": {"kind": "invalid_arguments", "message": "arguments must be a JSON object"}}
    try:
        content = env.call_tool(state, name, args)
    except ToolError as e:
        return {"ok": False, "error": {"kind": e.kind, "message": e.message}}
    with log.open("a") as fh:
        fh.write(json.dumps({"name": name, "args": args}) + "\n")
    return {"ok": True, "content": content}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] != "tool":
        print("usage: python -m evoharness.sandbox.command_agent tool TASK.json NAME ARGS_JSON", file=sys.stderr)
        return 2
    from evoharness.errors import EvoharnessError

    try:
        print(json.dumps(run_tool(Path(args[1]), args[2], args[3])))
    except (OSError, json.JSONDecodeError, KeyError, EvoharnessError) as e:
        print(f"tool: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
