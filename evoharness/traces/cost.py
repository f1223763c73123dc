"""What a rollout cost, read from its trace: the cost signals and the cost an edit may target.

A harness defect need not lower the score: a lesson that tells the agent to keep working instead of answering
makes it repeat read-only calls until the loop guard blocks the repeat, and then it answers -- same score, more
steps, a blocked call in almost every rollout. The diagnosis labeller sees no failure there (a block the agent got
past is no consequential friction), so these signals are read here, from the harness-side events and the usage,
and never enter a label:

- ``cost.blocked_call``: the harness blocked or rejected at least one of the agent's calls (a ``blocked_call`` or
  ``format_rejected`` event: a loop guard, a policy, a middleware block), recovered from or not. Each one costs
  the rollout a step.

A rollout's ``cost`` is its agent steps (``usage.steps``: assistant turns; when the trace did not record them, the
assistant messages). An edit whose target is a cost signal is verified on cost (``gates.cost_gates``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

COST_PREFIX = "cost."
BLOCKED = "cost.blocked_call"
COST_SIGNALS = (BLOCKED,)
_BLOCK_EVENTS = ("blocked_call", "format_rejected")


def is_cost_signal(signal_id: str | None) -> bool:
    return bool(signal_id) and str(signal_id).startswith(COST_PREFIX)


def blocked_events(traj: Any, cause: Callable[[Any], bool] | None = None) -> list[Any]:
    """The trajectory's blocked or rejected calls (harness-side events), in order; with ``cause``, only the events
    it accepts (one middleware module's blocks, the format rejections)."""
    return [e for e in traj.events if e.type in _BLOCK_EVENTS and (cause is None or cause(e))]


def cost_signals(traj: Any) -> frozenset[str]:
    """Ids of the cost signals that fired in ``traj``."""
    return frozenset({BLOCKED} if blocked_events(traj) else ())


def cost_evidence(traj: Any, signal_id: str, cause: Callable[[Any], bool] | None = None
                  ) -> tuple[int | None, str] | None:
    """(step, quote) where ``signal_id`` first fired in ``traj`` (with ``cause``: from the events it accepts); None
    when it did not fire."""
    if signal_id == BLOCKED:
        found = blocked_events(traj, cause)
        if found:
            e = found[0]
            return e.step, (e.detail or e.type)[:200]
    return None


def steps_of(traj: Any) -> int:
    """Agent steps: ``usage.steps``, else the assistant messages (a trace that recorded no usage)."""
    steps = traj.usage.steps
    return steps if steps else sum(1 for m in traj.messages if m.get("role") == "assistant")
