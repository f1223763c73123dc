"""Progress shown while a run works: round, candidate, rollouts done / planned, budget left."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Prints one line per note and a running rollout counter (plain text: safe in logs and CI)."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.done = 0
        self.planned = 0
        self.budget_left: float | None = None
        self._last = 0.0

    def note(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.t0:6.1f}s] {message}", file=self.stream, flush=True)

    def plan(self, n: int, what: str) -> None:
        self.planned += n
        self.note(f"{what}: {n} rollouts planned (done {self.done}/{self.planned}"
                  + (f", budget left {self.budget_left:g})" if self.budget_left is not None else ")"))

    def advance(self, n: int = 1, budget_left: float | None = None) -> None:
        self.done += n
        if budget_left is not None:
            self.budget_left = budget_left
        now = time.monotonic()
        if not self.quiet and (now - self._last > 2.0 or self.done == self.planned):
            self._last = now
            left = f", budget left {self.budget_left:g}" if self.budget_left is not None else ""
            print(f"[{now - self.t0:6.1f}s]   rollouts {self.done}/{self.planned}{left}", file=self.stream,
                  flush=True)
