"""The run summary names things once and consistently: seed anchor, rounds, superseded candidates."""

from __future__ import annotations

from evoharness.graph.summary import _by_round, split_rejected, summary_text

SPENDS = [
    {"round": 0, "purpose": "anchor", "units": 100}, {"round": 0, "purpose": "evaluation", "units": 50},
    {"round": 1, "purpose": "candidate", "units": 30}, {"round": 1, "purpose": "anchor", "units": 100},
    {"round": 2, "purpose": "candidate", "units": 20}, {"round": 3, "purpose": "baseline", "units": 10},
    {"round": 4, "purpose": "evaluation", "units": 50},  # the closing held-out evaluation after 3 rounds
]


def _data(rejected):
    anchors = [{"round": 0, "commit": "a" * 40, "mean": 0.4, "sigma": 0.02, "k": 4},
               {"round": 1, "commit": "b" * 40, "mean": 0.5, "sigma": 0.02, "k": 4}]
    return {"run_id": "r", "stop_reason": "round limit", "before": {}, "after": {}, "anchors": anchors,
            "merged": [{"branch": "candidate/r1-a", "commit": "c" * 40, "merge_commit": "d" * 40}],
            "rejected": rejected, "dropped": [], "accommodation_share": None, "queued": 0,
            "budget": {"spent": 360, "total": 1000, "rollouts": 90, "by_purpose": {}},
            "harness_repo": "h", "main": "d" * 40, "files": {}}


def test_budget_by_round_has_seed_rounds_and_final_only():
    assert _by_round(SPENDS, completed=3) == {"seed": 150, "1": 130, "2": 20, "3": 10, "final": 50}


def test_superseded_candidates_are_not_listed_as_rejected_and_anchors_say_which_round_they_bar():
    rejected = [{"branch": "candidate/r1-b", "commit": "e" * 40, "reason": "gain below noise", "superseded_by": None},
                {"branch": "candidate/r1-c", "commit": "f" * 40, "superseded_by": "candidate/r1-a",
                 "reason": "accepted but superseded by candidate/r1-a (main moved: re-verify next round)"}]
    assert [r["branch"] for r in split_rejected(rejected)[0]] == ["candidate/r1-b"]
    text = summary_text(_data(rejected))
    assert "Rejected (1):\n  candidate/r1-b" in text
    assert "Accepted, not merged: another candidate of the round was merged (1):\n  candidate/r1-c" in text
    assert "  seed:            0.400" in text and "the bar of round 1" in text
    assert "  after round 1:   0.500" in text and "the bar of round 2" in text


def test_a_failed_analyst_is_listed_by_its_round_not_as_none():
    """The analyst's failure is a dropped entry without a pattern: the summary printed 'None: analyst failed: ...'
    and the report 'round 1, None: ...' (a run with roles.kind = llm whose model gave no reply)."""
    from evoharness.reports.report import lists

    data = _data([])
    data["dropped"] = [{"pattern": None, "round": 1, "reason": "analyst failed: no reply left"},
                       {"pattern": "p-F3", "round": 1, "reason": "engineer: no fix to propose"}]
    text = summary_text(data)
    assert "Dropped before verification (2):\n  round 1: analyst failed: no reply left\n  p-F3: engineer" in text
    assert lists(data)["dropped"] == ["round 1: analyst failed: no reply left",
                                      "round 1, p-F3: engineer: no fix to propose"]
    assert "None" not in text
