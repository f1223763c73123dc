"""Multi-agent text logs: the failing step and agent, not the last message."""

from __future__ import annotations

import json

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.models import Trajectory


def _log(turns: list[tuple[str, str]], task: str = "How many athletes did the smallest team send?") -> Trajectory:
    msgs = [{"role": "user", "content": task}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="ma", task_id="ma", task=task, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def test_fabricated_data_is_the_failing_step_and_names_its_agent():
    t = _log([
        ("Planner_Expert", "You are given: (1) a task and advises from your manager with a specific plan"),
        ("Data_Expert", "I will search the web for the 1928 results."),
        ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: ConnectionError"),
        ("Data_Expert", "The download failed, so let's simulate the dataset and proceed."),
        ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: CHN 1"),
        ("Verification_Expert", "FINAL ANSWER: CHN"),
    ])
    lab = Labeller().label(t)
    assert lab.first_signal.id == "F1.unsupported_fact"
    assert lab.first_signal.step == 4 and t.messages[4]["name"] == "Data_Expert"
    assert "simulat" in lab.first_signal.evidence


def test_orchestrator_ledger_without_progress_points_at_the_judged_action():
    ledger = {"is_progress_being_made": {"reason": "The search returned unrelated pages.", "answer": False},
              "is_in_loop": {"reason": "no", "answer": False}}
    t = _log([
        ("Orchestrator", "Initial plan:\n1. WebSurfer: find the page"),
        ("Orchestrator", "Please search for the 1928 Olympics athletes by country."),
        ("WebSurfer", "I typed '1928 olympics' into the search bar. Here is a screenshot of a cooking blog."),
        ("Orchestrator", "Updated Ledger:\n" + json.dumps(ledger, indent=2)),
        ("Orchestrator", "Please open Wikipedia instead."),
        ("WebSurfer", "I clicked 'Wikipedia'."),
        ("Orchestrator", "FINAL ANSWER: CUB"),
    ])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.no_progress", 3)
    assert "unrelated pages" in lab.first_signal.evidence


def test_site_refusal_is_a_guardrail_and_quiet_logs_fall_back_to_the_first_commitment():
    blocked = _log([
        ("Orchestrator", "Please look up the census page."),
        ("WebSurfer", "I clicked 'census'. The page says: Access Denied. Please complete the CAPTCHA."),
        ("Orchestrator", "FINAL ANSWER: 12"),
    ])
    lab = Labeller().label(blocked)
    assert (lab.failure_class, lab.first_signal.step) == ("F2", 2)
    quiet = _log([
        ("Orchestrator", "Please look up the census page."),
        ("WebSurfer", "I clicked 'census'."),
        ("Orchestrator", "FINAL ANSWER: 12"),
    ])
    lab = Labeller().label(quiet)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_commitment", 1)


def test_single_agent_tool_traces_are_not_read_as_multi_agent():
    t = (TraceBuilder("t").user("cancel order 42").call("get_order", {"id": 42}, result="order 42: pending")
         .deliver("Let's assume it is cancelled.").build(score=0.0))
    ids = {s.id for s in Labeller().label(t).signals}
    assert not ids & {"F1.unsupported_fact", "F4.no_progress", "F2.guardrail", "F4.first_commitment"}
