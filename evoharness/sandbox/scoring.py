"""Scores the harness cannot touch: the host replays a rollout's environment calls and scores it itself.

Inside the sandbox the agent, the environment and the harness's code share one process, so anything
that process reports (its score, its termination, the file it leaves behind) may have been written
by harness code -- an ``atexit`` handler, a patched scorer, a thread. The host therefore trusts only
the agent's *actions and messages*:

- the reference worker records every call it made on the environment (``EnvCall``: name, arguments,
  and the result or error the environment gave) and writes them beside the trajectory in an
  envelope (``{"version": 2, "trajectory": ..., "env_calls": [...]}``, see ``agent/worker.py``);
- the host (``HostScorer``, in the executor's process, outside every sandbox) builds a fresh state
  of the environment, replays the recorded calls in order and checks that each gives the recorded
  result; then it runs the environment's own scorer on that state with the trajectory's final answer
  and messages. That score replaces whatever the sandbox wrote;
- a rollout whose output is not the worker's envelope, whose replay does not reproduce a recorded
  result, whose task is not the one requested, or whose reported score differs from the host's, is
  **tampered**: score 0, an event ``tampered`` with the reason, ``meta["tampered"]`` and a warning log.

Environments whose tools reach something outside the environment's own state (tau2's ``ask_user``
asks a simulated customer, possibly a real model) declare ``replay_tool(state, name, args, recorded)``:
the replay applies the recorded reply to the state instead of asking again.

The output is sealed, too: the executor puts a fresh random ``seal`` in each worker request; the worker
takes it out and deletes the request file before any harness code loads, and writes its output as
``sealed:<HMAC-SHA256(seal, envelope)>`` on the first line, then the envelope (``seal_output``). It
ends with ``os._exit`` right after writing, so no exit handler (a harness's ``atexit``) and no leftover
thread runs after it. Output that harness code wrote instead (it never saw the seal) fails ``unseal``:
tampered. Host replay stays the second line behind the seal.

``read_output`` is how the host reads any file a sandbox wrote: ``O_NOFOLLOW`` (a symlink planted
at the output path is refused, never followed), a regular file only (no FIFO, no device), and a
size cap.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from evoharness.envs import get_environment
from evoharness.envs.base import ToolError
from evoharness.logging import get_logger
from evoharness.traces.models import Event, EventType, Trajectory
from evoharness.untrusted import read_capped

log = get_logger(__name__)

ENVELOPE_VERSION = 2
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
SCORE_TOLERANCE = 1e-9


class EnvCall(BaseModel):
    """One call the agent made on the environment, with what the environment answered."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: str | None = Field(None, description="the tool's text result (None when it raised)")
    error: str | None = Field(None, description="'KIND: MESSAGE' of the ToolError (or exception) it raised")

    def outcome(self) -> tuple[str | None, str | None]:
        return self.result, self.error


class Recorder:
    """Wraps an environment; every ``call_tool`` is recorded as an ``EnvCall`` in ``calls``."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.calls: list[EnvCall] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def call_tool(self, state: Any, name: str, args: dict[str, Any]) -> str:
        try:
            out = self._env.call_tool(state, name, args)
        except ToolError as e:
            self.calls.append(EnvCall(name=name, args=_plain(args), error=f"{e.kind}: {e.message}"))
            raise
        except Exception as e:
            self.calls.append(EnvCall(name=name, args=_plain(args), error=f"raised {type(e).__name__}"))
            raise
        self.calls.append(EnvCall(name=name, args=_plain(args), result=out))
        return out


def _plain(args: dict[str, Any]) -> dict[str, Any]:
    """A JSON round-trip of ``args`` (what the host will replay is what the file can carry)."""
    return json.loads(json.dumps(args, default=str))


class OutputError(Exception):
    """A file the sandbox wrote cannot be read safely (symlink, not a regular file, too big, missing)."""


def read_output(path: Path, max_bytes: int = MAX_OUTPUT_BYTES) -> bytes:
    """The bytes of a file a sandbox wrote: never through a symlink, only a regular file, at most ``max_bytes``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise OutputError("no output file") from None
    except OSError as e:
        if os.path.islink(path):
            raise OutputError("the output path is a symlink (refused, not followed)") from None
        raise OutputError(f"cannot open the output file: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError("the output path is not a regular file (refused)")
        if st.st_size > max_bytes:
            raise OutputError(f"the output file is {st.st_size} bytes, over the {max_bytes}-byte cap")
        data = read_capped(fd, max_bytes)
        if len(data) > max_bytes:
            raise OutputError(f"the output file grew over the {max_bytes}-byte cap")
        return data
    finally:
        os.close(fd)


class WorkerOutput(BaseModel):
    """What the reference worker writes: the trajectory and the environment calls it made."""

    version: int
    trajectory: Trajectory
    env_calls: list[EnvCall]


def envelope(traj: Trajectory, calls: list[EnvCall]) -> str:
    return WorkerOutput(version=ENVELOPE_VERSION, trajectory=traj, env_calls=calls).model_dump_json()


class Tampered(Exception):
    """The rollout's output does not hold up on the host (the reason is the message)."""


SEAL_PREFIX = b"sealed:"


def _mac(seal: str, body: bytes) -> bytes:
    return hmac.new(seal.encode(), body, hashlib.sha256).hexdigest().encode()


def seal_output(text: str, seal: str) -> str:
    """The worker's output: the seal's HMAC of ``text`` on the first line, then ``text``."""
    return f"{SEAL_PREFIX.decode()}{_mac(seal, text.encode()).decode()}\n{text}"


def unseal(data: bytes, seal: str) -> bytes:
    """The envelope under a valid seal; ``Tampered`` when the output was not written by the worker."""
    head, sep, body = data.partition(b"\n")
    if not head.startswith(SEAL_PREFIX) or not sep:
        raise Tampered("the output is not sealed by the worker (written by other code in the sandbox)")
    if not hmac.compare_digest(head[len(SEAL_PREFIX):], _mac(seal, body)):
        raise Tampered("the output's seal does not match (rewritten after the worker wrote it)")
    return body


def parse_worker_output(data: bytes) -> WorkerOutput:
    """The worker's envelope; ``Tampered`` when the bytes are anything else (e.g. a bare forged Trajectory)."""
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise Tampered(f"the output is not JSON ({type(e).__name__})") from None
    if not isinstance(raw, dict) or raw.get("version") != ENVELOPE_VERSION or "env_calls" not in raw:
        raise Tampered("the output is not the worker's envelope (a bare or rewritten trajectory)")
    try:
        return WorkerOutput.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise Tampered(f"the worker's envelope is invalid at {loc}: {first['msg']}"[:300]) from None


class HostScorer:
    """Replays recorded environment calls on a fresh environment and scores, outside the sandbox."""

    def __init__(self, env_spec: str) -> None:
        self.env_spec = env_spec
        self._env: Any = None

    @property
    def env(self) -> Any:
        if self._env is None:
            self._env = get_environment(self.env_spec)
        return self._env

    def replay(self, task: Any, calls: list[EnvCall]) -> Any:
        """A fresh state with ``calls`` applied; ``Tampered`` at the first call whose outcome differs."""
        env = self.env
        state = env.reset(task)
        replay_tool = getattr(env, "replay_tool", None)
        for i, call in enumerate(calls):
            got = _apply(env, replay_tool, state, call)
            if got != call.outcome():
                raise Tampered(f"replayed env call {i} ({call.name}) does not reproduce its recorded result: "
                               f"recorded {_short(call.outcome())}, replay gave {_short(got)}")
        return state

    def score(self, traj: Trajectory, calls: list[EnvCall]) -> float:
        """The environment's score of ``traj`` after replaying ``calls`` (``Tampered`` if they do not hold)."""
        task = self.env.get_task(traj.task_id)
        state = self.replay(task, calls)
        value = float(self.env.score(task, state, traj.final_answer, traj.messages))
        if math.isnan(value):
            value = 0.0
        return min(max(value, 0.0), 1.0)

    def settle(self, traj: Trajectory, calls: list[EnvCall], task_id: str) -> Trajectory:
        """``traj`` scored by the host (its own score replaced), or marked tampered with score 0."""
        if traj.task_id != task_id:
            return mark_tampered(traj, f"the output is a trajectory of task {traj.task_id!r}, not {task_id!r}")
        claimed = traj.score
        try:
            score = self.score(traj, calls)
        except Tampered as e:
            return mark_tampered(traj, str(e))
        except Exception as e:  # noqa: BLE001 -- the environment's own scorer failed: scored 0, said why
            traj.score = 0.0
            traj.events.append(Event(type=EventType.tool_infra_error, step=0, data={"source": "host scoring"},
                                     detail=f"host scorer raised {type(e).__name__}: {e}"[:500]))
            traj.meta["scoring"] = {"by": "host replay", "env_calls": len(calls), "error": type(e).__name__}
            return traj
        if claimed is not None and abs(claimed - score) > SCORE_TOLERANCE:
            return mark_tampered(traj, f"the sandbox reported score {claimed:g}, the host's replay gives {score:g}")
        traj.score = score
        traj.meta["scoring"] = {"by": "host replay", "env_calls": len(calls)}
        return traj


def _apply(env: Any, replay_tool: Any, state: Any, call: EnvCall) -> tuple[str | None, str | None]:
    try:
        if replay_tool is not None:
            out = replay_tool(state, call.name, dict(call.args), call)
        else:
            out = env.call_tool(state, call.name, dict(call.args))
    except ToolError as e:
        return None, f"{e.kind}: {e.message}"
    except Exception as e:  # noqa: BLE001 -- compared with what the sandbox recorded
        return None, f"raised {type(e).__name__}"
    return out, None


def _short(outcome: tuple[str | None, str | None]) -> str:
    result, error = outcome
    text = f"error {error!r}" if error is not None else f"{result!r}"
    return text[:120]


def mark_tampered(traj: Trajectory, reason: str) -> Trajectory:
    """Score 0, an event ``tampered`` and ``meta["tampered"]`` carrying ``reason``; logged as a warning."""
    log.warning("rollout_tampered", task_id=traj.task_id, harness_commit=traj.harness_commit, reason=reason)
    traj.score = 0.0
    traj.events.append(Event(type=EventType.tampered, step=0, detail=reason[:500], data={"source": "host scoring"}))
    traj.meta["tampered"] = reason[:500]
    traj.meta["scoring"] = {"by": "host replay", "tampered": True}
    return traj
