"""Observations: what verification needs from one rollout, and nothing more.

Gates, strategies and the simulation work on `Observation`s, not raw trajectories, so they
can be tested (and simulated at scale) without running an agent. A *labeller* turns a
`Trajectory` into the signals that fired and whether it was healthy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field

from evoharness.diagnosis.labeller import label_trajectory
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.cost import cost_signals, steps_of
from evoharness.traces.models import Trajectory

# (trajectory) -> (ids of the signals that fired, healthy?)
Labeller = Callable[[Trajectory], tuple[frozenset[str], bool]]


class Observation(BaseModel):
    """One rollout as verification sees it. An unscored rollout counts as score 0, never healthy."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    rollout: int = 0
    seed: int = 0
    score: float = Field(0.0, allow_inf_nan=False, description="the rollout's score; NaN and infinity are refused "
                         "(a NaN difference would make every verdict's boundary garbage)")
    fired: frozenset[str] = Field(default_factory=frozenset, description="signal ids that fired (the labeller's and "
                                  "the cost signals of `evoharness.traces.cost`)")
    healthy: bool = False
    split: str = "dev"
    trajectory_id: str | None = None
    tokens: int = 0
    steps: int = Field(0, description="agent steps, the cost a cost-targeted edit is verified on")


def default_labeller(traj: Trajectory) -> tuple[frozenset[str], bool]:
    """The first-signal labeller of `evoharness.diagnosis` (imported lazily)."""
    label = label_trajectory(traj)
    return frozenset(s.id for s in label.signals), str(label.failure_class) == "healthy"


def observe(req: RolloutRequest, traj: Trajectory, labeller: Labeller | None = None) -> Observation:
    """The observation of ``traj``, the answer to ``req`` (seed, rollout and split come from the request). The cost
    signals that fired join the labeller's: they never make a rollout unhealthy."""
    fired, healthy = (labeller or default_labeller)(traj)
    fired = frozenset(fired) | cost_signals(traj)
    score = traj.score if traj.score is not None else 0.0
    return Observation(
        task_id=req.task_id,
        rollout=req.rollout,
        seed=req.seed,
        score=score,
        fired=fired,
        healthy=healthy and traj.score is not None,
        split=req.split,
        trajectory_id=traj.id,
        tokens=traj.usage.prompt_tokens + traj.usage.completion_tokens,
        steps=steps_of(traj),
    )


def by_task(observations: Iterable[Observation]) -> dict[str, list[Observation]]:
    """Observations grouped per task, each list ordered by seed."""
    out: dict[str, list[Observation]] = defaultdict(list)
    for o in observations:
        out[o.task_id].append(o)
    return {t: sorted(v, key=lambda o: (o.seed, o.rollout)) for t, v in out.items()}


def mean_score(observations: Iterable[Observation]) -> float | None:
    scores = [o.score for o in observations]
    return sum(scores) / len(scores) if scores else None


def incidence(observations: Iterable[Observation], signal: str) -> float | None:
    """Share of rollouts in which ``signal`` fired."""
    obs = list(observations)
    return sum(signal in o.fired for o in obs) / len(obs) if obs else None
