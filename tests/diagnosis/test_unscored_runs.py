"""A run with no outcome (AutoGen AgentChat, an AG2 chat, an OTLP trace without a score, ...) and no failure signal
is ``unknown``: neither healthy nor a failure. Every such delivered run was ``F4.poor_delivery`` ("unscored delivery")
and, routed to the weights lever, recommended for training. A failure-only log's and a scored run's are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main
from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.judge import LLMJudge
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass, Lever
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import load_paths

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
MAGENTIC = TRACES / "autogen" / "magentic_one_messages.json"  # AgentChat: no outcome, no signal fires


def _quiet_run():
    return TraceBuilder("t").user("What is 2 + 2?").deliver("4")


def test_an_unscored_run_with_no_signal_is_unknown_not_a_failure():
    [t] = list(load_paths([MAGENTIC]))
    assert t.score is None and t.delivered and not t.meta.get("failure_only")
    lab = Labeller().label(t)
    assert (lab.failure_class, lab.first_signal, lab.lever) == (FailureClass.unknown, None, Lever.none)
    assert Labeller().first_signal(t) == (FailureClass.unknown, None)
    comp = Composition.from_labels([lab])
    assert comp.counts["unknown"] == 1 and comp.shares["F4"] == 0 and not comp.top_signals
    assert "Unknown" in comp.table()


def test_the_same_run_scored_or_from_a_failure_only_log_is_still_poor_delivery():
    lab = Labeller()
    assert lab.label(_quiet_run().build(score=0.0)).first_signal.id == "F4.poor_delivery"
    failure_only = _quiet_run().build(score=None)
    failure_only.meta["failure_only"] = True  # Who&When, AgentRx: known to have failed
    assert lab.label(failure_only).first_signal.id == "F4.poor_delivery"
    assert lab.label(_quiet_run().build(score=None)).failure_class == FailureClass.unknown
    assert lab.label(_quiet_run().build(score=1.0)).failure_class == FailureClass.healthy


def test_diagnose_lists_no_failing_step_and_routes_nothing_for_it(capsys):
    assert main(["diagnose", str(MAGENTIC), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["composition"]["unknown"] == 1.0 and out["recommendation"]["lever"] == "none"
    assert out["trajectories"][0]["failure_class"] == "unknown"
    assert main(["diagnose", str(MAGENTIC)]) == 0
    text = capsys.readouterr().out
    assert "Failing step" not in text and "1 delivered with no failure signal and no outcome: class unknown" in text


def test_a_composition_without_unknown_runs_keeps_its_columns():
    comp = Composition.from_labels([Labeller().label(_quiet_run().build(score=0.0))])
    assert set(comp.to_dict()["composition"]) == {"healthy", "F1", "F2", "F3", "F4", "E"}
    assert "Unknown" not in comp.table()


def test_the_llm_judge_is_not_asked_where_an_unknown_run_failed():
    asked: list[str] = []

    def model(prompt: str) -> str:  # its prompt says "The run failed": not so for a run with no outcome
        asked.append(prompt)
        return '{"failed_here": true, "failure_class": "F4", "step": 1, "agent": "", "quote": "", "reason": "x"}'

    [t] = list(load_paths([MAGENTIC]))
    lab = LLMJudge(model).label(t)
    assert (lab.failure_class, lab.labeller, asked) == (FailureClass.unknown, "rules", [])
