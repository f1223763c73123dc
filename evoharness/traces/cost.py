"""What a rollout cost, read from its trace: the cost signals and the cost an edit may target.

A harness defect need not lower the score: a lesson that tells the agent to keep working instead of answering
makes it repeat read-only calls until the loop guard blocks the repeat, and then it answers -- same score, more
steps, a blocked call in almost every rollout. The diagnosis labeller sees no failure there (a block the agent got
past is no consequential friction), so these signals are read here, from the harness-side events and the usage,
and never enter a label:

- ``cost.blocked_call``: the harness blocked or rejected at least one of the agent's calls (a ``blocked_call`` or
  ``format_rejected`` event: a loop guard, a policy, a middleware block), recovered from or not. Each one costs
  the rollout a step.
- ``cost.blocked_call.<cause>``: the same, counting only the blocks of one cause, read from the event
  (`block_cause`): ``format`` (a call rejected for its arguments' format), ``loop_guard`` (the loop guard's
  blocks), ``middleware.<module>`` (a ``before_tool`` hook of ``middleware/<module>.py`` returned a block). An
  edit that says what it blocks targets its cause's signal, so its verdict counts that cause's blocks, not
  whatever else the harness blocks in the same rollouts: a call-format repair after which the loop guard blocks
  as often as the format was rejected has cut the rejections all the same, and an edit that leaves the
  rejections and quiets the guard has not.

A rollout's ``cost`` is its agent steps (``usage.steps``: assistant turns; when the trace did not record them, the
assistant messages). An edit whose target is a cost signal is verified on cost (``gates.cost_gates``).
"""

from __future__ import annotations

import re
from typing import Any

COST_PREFIX = "cost."
BLOCKED = "cost.blocked_call"
COST_SIGNALS = (BLOCKED,)
_BLOCK_EVENTS = ("blocked_call", "format_rejected")


def is_cost_signal(signal_id: str | None) -> bool:
    return bool(signal_id) and str(signal_id).startswith(COST_PREFIX)


def _stem(module: str) -> str:
    """A middleware module's name as its cause names it: the file's stem, anything but a word character or '-'
    replaced (``gate.py`` and ``gate`` are the same module)."""
    return re.sub(r"[^\w-]", "_", module.strip().removesuffix(".py"))


def block_cause(event: Any) -> str | None:
    """The cause of a blocked or rejected call (``format``, ``loop_guard``, ``middleware.<module>``), read from the
    event the agent loop records; None for another event, or a block whose trace does not say what blocked it (an
    imported one): such a block counts for ``cost.blocked_call`` only."""
    if event.type == "format_rejected":
        return "format"
    if event.type != "blocked_call":
        return None
    data = event.data if isinstance(event.data, dict) else {}
    if data.get("action") == "loop_guard" or event.detail.startswith("loop guard:"):
        return "loop_guard"
    module = data.get("module")
    if not isinstance(module, str) or not module.strip():
        found = re.match(r"([\w.-]+): ", event.detail)
        module = found.group(1) if found else None
    return f"middleware.{_stem(module)}" if module else None


def cause_signal(cause: str) -> str:
    """The cost signal of one cause's blocks: ``cost.blocked_call.<cause>``."""
    return f"{BLOCKED}.{cause}"


def middleware_signal(path: str) -> str:
    """The cost signal of the blocks of the middleware module at ``path`` (``middleware/gate.py``)."""
    return cause_signal("middleware." + _stem(path.rsplit("/", 1)[-1]))


def _counts(event: Any, signal_id: str) -> bool:
    if event.type not in _BLOCK_EVENTS:
        return False
    return signal_id == BLOCKED or (signal_id.startswith(BLOCKED + ".")
                                    and block_cause(event) == signal_id[len(BLOCKED) + 1:])


def blocked_events(traj: Any, signal_id: str = BLOCKED) -> list[Any]:
    """The trajectory's blocked or rejected calls (harness-side events) that ``signal_id`` counts, in order: every
    one for ``cost.blocked_call``, one cause's for ``cost.blocked_call.<cause>``."""
    return [e for e in traj.events if _counts(e, signal_id)]


def cost_signals(traj: Any) -> frozenset[str]:
    """Ids of the cost signals that fired in ``traj``: ``cost.blocked_call`` and each cause's signal."""
    found = [e for e in traj.events if e.type in _BLOCK_EVENTS]
    if not found:
        return frozenset()
    return frozenset({BLOCKED, *(cause_signal(c) for c in map(block_cause, found) if c)})


def cost_evidence(traj: Any, signal_id: str) -> tuple[int | None, str] | None:
    """(step, quote) where ``signal_id`` first fired in ``traj``; None when it did not fire."""
    if is_cost_signal(signal_id):
        found = blocked_events(traj, signal_id)
        if found:
            e = found[0]
            return e.step, (e.detail or e.type)[:200]
    return None


def steps_of(traj: Any) -> int:
    """Agent steps: ``usage.steps``, else the assistant messages (a trace that recorded no usage)."""
    steps = traj.usage.steps
    return steps if steps else sum(1 for m in traj.messages if m.get("role") == "assistant")
