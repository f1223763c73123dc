"""A run repairs a harness defect that costs steps, not score, on a cost verdict; and while main holds a defect
named for what its rollouts cost, those rollouts are not queued as training data."""

from __future__ import annotations

import re
import subprocess

import yaml

from evoharness.config import Settings
from evoharness.diagnosis.labeller import label_trajectory
from evoharness.diagnosis.models import Lever
from evoharness.graph.progress import Progress
from evoharness.graph.runner import start_run
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.seed import POLICIES
from evoharness.traces.cost import cost_signals
from evoharness.traces.models import Trajectory

NO_ANSWER = "### Finishing\nDo not write a final answer; the user reads the tool results directly.\n"


def lesson_run(tmp_path, dev_limit: int = 6, **verification) -> tuple[dict, object]:
    """One `evoharness run` (stand-in, playbook roles) of a seed with its controls on and a lesson forbidding the
    answer: the loop guard blocks the calls the agent repeats instead of answering, and then it answers."""
    harness = tmp_path / "harness"
    init_harness(harness)
    policies = {**yaml.safe_load(POLICIES), "loop_guard": {"enabled": True, "max_repeats": 2},
                "exit_gate": {"enabled": True}}
    (harness / "policies.yaml").write_text(yaml.safe_dump(policies, sort_keys=False))
    (harness / "lessons.md").write_text(NO_ANSWER)
    subprocess.run(["git", "-C", str(harness), "-c", "user.name=t", "-c", "user.email=t@example.org", "commit",
                    "-qam", "controls on; a lesson"], check=True)
    settings = Settings.model_validate({
        "home": tmp_path / "state", "log_format": "json", "log_level": "error",
        "run": {"harness": harness, "env": "synthetic", "model": "standin:weak", "rollouts": 4, "max_rounds": 2,
                "budget": 20000, "checkpointer": "sqlite", "patience": 2, "dev_limit": dev_limit, "heldout_limit": 2},
        "sandbox": {"backend": "inprocess", "workers": 1}, "roles": {"kind": "playbook"},
        "verification": verification,
    })
    outcome = start_run(settings, progress=Progress(quiet=True))
    return outcome.state, harness


def git(harness, *args) -> str:
    return subprocess.run(["git", "-C", str(harness), *args], capture_output=True, text=True, check=True).stdout


def test_the_lesson_that_costs_steps_is_cut_on_a_cost_verdict(tmp_path):
    state, harness = lesson_run(tmp_path)
    assert len(state["merged"]) == 1
    message = git(harness, "log", "-1", "--format=%B", state["merged"][0]["merge_commit"])
    assert "Verified-Objective: cost" in message and "Reason: cost verdict (cost.blocked_call): all gates" in message
    assert "Do not write a final answer" not in git(harness, "show", "main:lessons.md")


def test_rollouts_a_named_harness_cause_explains_are_not_queued_when_its_cut_is_refused(tmp_path):
    """The cut refused (no score loss at all allowed, and the bound is never exactly 0): main keeps the lesson, and
    the anchor's content failures where its cost signal fired stay out of the training queue (any others go)."""
    state, harness = lesson_run(tmp_path, dev_limit=0, cost_score_margin=0.0)
    assert not state["merged"] and "Do not write a final answer" in git(harness, "show", "main:lessons.md")
    anchor = set(state["anchor"]["trajectory_ids"])
    runs = [t for t in _trajectories(tmp_path) if t.id in anchor]
    content = [t for t in runs if label_trajectory(t).lever == Lever.weights]
    blocked = {t.id for t in content if cost_signals(t)}
    assert blocked  # the weak agent's content failures here (F4): the guard blocked a call in each
    queued = set(state["queued"])
    assert not queued & blocked and queued == {t.id for t in content} - blocked


def _trajectories(tmp_path) -> list[Trajectory]:
    return [Trajectory.model_validate_json(line) for p in (tmp_path / "state" / "runs").glob("*/trajectories.jsonl")
            for line in p.read_text().splitlines() if line.strip()]


def test_a_run_whose_traces_record_tokens_judges_the_cut_on_tokens(tmp_path, monkeypatch):
    """The token path through a run: the stand-in made to report usage as an endpoint does (prompt tokens ~ the
    characters it read / 4, 8 completion tokens a reply), so every rollout records tokens and the cut of the lesson
    is judged on tokens -- fewer steps read fewer tokens -- with the verdict's figures and trailer saying so."""
    from evoharness.agent.standin import StandInModel

    plain = StandInModel.invoke

    def metered(self, messages, tools=None):
        reply = plain(self, messages, tools)
        read = sum(len(str(m.content or "")) for m in messages) // 4
        reply.usage_metadata = {"input_tokens": read, "output_tokens": 8, "total_tokens": read + 8}
        return reply

    monkeypatch.setattr(StandInModel, "invoke", metered)
    state, harness = lesson_run(tmp_path)
    runs = _trajectories(tmp_path)
    assert runs and all(t.usage.prompt_tokens > 0 and t.usage.completion_tokens == 8 * t.usage.steps for t in runs)
    assert len(state["merged"]) == 1
    message = git(harness, "log", "-1", "--format=%B", state["merged"][0]["merge_commit"])
    assert "Verified-Objective: cost (fewer tokens, score non-inferior)" in message
    read = re.search(r"Reason: cost verdict \(cost\.blocked_call\): all gates passed; tokens ([\d.]+) -> ([\d.]+) a "
                     r"rollout", message)
    assert read and float(read[2]) < float(read[1]), message
