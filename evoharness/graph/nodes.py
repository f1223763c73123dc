"""Graph nodes: each reads the state, calls one service, returns a partial update.

Nodes read the state through `Typed` and write the dumps of typed values: the one place JSON meets
the services, which take and return typed values. Every side effect a node performs is idempotent
(content-keyed rollout cache, trajectory store keyed by id, candidate branches reused, merges
detected), so a node re-run after a crash changes nothing that already happened.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from evoharness.graph.faults import fault_point
from evoharness.graph.records import Dropped, RoundSummary, Splits
from evoharness.graph.services import Services
from evoharness.graph.state import RunState, Typed, dump, dump_all
from evoharness.logging import bind_contextvars, get_logger, unbind_contextvars

log = get_logger("evoharness.graph")


class Nodes:
    def __init__(self, services: Services) -> None:
        self.s = services

    def _bind(self, state: RunState) -> None:
        bind_contextvars(run_id=state.get("run_id"), round=state.get("round", 0))

    # -- collect / diagnose -------------------------------------------------------------
    def collect(self, state: RunState) -> dict[str, Any]:
        """Measure the seed harness: the first anchor on dev, and the 'before' composition (dev, held-out)."""
        self._bind(state)
        fault_point("collect:start")
        self.s.repo.check_worktree_clear()  # an index lock the merge would meet: paused before any rollout
        ledger = self.s.ledger(state)
        main = self.s.repo.main_head()
        anchor = self.s.book.measure_anchor(main, ledger, round=0)
        fault_point("collect:anchored")
        heldout = self.s.book.evaluate(main, "heldout", ledger, round=0)
        fault_point("collect:done")
        self.s.progress.note(f"seed anchor: mean {anchor.mean:.3f} on {len(anchor.tasks)} dev tasks")
        return {"anchor": anchor.dump(), "anchors": [anchor.dump()], "round": 1, "ledger": ledger.dump(),
                "before": Splits(dev=anchor.composition, heldout=heldout).dump(), "no_accept_streak": 0,
                "status": "running"}

    def diagnose(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("diagnose")
        comp = self.s.book.composition_of(Typed(state).anchor.trajectory_ids)
        return {"composition": comp}

    def enqueue(self, state: RunState) -> dict[str, Any]:
        """Content failures (F1/F4) go to the training queue, never to the engineer."""
        self._bind(state)
        fault_point("enqueue:start")
        ledger, t = self.s.ledger(state), Typed(state)
        held = self.s.desk.hold_back(t, ledger)  # harness evidence first: the failures may be the harness's
        evidence = self.s.desk.harness_evidence  # rollouts whose cost a named harness cause explains are not queued
        ids = [] if held else self.s.book.enqueue_content(t.anchor.trajectory_ids, state["run_id"], state["round"],
                                                          evidence.cost_explained(t.anchor.trajectory_ids)
                                                          if evidence is not None else frozenset())
        fault_point("enqueue:done")
        known = set(state.get("queued", []))
        return {"queued": [i for i in ids if i not in known], "ledger": ledger.dump()}

    # -- roles --------------------------------------------------------------------------
    def analyst(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("analyst")
        self.s.repo.check_worktree_clear()  # a round's start: before its candidates and verification are spent
        t = Typed(state)
        feedback = [r for r in t.reviews if r.send_back]
        patterns, failures = self.s.desk.analyse(t.anchor.trajectory_ids, feedback, t)
        self.s.progress.note(f"round {state['round']}: analyst found {len(patterns)} pattern(s)")
        dropped = [Dropped(pattern=None, round=state["round"], reason=reason) for reason in failures]
        dropped += self.s.desk.unplanned
        return {"patterns": dump_all(patterns), "reviews": [] if not feedback else state.get("reviews", []),
                "dropped": dump_all(dropped)}

    def critic(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("critic")
        t = Typed(state)
        previous = {r.pattern_id: r for r in t.reviews}
        reviews = self.s.desk.critique(t.patterns, t.anchor.trajectory_ids, previous)
        return {"reviews": dump_all(reviews)}

    def engineer(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("engineer:start")
        t = Typed(state)
        candidates, dropped = self.s.desk.engineer(t.patterns, t.reviews, state["round"], t.rejected)
        fault_point("engineer:done")
        self.s.progress.note(f"round {state['round']}: {len(candidates)} candidate(s), {len(dropped)} dropped")
        return {"candidates": dump_all(candidates), "dropped": dump_all(dropped)}

    # -- verification and merge ------------------------------------------------------------
    def verify(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("verify:start")
        t = Typed(state)
        ledger, anchor, guards = self.s.ledger(state), t.anchor, t.guards
        verdicts = []
        for cand in t.candidates:
            bind_contextvars(candidate=cand.branch)
            verdicts.append(self.s.gate.verify(cand, anchor, ledger, state["round"], guards))
            fault_point("verify:candidate")
        unbind_contextvars("candidate")
        return {"verdicts": dump_all(verdicts), "ledger": ledger.dump()}

    def review(self, state: RunState) -> dict[str, Any]:
        """Human gate: interrupt with the accepted candidates; resume with {branch: approve|reject}."""
        accepted = [v for v in Typed(state).verdicts if v.accepted]
        if not accepted:
            return {"decisions": {}}
        decisions = interrupt({"run_id": state["run_id"], "round": state["round"],
                               "candidates": [{"branch": v.candidate, "commit": v.commit, "reason": v.reason,
                                               "static_review": self.s.gate.needs_human(v)} for v in accepted]})
        return {"decisions": dict(decisions or {})}

    def merge(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("merge:start")
        decisions = state.get("decisions") or {}
        t = Typed(state)
        merged, rejected = self.s.gate.settle(t.candidates, t.verdicts, decisions, state["round"])
        fault_point("merge:done")
        return {"merged": dump_all(merged), "rejected": dump_all(rejected)}

    def reanchor(self, state: RunState) -> dict[str, Any]:
        """After a merge, main gets a fresh anchor: the bar for the next round, not the candidate's reading."""
        self._bind(state)
        fault_point("reanchor:start")
        t = Typed(state)
        ledger = self.s.ledger(state)
        merged_now = [m for m in t.merged if m.round == state["round"]]
        before = anchor = t.anchor
        optimism = None
        guards = t.guards
        main = self.s.repo.main_head()
        if merged_now:
            anchor = self.s.book.measure_anchor(main, ledger, round=state["round"])
            optimism = merged_now[-1].reading - anchor.mean
            guards = self.s.gate.pin_fixed(before, anchor, state["round"], guards)
        elif main != before.commit:  # main moved outside the run: the next round is verified against what it is now
            self.s.progress.note(f"round {state['round']}: main moved outside the run ({before.commit[:10]} -> "
                                 f"{main[:10]}); measuring a fresh anchor")
            anchor = self.s.book.measure_anchor(main, ledger, round=state["round"])
        fault_point("reanchor:done")
        verdicts, reviews = t.verdicts, t.reviews
        summary = RoundSummary(
            round=state["round"],
            anchor_before=before.mean,
            fresh_anchor=anchor.mean if anchor is not before else None,  # after a merge, or main moved outside
            anchor_commit=anchor.commit,
            selection_optimism=optimism,
            composition=state.get("composition"),
            candidates=[{**dump(c), "verdict": next((dump(v) for v in verdicts if v.candidate == c.branch), None)}
                        for c in t.candidates],
            accommodation_flags=sum(1 for r in reviews if r.accommodation),
            reviews=len(reviews),
            merged=[m.branch for m in merged_now],
            budget_left=ledger.left,
        )
        streak = 0 if merged_now else state.get("no_accept_streak", 0) + 1
        self.s.progress.note(
            f"round {state['round']}: merged {len(merged_now)}; anchor {summary.anchor_before:.3f}"
            + (f" -> fresh {anchor.mean:.3f}" if anchor is not before else "") + f"; budget left {ledger.left:g}")
        update: dict[str, Any] = {"rounds": [summary.dump()], "round": state["round"] + 1, "ledger": ledger.dump(),
                                  "no_accept_streak": streak, "candidates": [], "verdicts": [], "patterns": [],
                                  "reviews": [], "decisions": {}, "guards": dump(guards)}
        if anchor is not before:
            update["anchor"] = anchor.dump()
            update["anchors"] = [anchor.dump()]
        return update

    def finish(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("finish:start")
        ledger = self.s.ledger(state)
        main = self.s.repo.main_head()
        dev = self.s.book.composition_of(Typed(state).anchor.trajectory_ids)
        heldout = self.s.book.evaluate(main, "heldout", ledger, round=state.get("round", 0))
        fault_point("finish:done")
        reason = self.s.stopping.stop_reason(state)
        return {"after": Splits(dev=dev, heldout=heldout).dump(), "status": "done", "stop_reason": reason["reason"],
                "recommendation": reason["recommendation"], "ledger": ledger.dump()}
