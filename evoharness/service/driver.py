"""Drive one run's graph for the service: `evoharness run`'s drive, stoppable between nodes.

`graph.runner.drive` streams the graph step by step (``durability="sync"``: each node's result
is checkpointed before the next node starts) and checks a stop flag after every step. On SIGTERM
the node that is running finishes, its checkpoint is written, and the drive returns; ``resume``
continues from there.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoharness.config import Settings
from evoharness.graph.checkpoint import open_checkpointer
from evoharness.graph.graph import build_graph
from evoharness.graph.progress import Progress
from evoharness.graph.runner import RunOutcome
from evoharness.graph.runner import drive as run_graph
from evoharness.graph.wiring import build_services


class TapProgress(Progress):
    """Progress that also remembers the last note and the rollout counters (for the API and metrics)."""

    def __init__(self, quiet: bool = False) -> None:
        super().__init__(quiet=quiet)
        self.last_note = ""

    def note(self, message: str) -> None:
        self.last_note = message
        super().note(message)

    def reset(self) -> None:
        """Start counting afresh: for another run (the counters and budget left were the previous run's)."""
        self.done, self.planned, self.budget_left, self.last_note = 0, 0, None, ""

    def view(self) -> dict[str, Any]:
        return {"rollouts_done": self.done, "rollouts_planned": self.planned, "budget_left": self.budget_left,
                "last_note": self.last_note}


def drive(settings: Settings, run_id: str, run_dir: Path, payload: Any, progress: Progress,
          stop: threading.Event, on_state: Callable[[dict[str, Any]], None] | None = None) -> RunOutcome:
    """Run the graph from ``payload`` (None: resume) until it ends, interrupts, or ``stop`` is set."""
    home = shlex.quote(f"home={settings.home}")  # the service's home, or the CLI looked under its default one
    return run_graph(settings, run_id, run_dir, payload, progress, stop=stop, on_state=on_state,
                     resume_hint=f"restart the service (or `evoharness --set {home} run --resume {run_id}`)")


def read_state(settings: Settings, run_id: str, run_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    """A run's checkpointed state and pending review interrupts, without running anything."""
    services = build_services(settings, run_dir, Progress(quiet=True), lazy=True)
    with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
        graph = build_graph(services, saver, review=settings.run.review)
        snapshot = graph.get_state({"configurable": {"thread_id": run_id}})
        return dict(snapshot.values), [i.value for t in snapshot.tasks for i in t.interrupts]
