"""Round planning that does not starve: what the analyst's patterns may target this round, and when the
ceiling verdict ("train the weights") may be given.

Against one anchor (main's head, measured afresh after each merge) a signal is *tried* once a
candidate targeted it, or once a round's analyst had no pattern for it (nothing the roles can write),
or its pattern was dropped (critic, engineer, an already-rejected change). Each round:

- `filter` keeps the analyst's patterns whose signal has not been tried against this anchor, in the
  analyst's order, up to the round's candidate limit: when the top patterns were rejected, the next
  signals get their turn instead of the same two being dropped until patience ends the run;
- `unplanned` lists the process signals above the noise floor that got no pattern this round: they
  count as tried (recorded in the state's ``dropped`` with their ``signal``), so planning terminates;
- `untried` is what `stop_reason` asks before the ceiling verdict: while a process signal above the
  noise floor (first signal of at least ``min_support`` anchor rollouts and ``floor`` of them) has not
  been tried, "nothing accepted for N rounds" does not end the run (the round limit and the budget
  still do).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evoharness.diagnosis.models import Lever
from evoharness.graph.records import Dropped
from evoharness.graph.state import Typed
from evoharness.roles.models import Pattern


class RoundPlanner:
    def __init__(self, book: Any, min_support: int = 2, floor: float = 0.05) -> None:
        self.book = book  # load(ids), labels(trajectories)
        self.min_support = min_support
        self.floor = floor

    def tried(self, state: Typed | dict[str, Any]) -> set[str]:
        """Signals (and pattern ids) tried against the current anchor."""
        t = Typed.of(state)
        since = t.anchor.round if t.get("anchor") else 0
        out: set[str] = set()
        for r in t.rounds:
            if r.round > since:
                out.update(c.get("targets", "") for c in r.candidates)
        for d in t.dropped:
            if d.round > since:
                out.update(x for x in (d.signal, d.pattern) if x)
        for c in t.candidates:  # this round's, before the round summary is written
            out.add(c.targets)
        out.discard("")
        return out

    def above_floor(self, state: Typed | dict[str, Any]) -> list[str]:
        """Process first signals of the anchor above the noise floor, most frequent first."""
        t = Typed.of(state)
        ids = t.anchor.trajectory_ids if t.get("anchor") else []
        if not ids:
            return []
        labels = self.book.labels(self.book.load(ids))
        counts = Counter(lab.first_signal.id for lab in labels
                         if lab.lever == Lever.harness and lab.first_signal)
        need = self.min_support
        return [sig for sig, c in counts.most_common() if c >= need and c / len(labels) >= self.floor]

    def filter(self, patterns: list[Pattern], state: Typed | dict[str, Any], limit: int) -> list[Pattern]:
        tried = self.tried(state)
        fresh = [p for p in patterns if p.signal not in tried and p.id not in tried]
        return fresh[:limit]

    def unplanned(self, patterns: list[Pattern], state: Typed | dict[str, Any]) -> list[Dropped]:
        """Drop records for the untried signals above the floor that none of the analyst's patterns (all
        of them, before `filter`) targets."""
        planned = {p.signal for p in patterns}
        tried = self.tried(state)
        return [Dropped(pattern=f"p-{sig}", signal=sig, round=state.get("round", 0),
                        reason="analyst: no pattern for this signal against this anchor")
                for sig in self.above_floor(state) if sig not in planned and sig not in tried]

    def untried(self, state: Typed | dict[str, Any], evidence: list[str] | None = None) -> list[str]:
        """Process signals above the floor, and evidence pattern ids (``evidence``), not tried yet."""
        tried = self.tried(state)
        return [s for s in [*self.above_floor(state), *(evidence or [])] if s not in tried]

    def open_evidence(self, state: Typed | dict[str, Any], evidence: Any) -> list[str]:
        """Ids of the harness-evidence patterns not yet tried against this anchor (`HarnessEvidence`);
        before the evidence of main's head is computed, a placeholder: the run goes on to compute it."""
        if evidence is None:
            return []
        if not evidence.known():
            return ["(harness evidence not computed yet)"]
        tried = self.tried(state)
        return [p.id for p in evidence.patterns() if p.id not in tried and p.signal not in tried]
