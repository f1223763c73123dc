"""Task selection strategies behind one protocol.

Every strategy chooses among the anchor's *dev* tasks only: held-out tasks are never selected.
``targeted`` is the cell the gain is measured on; ``control`` is where regressions are watched.
Split strategies (fixed, random, coreset) put their whole split in ``targeted`` and leave
``control`` empty; they are meant to be judged by the aggregate-metric gate.
"""

from __future__ import annotations

import random
from typing import Protocol

from pydantic import BaseModel, Field

from evoharness.registry import Registry
from evoharness.traces.cost import is_cost_signal
from evoharness.verification.anchors import Anchor
from evoharness.verification.noise import pooled_within_sd

BEHAVIOUR_AWARE_GATES = ("behaviour", "gain", "no_regression", "attribution", "guard")
SPLIT_GATES = ("aggregate", "guard")


class Selection(BaseModel):
    strategy: str
    targeted: list[str] = Field(default_factory=list)
    control: list[str] = Field(default_factory=list)
    guard: list[str] = Field(
        default_factory=list, description="pinned regression tasks (added by the verifier)"
    )

    @property
    def tasks(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in [*self.targeted, *self.control, *self.guard]:
            seen.setdefault(t, None)
        return list(seen)


class SelectionStrategy(Protocol):
    """Chooses the tasks one candidate is verified on.

    Contract: ``select`` returns at most ``max_tasks`` distinct tasks (targeted + control), all of
    them dev tasks of ``anchor``; it is deterministic given ``rng``'s state. ``fresh_baseline`` says
    whether the choice depends on the anchor's own outcomes, in which case the anchor's readings on
    those tasks are biased (regression to the mean) and the verifier must re-measure a baseline.
    ``gates`` names the gates (`verification.gates.GATES`) a candidate selected this way must pass
    unless the caller passes its own; a subclass inherits them, so it cannot silently lose one.
    """

    name: str
    fresh_baseline: bool
    gates: tuple[str, ...]

    def select(self, anchor: Anchor, target: str, max_tasks: int, rng: random.Random) -> Selection: ...


class BehaviourAware:
    """Targeted: dev tasks where ``target`` fired in the anchor; control: a sample of dev tasks where every
    anchor rollout was healthy, ``control_ratio`` per targeted task.

    Which targeted tasks first (``rank``, config ``targeted_rank``): ``fired`` -- where the target fired
    in the most anchor rollouts; ``alone`` -- where it fired with nothing else reported beside it in the
    most rollouts (then ``fired``). A rollout where another behaviour also fires fails whatever the
    target does, so an edit to the target can gain nothing there while the rollout still adds variance:
    such tasks carry less of the paired test's signal per rollout.
    """

    name = "behaviour_aware"
    fresh_baseline = True
    gates = BEHAVIOUR_AWARE_GATES

    RANKS = ("fired", "alone")

    def __init__(self, control_ratio: float = 0.5, rank: str = "fired") -> None:
        if rank not in self.RANKS:
            raise ValueError(f"unknown targeted rank {rank!r} (choose from {', '.join(self.RANKS)})")
        self.control_ratio, self.rank = control_ratio, rank

    def select(self, anchor: Anchor, target: str, max_tasks: int, rng: random.Random) -> Selection:
        per_task = anchor.per_task()
        dev = anchor.dev_tasks()
        fired = {t: sum(target in o.fired for o in per_task[t]) for t in dev}
        # "alone": nothing else reported beside the target; a cost signal (a blocked call the agent got past) is
        # no failure beside a score target, so it counts only when the target is a cost signal itself
        alone = {t: sum(_reported(o.fired, target) == {target} for o in per_task[t]) for t in dev} \
            if self.rank == "alone" else fired
        targeted = sorted((t for t in dev if fired[t]), key=lambda t: (-alone[t], -fired[t], t))
        healthy = [t for t in dev if not fired[t] and all(o.healthy for o in per_task[t])]
        n_control = min(len(healthy), round(len(targeted) * self.control_ratio))
        if targeted and self.control_ratio > 0:
            n_control = max(n_control, min(1, len(healthy)))
        if len(targeted) + n_control > max_tasks:
            share = 1.0 / (1.0 + self.control_ratio)
            n_target = max(1, min(len(targeted), round(max_tasks * share)))
            n_control = min(n_control, max_tasks - n_target)
            targeted = targeted[:n_target]
        control = sorted(rng.sample(healthy, n_control)) if n_control > 0 else []
        return Selection(strategy=self.name, targeted=targeted, control=control)


class FixedSplit:
    """The same first ``max_tasks`` dev tasks (by id) every round, whatever the behaviour."""

    name = "fixed_split"
    fresh_baseline = False
    gates = SPLIT_GATES

    def select(self, anchor: Anchor, target: str, max_tasks: int, rng: random.Random) -> Selection:
        return Selection(strategy=self.name, targeted=anchor.dev_tasks()[:max_tasks])


class RandomSplit:
    """A fresh random sample of ``max_tasks`` dev tasks per call."""

    name = "random_split"
    fresh_baseline = False
    gates = SPLIT_GATES

    def select(self, anchor: Anchor, target: str, max_tasks: int, rng: random.Random) -> Selection:
        dev = anchor.dev_tasks()
        return Selection(strategy=self.name, targeted=sorted(rng.sample(dev, min(max_tasks, len(dev)))))


class Coreset:
    """The ``max_tasks`` dev tasks whose anchor scores vary most across rollouts (ties by id)."""

    name = "coreset"
    fresh_baseline = False
    gates = SPLIT_GATES

    def select(self, anchor: Anchor, target: str, max_tasks: int, rng: random.Random) -> Selection:
        per_task = anchor.per_task()
        spread = {t: pooled_within_sd([[o.score for o in per_task[t]]])[0] for t in anchor.dev_tasks()}
        ranked = sorted(spread, key=lambda t: (-spread[t], t))
        return Selection(strategy=self.name, targeted=sorted(ranked[:max_tasks]))


# name -> factory(control_ratio, rank) -> strategy. A new strategy: a class above (or in its own module) and
# one entry here.
STRATEGIES: Registry = Registry("strategy", "strategy")
STRATEGIES.register(BehaviourAware.name, BehaviourAware)
STRATEGIES.register(FixedSplit.name, lambda control_ratio=0.5, rank="fired": FixedSplit())
STRATEGIES.register(RandomSplit.name, lambda control_ratio=0.5, rank="fired": RandomSplit())
STRATEGIES.register(Coreset.name, lambda control_ratio=0.5, rank="fired": Coreset())


def _reported(fired: frozenset[str], target: str) -> frozenset[str]:
    """The signals a rollout reported, as "alone" reads them: its score signals, and for a cost target the target
    itself (one block fires ``cost.blocked_call`` and its cause's signal: neither is another failure)."""
    score = frozenset(s for s in fired if not is_cost_signal(s))
    return score | (fired & {target}) if is_cost_signal(target) else score


def make_strategy(name: str, control_ratio: float = 0.5, rank: str = "fired") -> SelectionStrategy:
    """The registered strategy ``name``; ``rank`` orders behaviour-aware selection's targeted tasks."""
    return STRATEGIES.get(name)(control_ratio, rank)
