"""The verification plan's progress line says what a plan without targeted tasks means."""

from __future__ import annotations

from types import SimpleNamespace

from evoharness.graph.gate import planned
from evoharness.harness_repo.models import Candidate

CANDIDATE = Candidate(branch="candidate/r2-loop-guard", commit="c" * 40, base="b" * 40, targets="F3.repeated_action")


def test_a_plan_with_no_targeted_task_says_its_behaviour_cannot_be_measured():
    """Walk's service run: a pattern seen only in the ingested traces became a candidate, and the line read
    'verifying candidate/r2-... (F3.repeated_action): 0 targeted + 0 control tasks, ~None rollouts needed for the
    predicted effect'."""
    plan = SimpleNamespace(selection=SimpleNamespace(targeted=[], control=[]), rollouts_needed=None)
    assert planned(CANDIDATE, plan) == ("  verifying candidate/r2-loop-guard (F3.repeated_action): 0 targeted + 0 "
                                        "control tasks, no task where F3.repeated_action fired: its behaviour cannot "
                                        "be measured here")
    plan = SimpleNamespace(selection=SimpleNamespace(targeted=["a", "b"], control=["c"]), rollouts_needed=4)
    assert planned(CANDIDATE, plan).endswith("2 targeted + 1 control tasks, ~4 rollouts needed for the predicted "
                                             "effect")
