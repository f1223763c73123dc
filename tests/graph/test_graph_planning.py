"""Round planning: rejected signals make way for the next ones; no ceiling verdict while a process signal
above the noise floor has not had its candidate."""

from __future__ import annotations

from types import SimpleNamespace

from evoharness.diagnosis.models import Lever
from evoharness.graph.planning import RoundPlanner
from evoharness.roles.models import Pattern


def label(signal: str | None, lever: Lever = Lever.harness):
    return SimpleNamespace(lever=lever, first_signal=SimpleNamespace(id=signal) if signal else None)


def planner(counts: dict[str, int], healthy: int = 10) -> RoundPlanner:
    labels = [label(s) for s, n in counts.items() for _ in range(n)] + [label(None, Lever.none)] * healthy
    book = SimpleNamespace(load=lambda ids: ids, labels=lambda trajs: labels)
    return RoundPlanner(book, min_support=2, floor=0.05)


def pattern(signal: str, pid: str | None = None) -> Pattern:
    return Pattern(id=pid or f"p-{signal}", signal=signal, failure_class=signal[:2], surface="prompts/system.md")


COUNTS = {"F2.format_rejected": 12, "F3.repeated_action": 8, "F3.no_delivery": 6, "F2.blocked_call": 1}


def state(rounds=(), dropped=(), anchor_round=0):
    """A run's state as the nodes store it (read back through `graph.state.Typed`)."""
    anchor = {"commit": "c", "round": anchor_round, "k": 1, "tasks": ["t"], "trajectory_ids": ["x"], "mean": 0.5,
              "sigma": 0.1, "composition": {}, "anchor": {}}
    rounds = [{"anchor_before": 0.5, "anchor_commit": "c", "budget_left": 100.0, **r} for r in rounds]
    dropped = [{"reason": "test", **d} for d in dropped]
    return {"anchor": anchor, "rounds": rounds, "dropped": dropped, "round": len(rounds) + 1}


def test_signals_rejected_against_this_anchor_make_way_for_the_next():
    p = planner(COUNTS)
    analyst = [pattern("F2.format_rejected"), pattern("F3.repeated_action"), pattern("F3.no_delivery")]
    tried = [{"targets": "F2.format_rejected"}, {"targets": "F3.repeated_action"}]
    s = state(rounds=[{"round": 1, "candidates": tried}])
    assert [x.signal for x in p.filter(analyst, s, 2)] == ["F3.no_delivery"]
    # after a merge (a fresh anchor at round 1) every signal may be tried again
    fresh = state(rounds=s["rounds"], anchor_round=1)
    assert [x.signal for x in p.filter(analyst, fresh, 2)] == ["F2.format_rejected", "F3.repeated_action"]


def test_no_ceiling_while_a_signal_above_the_floor_is_untried():
    p = planner(COUNTS)
    s = state(rounds=[{"round": 1, "candidates": [{"targets": "F2.format_rejected"}]},
                      {"round": 2, "candidates": [{"targets": "F3.repeated_action"}]}])
    assert p.untried(s) == ["F3.no_delivery"]  # blocked_call (1 rollout) is below the floor's support
    # a signal the analyst had no pattern for counts as tried: planning ends
    unplanned = p.unplanned([pattern("F2.format_rejected")], s)
    assert [d.signal for d in unplanned] == ["F3.no_delivery"]
    assert p.untried(state(rounds=s["rounds"], dropped=[d.dump() for d in unplanned])) == []


def test_evidence_patterns_count_until_tried():
    p = planner({})
    s = state(dropped=[{"pattern": "p-revert-abc", "round": 1}])
    assert p.untried(s, ["p-revert-abc", "p-lint-x-0"]) == ["p-lint-x-0"]
