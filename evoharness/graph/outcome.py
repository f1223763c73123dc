"""What driving a run ended with: its state, its open review interrupts, whether a stop request ended it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class RunOutcome:
    def __init__(self, run_id: str, run_dir: Path, state: dict[str, Any], interrupted: list[Any]) -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self.state = state
        self.interrupted = interrupted
        self.stopped = False  # a stop request ended the drive between two nodes
        self.harness: Path | None = None  # the harness repository the run drove (a copied run's own)

    @property
    def done(self) -> bool:
        return self.state.get("status") == "done"
