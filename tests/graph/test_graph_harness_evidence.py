"""A defect planted on main is found (its commit by the history bisect, or the linter when there is no
history), repaired by a verified merge, and its failures never reach the training queue."""

from __future__ import annotations

import json
import subprocess

from evoharness.diagnosis.models import FailureClass, Label, Signal
from evoharness.graph.culprit_signals import MIN_SHARE, bisect_signals, culprit_hits
from evoharness.graph.runner import start_run
from evoharness.harness_repo.init import init_harness

TRUNCATE = "def after_tool(call, result, ctx):\n    return result[:12]\n"
# a seed with the loop guard and the exit gate on (as benchmarks/planted_flaws.py): loops and silent endings
# would otherwise hide what the truncation costs
CONTROLS = ("max_steps: 12\nloop_guard:\n  enabled: true\n  max_repeats: 2\ncheckpoint_nudge:\n  enabled: false\n"
            "  every: 4\nexit_gate:\n  enabled: true\nrepair_tool_calls: false\n")


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def plant(root, rel, text, amend=False):
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", *(["--amend"] if amend else []), "-m", "seed" if amend else "shorter tool results")
    return git(root, "rev-parse", "HEAD")


def queued_commits(outcome):
    trajs = {}
    for line in (outcome.run_dir / "trajectories.jsonl").read_text().splitlines():
        t = json.loads(line)
        trajs[t["id"]] = t["harness_commit"]
    return {trajs[i] for i in outcome.state.get("queued", [])}


def test_a_planted_commit_is_bisected_reverted_and_kept_out_of_the_queue(make_settings):
    settings = make_settings(model="standin:weak", max_rounds=2)
    repo = init_harness(settings.run.harness)
    plant(repo.path, "policies.yaml", CONTROLS)
    bad = plant(repo.path, "middleware/shorten.py", TRUNCATE)
    outcome = start_run(settings)
    evidence = json.loads((outcome.run_dir / "harness_evidence.json").read_text())
    assert any(c["commit"] == bad and c["paths"] == ["middleware/shorten.py"] for c in evidence[bad]["culprits"])
    merged = outcome.state["merged"]
    assert merged and merged[0]["branch"].startswith("candidate/r1-revert-")
    assert "middleware/shorten.py" not in git(repo.path, "ls-tree", "-r", "--name-only", "main")
    assert bad not in queued_commits(outcome)
    assert git(repo.path, "log", "--format=%P", "-1", "main").count(" ") == 1  # main moved by a merge


def test_without_history_the_linter_finds_it_and_the_middleware_is_removed(make_settings):
    settings = make_settings(model="standin:weak", max_rounds=2)
    repo = init_harness(settings.run.harness)
    plant(repo.path, "policies.yaml", CONTROLS, amend=True)
    bad = plant(repo.path, "middleware/shorten.py", TRUNCATE, amend=True)  # one commit: nothing to bisect
    outcome = start_run(settings)
    evidence = json.loads((outcome.run_dir / "harness_evidence.json").read_text())
    assert evidence[bad]["culprits"] == []
    assert outcome.state["merged"], outcome.state.get("rejected")
    assert "middleware/shorten.py" not in git(repo.path, "ls-tree", "-r", "--name-only", "main")
    assert bad not in queued_commits(outcome)


def test_without_history_a_middleware_that_rewrites_arguments_is_removed(make_settings):
    settings = make_settings(model="standin:weak", max_rounds=2)
    repo = init_harness(settings.run.harness)
    plant(repo.path, "policies.yaml", CONTROLS, amend=True)
    lower = ("def before_tool(call, ctx):\n    args = {k: v.lower() if isinstance(v, str) else v "
             "for k, v in call['arguments'].items()}\n    return {**call, 'arguments': args}\n")
    bad = plant(repo.path, "middleware/normalise.py", lower, amend=True)  # one commit: nothing to bisect
    outcome = start_run(settings)
    assert outcome.state["merged"], outcome.state.get("rejected")
    assert "middleware/normalise.py" not in git(repo.path, "ls-tree", "-r", "--name-only", "main")
    assert bad not in queued_commits(outcome)


def test_without_history_a_lesson_dictating_the_reply_is_cut_by_what_the_answers_show(make_settings):
    settings = make_settings(model="standin:weak", max_rounds=2)
    repo = init_harness(settings.run.harness)
    plant(repo.path, "policies.yaml", CONTROLS, amend=True)
    lesson = "### Replies\nReply with 'Done, see above.' when the task is finished.\n"
    bad = plant(repo.path, "lessons.md", lesson, amend=True)  # one commit: nothing to bisect, no wording rule
    outcome = start_run(settings)
    assert outcome.state["merged"], outcome.state.get("rejected")
    assert "Done, see above." not in git(repo.path, "show", "main:lessons.md")
    assert bad not in queued_commits(outcome)


def _lab(i, cls, *sigs):
    return Label(trajectory_id=f"t{i}", task_id=f"task{i % 7}", failure_class=cls,
                 signals=[Signal(id=s, failure_class=s.split(".")[0], step=1) for s in sigs])


def test_the_bisect_counts_a_signal_among_the_failed_rollouts():
    """The anchor of benchmarks/planted_flaws.py --set unseen's policy_exit_gate_off (no_delivery healthy firings
    gone): 56 rollouts, 19 failed, 8 of them silent endings. 8 of 56 is under MIN_SHARE, 8 of 19 failures is not."""
    labels = ([_lab(i, FailureClass.F3, "F3.no_delivery") for i in range(8)]
              + [_lab(i, FailureClass.F4, "F4.poor_delivery") for i in range(8, 19)]
              + [_lab(i, FailureClass.healthy, "F2.blocked_call") for i in range(19, 24)]
              + [_lab(i, FailureClass.healthy) for i in range(24, 56)])
    assert 8 / 56 < MIN_SHARE <= 8 / 19
    assert bisect_signals(labels, 2) == ["F4.poor_delivery", "F3.no_delivery"]  # blocked_call: healthy runs only
    assert bisect_signals(labels, 9) == ["F4.poor_delivery"]  # min_support, counted among failures too
    assert bisect_signals([lab for lab in labels if lab.failure_class == FailureClass.healthy], 2) == []


def test_the_bisect_takes_the_most_failures_first_and_breaks_ties_by_id():
    sigs = ["F3.step_budget_exhausted", "F3.repeated_action", "F3.no_delivery", "F2.tool_error"]
    labels = [_lab(i, FailureClass.F3, *sigs[:3]) for i in range(6)] + [_lab(6, FailureClass.F3, sigs[3])]
    labels += [_lab(7, FailureClass.F2, sigs[3])]
    assert bisect_signals(labels, 2) == ["F3.no_delivery", "F3.repeated_action", "F3.step_budget_exhausted"]
    assert bisect_signals(list(reversed(labels)), 2) == bisect_signals(labels, 2)


def test_a_culprits_evidence_quotes_failed_rollouts_first():
    """A loop guard's blocks fire on runs that got past them too: the evidence quotes the runs that failed."""
    labels = ([_lab(i, FailureClass.healthy, "F2.blocked_call") for i in range(4)]
              + [_lab(i, FailureClass.F2, "F2.blocked_call") for i in range(4, 6)] + [_lab(6, FailureClass.F4)])
    assert [lab.trajectory_id for lab, _ in culprit_hits(labels, "F2.blocked_call")] == ["t4", "t5", "t0"]
    assert [s.id for _, s in culprit_hits(labels, "F2.blocked_call")] == ["F2.blocked_call"] * 3


def test_a_planted_exit_gate_off_is_bisected_by_its_silent_failures(make_settings):
    """policy_exit_gate_off as benchmarks/planted_flaws.py plants it: the runs that end on an empty reply are found at
    the commit that turned the gate off, though those that scored (a message sent, then silence) no longer fire
    F3.no_delivery; its failures are not queued for training."""
    settings = make_settings(model="standin:weak", max_rounds=2, budget=20000)
    repo = init_harness(settings.run.harness)
    plant(repo.path, "policies.yaml", CONTROLS)
    gate_off = CONTROLS.replace("exit_gate:\n  enabled: true", "exit_gate:\n  enabled: false")
    assert gate_off != CONTROLS
    bad = plant(repo.path, "policies.yaml", gate_off)
    outcome = start_run(settings)
    evidence = json.loads((outcome.run_dir / "harness_evidence.json").read_text())
    assert [(c["commit"], c["signal"]) for c in evidence[bad]["culprits"]] == [(bad, "F3.no_delivery")]
    assert bad not in queued_commits(outcome)
