"""Graph nodes: each reads the state, calls one service, returns a partial update.

Every side effect a node performs is idempotent (content-keyed rollout cache,
trajectory store keyed by id, candidate branches reused, merges detected), so a
node re-run after a crash changes nothing that already happened.
"""

from __future__ import annotations

from typing import Any

import structlog
from langgraph.types import interrupt

from evoharness.graph.faults import fault_point
from evoharness.graph.services import Services
from evoharness.graph.state import AnchorEntry, RunState

log = structlog.get_logger("evoharness.graph")


class Nodes:
    def __init__(self, services: Services) -> None:
        self.s = services

    def _bind(self, state: RunState) -> None:
        structlog.contextvars.bind_contextvars(run_id=state.get("run_id"), round=state.get("round", 0))

    # -- collect / diagnose -------------------------------------------------------------
    def collect(self, state: RunState) -> dict[str, Any]:
        """Measure the seed harness: the first anchor on dev, and the 'before' composition (dev, held-out)."""
        self._bind(state)
        fault_point("collect:start")
        ledger = self.s.ledger(state)
        main = self.s.repo.main_head()
        anchor = self.s.book.measure_anchor(main, ledger, round=0)
        fault_point("collect:anchored")
        heldout = self.s.book.evaluate(main, "heldout", ledger, round=0)
        fault_point("collect:done")
        self.s.progress.note(f"seed anchor: mean {anchor.mean:.3f} on {len(anchor.tasks)} dev tasks")
        return {"anchor": anchor.dump(), "anchors": [anchor.dump()], "round": 1, "ledger": ledger.dump(),
                "before": {"dev": anchor.composition, "heldout": heldout}, "no_accept_streak": 0,
                "status": "running"}

    def diagnose(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("diagnose")
        comp = self.s.book.composition_of(AnchorEntry.of(state).trajectory_ids)
        return {"composition": comp}

    def enqueue(self, state: RunState) -> dict[str, Any]:
        """Content failures (F1/F4) go to the training queue, never to the engineer."""
        self._bind(state)
        fault_point("enqueue:start")
        ledger = self.s.ledger(state)
        held = self.s.desk.hold_back(state, ledger)  # harness evidence first: the failures may be the harness's
        ids = [] if held else self.s.book.enqueue_content(AnchorEntry.of(state).trajectory_ids, state["run_id"],
                                                          state["round"])
        fault_point("enqueue:done")
        known = set(state.get("queued", []))
        return {"queued": [i for i in ids if i not in known], "ledger": ledger.dump()}

    # -- roles --------------------------------------------------------------------------
    def analyst(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("analyst")
        feedback = [r for r in state.get("reviews", []) if r.get("send_back")]
        patterns, failures = self.s.desk.analyse(AnchorEntry.of(state).trajectory_ids, feedback, state)
        self.s.progress.note(f"round {state['round']}: analyst found {len(patterns)} pattern(s)")
        dropped = [{"pattern": None, "round": state["round"], "reason": reason} for reason in failures]
        dropped += self.s.desk.unplanned
        return {"patterns": patterns, "reviews": [] if not feedback else state.get("reviews", []),
                "dropped": dropped}

    def critic(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("critic")
        previous = {r["pattern_id"]: r for r in state.get("reviews", [])}
        reviews = self.s.desk.critique(state["patterns"], AnchorEntry.of(state).trajectory_ids, previous)
        return {"reviews": reviews}

    def engineer(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("engineer:start")
        candidates, dropped = self.s.desk.engineer(state["patterns"], state["reviews"], state["round"],
                                              state.get("rejected", []))
        fault_point("engineer:done")
        self.s.progress.note(f"round {state['round']}: {len(candidates)} candidate(s), {len(dropped)} dropped")
        return {"candidates": candidates, "dropped": dropped}

    # -- verification and merge ------------------------------------------------------------
    def verify(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("verify:start")
        ledger, anchor = self.s.ledger(state), AnchorEntry.of(state)
        verdicts = []
        for cand in state["candidates"]:
            structlog.contextvars.bind_contextvars(candidate=cand["branch"])
            verdicts.append(self.s.gate.verify(cand, anchor, ledger, state["round"], state.get("guards")))
            fault_point("verify:candidate")
        structlog.contextvars.unbind_contextvars("candidate")
        return {"verdicts": verdicts, "ledger": ledger.dump()}

    def review(self, state: RunState) -> dict[str, Any]:
        """Human gate: interrupt with the accepted candidates; resume with {branch: approve|reject}."""
        accepted = [v for v in state["verdicts"] if v["accepted"]]
        if not accepted:
            return {"decisions": {}}
        decisions = interrupt({"run_id": state["run_id"], "round": state["round"],
                               "candidates": [{"branch": v["candidate"], "commit": v["commit"],
                                               "reason": v["reason"]} for v in accepted]})
        return {"decisions": dict(decisions or {})}

    def merge(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("merge:start")
        decisions = state.get("decisions") or {}
        merged, rejected = self.s.gate.settle(state["candidates"], state["verdicts"], decisions, state["round"])
        fault_point("merge:done")
        return {"merged": merged, "rejected": rejected}

    def reanchor(self, state: RunState) -> dict[str, Any]:
        """After a merge, main gets a fresh anchor: the bar for the next round, not the candidate's reading."""
        self._bind(state)
        fault_point("reanchor:start")
        ledger = self.s.ledger(state)
        merged_now = [m for m in state.get("merged", []) if m["round"] == state["round"]]
        before = anchor = AnchorEntry.of(state)
        optimism = None
        guards = state.get("guards") or {}
        if merged_now:
            anchor = self.s.book.measure_anchor(self.s.repo.main_head(), ledger, round=state["round"])
            optimism = merged_now[-1]["reading"] - anchor.mean
            guards = self.s.gate.pin_fixed(before, anchor, state["round"], guards)
        fault_point("reanchor:done")
        summary = {
            "round": state["round"],
            "anchor_before": before.mean,
            "fresh_anchor": anchor.mean if merged_now else None,
            "anchor_commit": anchor.commit,
            "selection_optimism": optimism,
            "composition": state.get("composition"),
            "candidates": [{**c, "verdict": next((v for v in state["verdicts"] if v["candidate"] == c["branch"]),
                                                 None)} for c in state.get("candidates", [])],
            "accommodation_flags": sum(1 for r in state.get("reviews", []) if r.get("accommodation")),
            "reviews": len(state.get("reviews", [])),
            "merged": [m["branch"] for m in merged_now],
            "budget_left": ledger.left,
        }
        streak = 0 if merged_now else state.get("no_accept_streak", 0) + 1
        self.s.progress.note(
            f"round {state['round']}: merged {len(merged_now)}; anchor {summary['anchor_before']:.3f}"
            + (f" -> fresh {anchor.mean:.3f}" if merged_now else "") + f"; budget left {ledger.left:g}")
        update: dict[str, Any] = {"rounds": [summary], "round": state["round"] + 1, "ledger": ledger.dump(),
                                  "no_accept_streak": streak, "candidates": [], "verdicts": [], "patterns": [],
                                  "reviews": [], "decisions": {}, "guards": guards}
        if merged_now:
            update["anchor"] = anchor.dump()
            update["anchors"] = [anchor.dump()]
        return update

    def finish(self, state: RunState) -> dict[str, Any]:
        self._bind(state)
        fault_point("finish:start")
        ledger = self.s.ledger(state)
        main = self.s.repo.main_head()
        dev = self.s.book.composition_of(AnchorEntry.of(state).trajectory_ids)
        heldout = self.s.book.evaluate(main, "heldout", ledger, round=state.get("round", 0))
        fault_point("finish:done")
        reason = self.s.stopping.stop_reason(state)
        return {"after": {"dev": dev, "heldout": heldout}, "status": "done", "stop_reason": reason["reason"],
                "recommendation": reason["recommendation"], "ledger": ledger.dump()}
