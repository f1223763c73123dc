"""Worker: ``python -m evoharness.agent.worker REQUEST.json OUT.json``
(or ``--batch REQUESTS.json OUTDIR``: a JSON list of requests, run one after another in this
process, trajectory *i* written to ``OUTDIR/<i>.json`` as it finishes -- the executor's way to pay
the interpreter start-up once per batch of rollouts of one harness commit; or ``--serve WARM.json``:
the warm worker, a fork server that runs one rollout per forked child, see ``agent/forkserver.py``).

REQUEST.json holds ``harness_dir``, ``env_spec``, ``task_id``, ``model_spec``, ``seed`` and
optionally ``rollout`` (0), ``split`` ("dev"), ``harness_commit`` (null), ``gateway`` (null: the
``gateway:SOCKET?rollout=TOKEN#model`` spec through which the sandbox reaches ``model_spec``'s model),
``env_via`` (null: ``env_spec`` with its simulated user's model reached through the gateway, e.g.
``tau2:retail?user=gateway:SOCKET?rollout=TOKEN#model``; the environment is built from it).
With a sandbox, an offline model (``standin:``/``scripted:``, which is handed the task's reference
solution) runs host-side behind the gateway (``sandbox/gateway_standin.py``): the request then has a
``gateway`` spec and this process never holds the reference.
OUT.json receives ``{"version": 2, "trajectory": ..., "env_calls": [...]}``: the trajectory and every call
made on the environment with its result. When the request carries a ``seal`` (the executor always sends
one), it is taken out and the request file deleted before any harness code loads, the output is written
sealed (``sandbox.scoring.seal_output``: its HMAC on the first line; a file harness code planted at the
output path is replaced, never written through), and run as ``python -m`` the worker ends with
``os._exit`` right after writing: no exit handler of harness code runs after the output.
The host trusts neither the trajectory's score nor anything else
this process claims: it replays ``env_calls`` on a fresh environment and scores there
(``evoharness.sandbox.scoring``); a replay that differs marks the rollout tampered.
Exit 0 whenever a trajectory was written (agent and harness failures are trajectories); exit 2 only
for unusable input (unreadable/invalid request, unknown env/task/model, an environment that cannot
load, e.g. AgentDojo not installed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError


class WorkerRequest(BaseModel):
    harness_dir: str
    env_spec: str
    task_id: str
    model_spec: str
    seed: int = 0
    rollout: int = 0
    split: str = "dev"
    harness_commit: str | None = Field(None)
    gateway: str | None = Field(None, description="gateway:SOCKET?rollout=TOKEN#model: how this sandbox reaches "
                                "model_spec's model (set by the executor; model_spec stays the model's name)")
    env_via: str | None = Field(None, description="env_spec with its simulated user's model reached through the "
                                "gateway (set by the executor; env_spec stays the environment's name)")


def _run(req: WorkerRequest) -> str:
    """One rollout; the envelope the host reads (trajectory + recorded environment calls). Python's ``random``
    is seeded from the rollout's seed, task and rollout first, so harness code's draws are the rollout's own:
    the same in a cold worker, a warm worker's child per rollout or batch child (CPython reseeds ``random``
    from the OS in a forked child), run after run."""
    import random

    from evoharness.agent.runner import run_rollout
    from evoharness.sandbox.scoring import envelope

    random.seed(f"rollout:{req.seed}:{req.task_id}:{req.rollout}")
    calls: list = []
    traj = run_rollout(Path(req.harness_dir), req.env_spec, req.task_id, req.model_spec, req.seed,
                       rollout=req.rollout, split=req.split, harness_commit=req.harness_commit,
                       model_via=req.gateway, env_via=req.env_via, env_calls=calls, log_failures=False)
    return envelope(traj, calls)


def _invalid(e: ValidationError) -> str:
    """Every field pydantic refused, on one line: the host records a failed worker's last stderr line as the
    rollout's failure reason, and pydantic's own dump ends in a link to its docs."""
    parts = []
    for err in e.errors():
        where = ".".join(str(x) for x in err.get("loc", ())) or "request"
        given = err.get("input")
        shown = f" (got {given!r})" if err.get("type") != "missing" and isinstance(given, str | int | float) else ""
        parts.append(f"{where}: {err.get('msg', 'invalid')}{shown}")
    return "; ".join(parts)


def _reason(e: Exception) -> str:
    """Why a request could not be read, on one line."""
    if isinstance(e, ValidationError):
        return _invalid(e)
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e)


def _take_seal(raw: object) -> str | None:
    """The request's seal, removed from it (harness code never sees it)."""
    return raw.pop("seal", None) if isinstance(raw, dict) else None


def _forget(path: str) -> None:
    """Delete the request file (its seal) before harness code loads; say so if it cannot be deleted."""
    try:
        os.unlink(path)
    except OSError as e:
        print(f"worker: cannot delete the request {path}: {e.strerror}", file=sys.stderr)


def _write(path: Path, text: str, seal: str | None) -> None:
    """Write the output afresh: whatever is at ``path`` (a symlink or FIFO harness code planted) is removed
    first and never followed; sealed when the request had a seal."""
    from evoharness.sandbox.scoring import seal_output

    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(seal_output(text, seal) if seal else text)


def _batch(requests_path: str, out_dir: str) -> int:
    from evoharness.errors import EvoharnessError

    try:
        raw = json.loads(Path(requests_path).read_text())
        if not isinstance(raw, list):
            raise TypeError(f"not a JSON list of requests (a {type(raw).__name__})")
        seals = [_take_seal(r) for r in raw]
        if any(seals):
            _forget(requests_path)
        reqs = []
        for i, r in enumerate(raw):
            try:
                reqs.append(WorkerRequest.model_validate(r))
            except ValidationError as e:
                raise ValueError(f"request {i}: {_invalid(e)}") from None
    except (OSError, ValueError, TypeError) as e:
        print(f"error: bad batch {requests_path}: {_reason(e)}", file=sys.stderr)
        return 2
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for i, req in enumerate(reqs):
        try:
            text = _run(req)
        except EvoharnessError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        tmp = out / f"{i}.json.tmp"
        _write(tmp, text, seals[i])
        tmp.rename(out / f"{i}.json")  # replaces whatever harness code put there
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "--batch":
        return _batch(args[1], args[2])
    if len(args) == 2 and args[0] == "--serve":  # the warm worker: a fork server (agent/forkserver.py)
        from evoharness.agent.forkserver import serve

        return serve(args[1])
    if len(args) != 2:
        print("usage: python -m evoharness.agent.worker REQUEST.json OUT.json", file=sys.stderr)
        return 2
    from evoharness.errors import EvoharnessError

    try:
        raw = json.loads(Path(args[0]).read_text())
        seal = _take_seal(raw)
        if seal:
            _forget(args[0])
        req = WorkerRequest.model_validate(raw)
    except (OSError, ValueError) as e:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
        print(f"error: bad request {args[0]}: {_reason(e)}", file=sys.stderr)
        return 2
    try:
        text = _run(req)
    except EvoharnessError as e:  # unknown env/task/model, or an environment that cannot load
        print(f"error: {e}", file=sys.stderr)
        return 2
    _write(Path(args[1]), text, seal)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no exit handler or thread of harness code runs after the output is written
