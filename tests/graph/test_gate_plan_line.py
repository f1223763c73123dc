"""The verification plan's progress line says what a plan without targeted tasks means, in a real run."""

from __future__ import annotations

import io
import json
import re

from evoharness.graph.progress import Progress
from evoharness.graph.runner import start_run
from evoharness.harness_repo.repo import HarnessRepo

BLOCKED = "F2.blocked_call"  # the synthetic env never blocks a call: no dev task where it fires


def blocked(tid: str) -> dict:
    """A production trace whose calls the harness blocked three times, never delivered (F2.blocked_call)."""
    msgs = [{"role": "system", "content": "You are the agent."}, {"role": "user", "content": "Cancel order 42."}]
    events = []
    for i in range(3):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{i}", "type": "function",
            "function": {"name": "cancel_order", "arguments": json.dumps({"id": 42, "try": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "cancel_order", "content": "blocked by policy"})
        events.append({"type": "blocked_call", "step": 2 + 2 * i, "data": {"call_id": f"c{i}", "tool": "cancel_order"}})
    return {"id": tid, "task_id": f"task-{tid}", "split": "unknown", "model": "prod", "messages": msgs,
            "events": events, "final_answer": None, "score": 0.0, "termination": "step_budget", "usage": {"steps": 3}}


def test_a_candidate_whose_target_fired_on_no_task_says_so_and_is_rejected(make_settings, tmp_path):
    """Walk's service run: a pattern seen only in the ingested traces became a candidate, and its line read
    'verifying candidate/r2-... (F3.repeated_action): 0 targeted + 0 control tasks, ~None rollouts needed for the
    predicted effect'. A real run with production traces of a signal the env's tasks never show: the candidate
    made for it says its behaviour cannot be measured and is rejected; the one for the env's own signal plans
    its rollouts."""
    prod = tmp_path / "prod.jsonl"
    prod.write_text("".join(json.dumps(blocked(f"prod-{i}")) + "\n" for i in range(3)))
    settings = make_settings(rollouts=2, max_rounds=1, dev_limit=8, heldout_limit=2, evidence=[prod])
    stream = io.StringIO()
    assert start_run(settings, progress=Progress(stream=stream)).done
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines() if "] " in line]
    repo = HarnessRepo(settings.run.harness)
    cand = next(c for c in map(repo.candidate, repo.branches()) if c.targets == BLOCKED)
    assert f"  verifying {cand.branch} ({BLOCKED}): 0 targeted + 0 control tasks, no task where {BLOCKED} " \
           "fired: its behaviour cannot be measured here" in lines
    verdict = repo.verdict_of(cand.commit)[1]
    assert not verdict.accepted and verdict.measurements["targeted_tasks"] == 0
    assert f"  {cand.branch}: reject ({verdict.reason})" in lines
    loop = [line for line in lines if line.startswith("  verifying candidate/") and "(F3.repeated_action)" in line]
    assert len(loop) == 1, loop
    assert re.search(r" ~(1 rollout|[0-9,]+ rollouts) needed for the predicted effect$", loop[0]), loop
    assert "None" not in loop[0]


def test_the_plan_line_counts_one_rollout_in_the_singular():
    """The demo's first plan line read '~1 rollouts needed for the predicted effect' (review helper, 2026-12-07)."""
    from types import SimpleNamespace

    from evoharness.graph.gate import planned

    cand = SimpleNamespace(branch="candidate/r1-x", targets="F3.repeated_action")
    for needed, said in ((1, "~1 rollout needed"), (2, "~2 rollouts needed"), (1200, "~1,200 rollouts needed")):
        plan = SimpleNamespace(selection=SimpleNamespace(targeted=["t1"], control=[]), rollouts_needed=needed)
        assert planned(cand, plan) == ("  verifying candidate/r1-x (F3.repeated_action): 1 targeted + 0 control "
                                       f"tasks, {said} for the predicted effect")
