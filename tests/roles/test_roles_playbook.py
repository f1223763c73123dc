"""Playbook roles: signals mapped to standard fixes, never re-proposed, accommodation flagged."""

from __future__ import annotations

import pytest
import yaml

from evoharness.errors import EditRejected
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.roles import make_roles
from evoharness.roles.config import RolesConfig
from evoharness.roles.fixes import update_policies
from evoharness.roles.models import Evidence, HarnessView, Pattern
from evoharness.roles.playbook import PlaybookAnalyst, PlaybookCritic, PlaybookEngineer
from tests.roles.scenario import label, looping, scenario, seed_view

FIXED_POLICIES = """\
# Harness policies read by the reference agent.
max_steps: 12
loop_guard:
  enabled: true
  max_repeats: 3
checkpoint_nudge:
  enabled: true
  every: 4
exit_gate:
  enabled: true
repair_tool_calls: true
"""


def test_analyst_finds_process_patterns_most_common_first_and_skips_content():
    trajs, labels = scenario()
    patterns = PlaybookAnalyst().analyse(trajs, labels, seed_view(), max_patterns=5)
    assert [p.signal for p in patterns] == ["F3.repeated_action", "F2.invalid_arguments"]
    loop = patterns[0]
    assert loop.count == 3 and loop.share == 0.6 and loop.surface == "policies.yaml"
    assert loop.task_ids == ["task-a", "task-b", "task-c"]
    assert [e.step for e in loop.evidence] == [6, 6, 6]
    cited = {e.trajectory_id for p in patterns for e in p.evidence}
    assert "t6" not in cited and "t7" not in cited  # content failure and healthy never reach the engineer


def test_analyst_respects_max_patterns_and_returns_nothing_for_content_only():
    trajs, labels = scenario()
    assert len(PlaybookAnalyst().analyse(trajs, labels, seed_view(), max_patterns=1)) == 1
    assert PlaybookAnalyst().analyse(trajs[5:], labels[5:], seed_view(), max_patterns=2) == []


def test_pipeline_edits_policies_by_round_trip_and_appends_a_lesson():
    trajs, labels = scenario()
    analyst, critic, engineer = make_roles("playbook", RolesConfig())
    view = seed_view()
    pattern = analyst.analyse(trajs, labels, view, 2)[0]
    review = critic.review(pattern, view, trajs, labels)
    assert review.approved and not review.accommodation and review.attribution_ok
    assert review.predicted_flips == ["task-a", "task-b", "task-c"]
    edit = engineer.propose(pattern, review, view)
    assert edit is not None and edit.targets == "F3.repeated_action"
    files = {c.path: c.content for c in edit.changes}
    pol = yaml.safe_load(files["policies.yaml"])
    assert pol["loop_guard"] == {"enabled": True, "max_repeats": 2}
    assert pol["max_steps"] == 12 and pol["checkpoint_nudge"] == {"enabled": False, "every": 4}
    assert files["policies.yaml"].startswith("# Harness policies read by the reference agent.\n")
    assert "### Do not repeat an identical tool call" in files["lessons.md"]
    assert edit.evidence == ["t1@6", "t2@6", "t3@6"] and edit.predicted_flips == review.predicted_flips
    assert "INJECTION" not in edit.rationale and "scorer" not in edit.rationale


def test_playbook_edit_is_accepted_by_the_harness_repo(tmp_path):
    init_harness(tmp_path / "h")
    repo = HarnessRepo(tmp_path / "h")
    view = HarnessView.from_repo(repo)
    assert view.commit == repo.main_head() and "policies.yaml" in view.files
    assert view.is_protected("harness.toml") and view.editable("lessons.md")
    trajs, labels = scenario()
    analyst, critic, engineer = make_roles("playbook", None)
    for pattern in analyst.analyse(trajs, labels, view, 2):
        edit = engineer.propose(pattern, critic.review(pattern, view, trajs, labels), view)
        cand = repo.create_candidate(edit, round=1)
        assert cand.targets == pattern.signal and cand.branch.startswith("candidate/r1-")


def test_a_fix_already_in_the_harness_is_not_proposed_again():
    trajs, labels = scenario()
    lessons = "### Do not repeat an identical tool call\nchange the arguments.\n"
    view = seed_view(**{"policies.yaml": FIXED_POLICIES, "lessons.md": lessons})
    patterns = PlaybookAnalyst().analyse(trajs, labels, view, 5)
    assert "F3.repeated_action" not in [p.signal for p in patterns]
    stale = PlaybookAnalyst().analyse(trajs, labels, seed_view(), 1)[0]  # written against the old harness
    review = PlaybookCritic().review(stale, view, trajs, labels)
    assert not review.approved and "already" in review.notes
    assert PlaybookEngineer().propose(stale, review.model_copy(update={"approved": True}), view) is None


def test_raising_max_steps_alone_is_flagged_as_accommodation():
    trajs = [looping(f"s{i}", f"task-{i}") for i in range(3)]
    labels = [label(t, "F3.step_budget_exhausted", 9) for t in trajs]
    lessons = "### Always deliver\nDeliver.\n"
    fresh = PlaybookAnalyst().analyse(trajs, labels, seed_view(), 2)[0]
    first = PlaybookCritic().review(fresh, seed_view(), trajs, labels)
    assert first.approved and not first.accommodation  # nudge + exit gate fix a defect
    view = seed_view(**{"policies.yaml": FIXED_POLICIES, "lessons.md": lessons})
    pattern = PlaybookAnalyst().analyse(trajs, labels, view, 2)[0]
    review = PlaybookCritic().review(pattern, view, trajs, labels)
    assert review.accommodation and not review.approved and "max_steps 12 -> 16" in review.notes
    assert PlaybookEngineer().propose(pattern, review, view) is None


def test_critic_sends_back_misattributed_evidence_and_refuses_thin_support():
    trajs, labels = scenario()
    pattern = Pattern(id="p-F3.repeated_action", signal="F3.repeated_action", failure_class="F3",
                      evidence=[Evidence(trajectory_id="t4", task_id="task-d", step=3)], count=1,
                      surface="policies.yaml")
    review = PlaybookCritic().review(pattern, seed_view(), trajs, labels)
    assert not review.approved and not review.attribution_ok and review.send_back
    assert "t4" in review.notes
    review = PlaybookCritic(RolesConfig(min_support=4)).review(
        PlaybookAnalyst().analyse(trajs, labels, seed_view(), 1)[0], seed_view(), trajs, labels)
    assert not review.approved and "support 3 < 4" in review.notes and not review.send_back


def test_signals_with_the_same_fix_make_one_pattern():
    trajs, labels = scenario()
    labels[4] = label(trajs[4], "F2.format_rejected", 3)
    labels[3] = label(trajs[3], "F2.format_rejected", 3)
    trajs.append(looping("t9", "task-z"))
    labels.append(label(trajs[-1], "F2.invalid_arguments", 3))
    signals = [p.signal for p in PlaybookAnalyst().analyse(trajs, labels, seed_view(), 5)]
    assert signals == ["F3.repeated_action", "F2.format_rejected"]


def test_engineer_refuses_a_protected_surface():
    trajs, labels = scenario()
    view = seed_view().model_copy(update={"protected": ["harness.toml", "lessons.md"]})
    pattern = PlaybookAnalyst().analyse(trajs, labels, seed_view(), 1)[0]
    review = PlaybookCritic().review(pattern, seed_view(), trajs, labels)
    with pytest.raises(EditRejected, match="protected"):
        PlaybookEngineer().propose(pattern, review, view)


def test_update_policies_keeps_unknown_keys_and_order():
    text = "# top\nmax_steps: 12\ncustom: {a: 1}\nloop_guard:\n  enabled: false\n  max_repeats: 5\n"
    out = update_policies(text, {"loop_guard.enabled": True, "exit_gate.enabled": True})
    data = yaml.safe_load(out)
    assert list(data) == ["max_steps", "custom", "loop_guard", "exit_gate"]
    assert data["custom"] == {"a": 1} and data["loop_guard"] == {"enabled": True, "max_repeats": 5}
    assert out.startswith("# top\n")
    with pytest.raises(EditRejected):
        update_policies("- a list\n", {"x": 1})


def test_roles_satisfy_the_protocols_and_feedback_reaches_the_analyst():
    from evoharness.roles.base import Analyst, Critic, Engineer

    a, c, e = make_roles("playbook", None)
    assert isinstance(a, Analyst) and isinstance(c, Critic) and isinstance(e, Engineer)
    trajs, labels = scenario()
    fb = [{"pattern_id": "p-F3.repeated_action", "notes": "look at the tool results"}]
    p = a.analyse(trajs, labels, seed_view(), 1, feedback=fb)[0]
    assert p.root_cause.endswith("(critic: look at the tool results)")


def test_a_broken_policies_file_drops_the_candidate_with_a_reason_not_the_round():
    trajs, labels = scenario()
    view = seed_view(**{"policies.yaml": "max_steps: [12\n"})
    analyst, critic, engineer = make_roles("playbook", None)
    pattern = analyst.analyse(trajs, labels, view, 1)[0]
    with pytest.raises(EditRejected, match="cannot parse policies.yaml"):
        engineer.propose(pattern, critic.review(pattern, view, trajs, labels), view)


def test_the_critic_counts_an_evidence_fix_on_failed_runs_only():
    """A score signal recorded on a run that reached the healthy threshold explains no failure and has no score to
    flip (the linter and the culprit search count so too): before, the critic's support and predicted flips for a
    revert or lint fix counted such runs, so two healthy loops lifted a support of 3 past 4 and listed their tasks."""
    from evoharness.diagnosis.models import Signal
    from evoharness.roles.models import Culprit

    trajs, labels = scenario()
    for i, task in ((8, "task-h"), (9, "task-i")):  # a loop the run recovered from: the signal, the run healthy
        t = looping(f"t{i}", task)
        t.score = 1.0
        lab = label(t, None)
        lab.signals = [Signal(id="F3.repeated_action", failure_class="F3", step=6, evidence="3x search_emails")]
        trajs.append(t)
        labels.append(lab)
    sha = "c" * 40
    view = seed_view().model_copy(update={"culprits": [Culprit(
        commit=sha, subject="loosen the loop guard", signal="F3.repeated_action", before=0.0, after=0.6,
        paths=["policies.yaml"], task_ids=["task-a", "task-b", "task-c"])]})
    pattern = Pattern(id="p-revert", signal="F3.repeated_action", failure_class="F3",
                      evidence=[Evidence(trajectory_id="t1", task_id="task-a", step=6)], count=3,
                      surface="policies.yaml", fix=f"revert:{sha}")
    review = PlaybookCritic().review(pattern, view, trajs, labels)
    assert review.approved and review.predicted_flips == ["task-a", "task-b", "task-c"], review
    review = PlaybookCritic(RolesConfig(min_support=4)).review(pattern, view, trajs, labels)
    assert not review.approved and "support 3 < 4" in review.notes, review
