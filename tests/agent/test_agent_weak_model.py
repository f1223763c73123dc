"""The scripted weak model: deterministic, fails by process on the seed harness, and each harness fix
it is documented to respond to cuts those failures while its content failures remain."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from evoharness.agent.runner import run_rollout
from evoharness.diagnosis.labeller import label_all
from evoharness.diagnosis.models import Lever
from evoharness.envs import get_environment
from tests.agent.conftest import FIXED_POLICIES, FORMAT_LESSON

SEEDS = range(4)

LOOP_GUARD_AND_REPAIR = '''
"""Hand-written middleware: repair non-JSON tool arguments, block a call repeated a third time."""
import ast
import json


def after_model(message, ctx):
    for tc in message.get("tool_calls") or []:
        try:
            json.loads(tc["function"]["arguments"])
        except ValueError:
            try:
                tc["function"]["arguments"] = json.dumps(ast.literal_eval(tc["function"]["arguments"]))
            except (ValueError, SyntaxError):
                pass
    return message


def before_tool(call, ctx):
    key = call["name"] + json.dumps(call["arguments"], sort_keys=True)
    seen = ctx["scratch"].setdefault("seen", {})
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 2:
        return "Blocked: you already made this exact call twice. Move on or give your final answer."
    return None
'''


def rollouts(h: Path, env: str, tasks: list[str], model: str = "scripted:weak", commit: str | None = None):
    return [run_rollout(h, env, t, model, s, harness_commit=commit) for t in tasks for s in SEEDS]


def process_share(trajs) -> float:
    labels = label_all(trajs, None)
    return sum(lab.lever == Lever.harness for lab in labels) / len(labels)


def events(trajs) -> Counter:
    return Counter(e.type for t in trajs for e in t.events)


@pytest.fixture(scope="module")
def workspace_tasks() -> list[str]:
    return [t.id for t in get_environment("agentdojo:workspace").list_tasks("dev")[:8]]


def test_same_seed_same_trajectory_different_seed_differs(harness):
    h = harness()
    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")]
    a = [run_rollout(h, "synthetic", t, "scripted:weak", 7).model_dump(exclude={"usage"}) for t in tasks]
    b = [run_rollout(h, "synthetic", t, "scripted:weak", 7).model_dump(exclude={"usage"}) for t in tasks]
    c = [run_rollout(h, "synthetic", t, "scripted:weak", 8).model_dump(exclude={"usage"}) for t in tasks]
    assert a == b
    assert a != c


def test_weak_model_on_workspace_harness_fixes_cut_process_failures(harness, workspace_tasks, tmp_path):
    seed_h = harness("seed")
    fixed_h = harness("fixed", policies=FIXED_POLICIES, lessons=FORMAT_LESSON)
    base, fixed = rollouts(seed_h, "agentdojo:workspace", workspace_tasks), \
        rollouts(fixed_h, "agentdojo:workspace", workspace_tasks)
    ev = events(base)
    assert ev["format_rejected"] + ev["invalid_arguments"] > 0 and ev["budget_exhausted"] > 0
    assert any(t.final_answer is None for t in base)
    assert process_share(base) >= 0.3
    assert process_share(fixed) <= process_share(base) - 0.15
    assert sum(t.delivered for t in fixed) > sum(t.delivered for t in base)
    assert sum(t.score for t in fixed) > sum(t.score for t in base)
    # content failures remain: some delivered rollouts still fail the suite's utility check
    assert any(t.delivered and t.score == 0.0 for t in fixed)


def test_hand_written_middleware_committed_to_harness_cuts_process_failures(harness, workspace_tasks):
    h = harness("mw", lessons="", files={"middleware/guard.py": LOOP_GUARD_AND_REPAIR})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(h)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "repair + loop guard middleware"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    base = rollouts(harness("seed"), "agentdojo:workspace", workspace_tasks)
    with_mw = rollouts(h, "agentdojo:workspace", workspace_tasks, commit=sha)
    assert all(t.harness_commit == sha for t in with_mw)
    assert events(with_mw)["format_rejected"] < events(base)["format_rejected"]
    assert process_share(with_mw) < process_share(base)


def test_each_failure_mode_reads_its_signal(harness):
    tasks = [t.id for t in get_environment("synthetic").list_tasks("all")]
    many = range(6)

    def run(h):
        return [run_rollout(h, "synthetic", t, "scripted:weak", s) for t in tasks for s in many]

    base = run(harness("seed"))
    lesson = run(harness("lesson", lessons=FORMAT_LESSON))
    gate = run(harness("gate", policies={"exit_gate": {"enabled": True}}))
    guard = run(harness("guard", policies={"loop_guard": {"enabled": True, "max_repeats": 2},
                                           "checkpoint_nudge": {"enabled": True, "every": 3}}))

    def malformed(ts):
        e = events(ts)
        return e["format_rejected"] + e["invalid_arguments"]

    assert malformed(lesson) < malformed(base) / 2          # a format lesson lowers the malformed rate
    aborted = lambda ts: sum(t.termination == "aborted" for t in ts)  # noqa: E731
    assert aborted(base) > 0 and aborted(gate) == 0         # the exit gate makes it deliver
    budget = lambda ts: sum(t.termination == "step_budget" for t in ts)  # noqa: E731
    assert budget(guard) < budget(base) / 2                 # loop guard + nudge end repeats and stalls


def test_oracle_follows_ground_truth(harness, workspace_tasks):
    trajs = rollouts(harness(), "agentdojo:workspace", workspace_tasks, model="scripted:oracle")
    assert all(t.delivered for t in trajs)
    assert not events(trajs)
    assert sum(t.score for t in trajs) / len(trajs) >= 0.75
