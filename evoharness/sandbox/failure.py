"""The failed trajectory that stands for a rollout whose worker crashed, hung or broke a limit."""

from __future__ import annotations

from typing import Any

from evoharness.sandbox.api import RolloutRequest, rollout_id
from evoharness.traces.models import Event, Split, Termination, Trajectory, Usage


def failed_trajectory(req: RolloutRequest, sha: str | None, model: str, env_spec: str, kind: str,
                      reason: str, termination: Termination, wall_seconds: float,
                      meta: dict[str, Any]) -> Trajectory:
    """Score 0.0, not delivered, one event of type ``kind`` whose detail is ``reason``."""
    split = req.split if req.split in Split.__members__ else Split.unknown
    return Trajectory(
        id=rollout_id(req.task_id, sha, req.split, req.seed), task_id=req.task_id, split=split, harness_commit=sha,
        model=model, rollout=req.rollout, events=[Event(type=kind, step=0, detail=reason, data={"source": "executor"})],
        final_answer=None, score=0.0, termination=termination, usage=Usage(wall_seconds=max(0.0, wall_seconds)),
        meta={"env": env_spec, "seed": req.seed, "rollout_failure": {"reason": reason, **meta}},
    )
