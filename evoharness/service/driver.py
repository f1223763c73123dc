"""Drive one run's graph the way `evoharness run` does, but stoppable between nodes.

`evoharness run` calls ``graph.invoke``; the service streams the same graph step by step
(``durability="sync"``: each node's result is checkpointed before the next node starts) and
checks a stop flag after every step. On SIGTERM the node that is running finishes, its
checkpoint is written, and the drive returns; ``resume`` continues from there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoharness.config import Settings
from evoharness.errors import InfraError
from evoharness.graph.checkpoint import open_checkpointer
from evoharness.graph.graph import build_graph
from evoharness.graph.progress import Progress
from evoharness.graph.runner import RunOutcome
from evoharness.graph.services import Services
from evoharness.graph.summary import write_summary


class TapProgress(Progress):
    """Progress that also remembers the last note and the rollout counters (for the API and metrics)."""

    def __init__(self, quiet: bool = False) -> None:
        super().__init__(quiet=quiet)
        self.last_note = ""

    def note(self, message: str) -> None:
        self.last_note = message
        super().note(message)

    def view(self) -> dict[str, Any]:
        return {"rollouts_done": self.done, "rollouts_planned": self.planned, "budget_left": self.budget_left,
                "last_note": self.last_note}


def drive(settings: Settings, run_id: str, run_dir: Path, payload: Any, progress: Progress,
          stop: threading.Event, on_state: Callable[[dict[str, Any]], None] | None = None) -> RunOutcome:
    """Run the graph from ``payload`` (None: resume) until it ends, interrupts, or ``stop`` is set."""
    services = Services.build(settings, run_dir, progress)
    stopped = False
    try:
        with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
            graph = build_graph(services, saver, review=settings.run.review)
            config = {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}
            if payload is None and not graph.get_state(config).values:
                payload = {"run_id": run_id}  # killed before the first checkpoint: start it over
            try:
                for values in graph.stream(payload, config, durability="sync", stream_mode="values"):
                    if on_state is not None:
                        on_state(dict(values))
                    if stop.is_set():
                        stopped = True
                        break
            except InfraError as e:
                raise InfraError(f"run {run_id} paused: {e.reason}; fix the cause, then restart the service "
                                 f"(or `evoharness run --resume {run_id}`)", retryable=e.retryable) from e
            snapshot = graph.get_state(config)
            state = dict(snapshot.values)
            interrupts = [] if stopped else [i.value for t in snapshot.tasks for i in t.interrupts]
    finally:
        services.close()
    outcome = RunOutcome(run_id, run_dir, state, interrupts)
    outcome.stopped = stopped and not outcome.done
    if outcome.done and not (run_dir / "summary.json").exists():
        write_summary(outcome, services)
    if on_state is not None:
        on_state(state)
    return outcome


def read_state(settings: Settings, run_id: str, run_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    """A run's checkpointed state and pending review interrupts, without running anything."""
    services = Services.build(settings, run_dir, Progress(quiet=True), lazy=True)
    with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
        graph = build_graph(services, saver, review=settings.run.review)
        snapshot = graph.get_state({"configurable": {"thread_id": run_id}})
        return dict(snapshot.values), [i.value for t in snapshot.tasks for i in t.interrupts]
