"""Issue 13's held-back SWE properties on nebius' ``SWE-agent-trajectories`` rows (SWE-agent 0.x, the windowed editor
as shell commands: tests/fixtures/traces/nebius_swe_agent, hand-written in the dataset's columns). A resolved run stays
Healthy; an edit -> re-run cycle is no F3 and a linter refusal fixed on the next turn no F2; an unresolved run fails
where the change its delivered patch keeps was first written -- not at reproduce.py's writes (the script is gone from
the patch), nor at the last message."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_file

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "nebius_swe_agent" / "sample.jsonl"
PROCESS = ("F2", "F3")


def _runs(score: float | None = None):
    runs = list(load_file(SAMPLE))
    return runs if score is None else [t.model_copy(update={"score": score}) for t in runs]


def _step_of(t, command_start: str, nth: int = 0) -> int:
    steps = [i for i, m in enumerate(t.messages) for c in m.get("tool_calls") or ()
             if c["function"]["arguments"].startswith('{"command": "' + command_start)]
    return steps[nth]


@pytest.mark.parametrize("run", [0, 1], ids=["straight", "refusal-and-cycle"])
def test_a_resolved_run_is_healthy(run):
    t = _runs(1.0)[run]
    lab = Labeller().label(t)
    assert (lab.failure_class.value, lab.first_signal, lab.signals) == ("healthy", None, [])


def test_the_refused_edit_and_the_edit_rerun_cycle_are_no_process_failure():
    t = _runs()[1]
    assert t.score == 0.0 and any(e.type == "tool_error" for e in t.events)  # the linter's refusal
    assert sum(c.args["command"] == "python reproduce.py" for c in t.tool_calls()) == 3
    signals = Labeller().label(t).signals
    assert [s.id for s in signals if s.id.startswith(PROCESS)] == []


def test_an_unresolved_run_fails_at_the_first_write_of_the_kept_change():
    straight = _runs(0.0)[0]
    lab = Labeller().label(straight)
    fix = _step_of(straight, "edit 8:8")
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", fix)
    assert fix > _step_of(straight, "edit 1:1") and fix < len(straight.messages) - 1  # not reproduce.py, not the end
    assert lab.first_signal.evidence.endswith("(the open file: tinyconf/parse.py)")


def test_a_refused_edit_of_the_same_change_is_where_the_change_starts():
    """The linter refused the first edit of line 8 (no indentation); the next, the same change indented, went
    through: the change starts at the refused one (docs/diagnosis.md, "A refused edit then an accepted one")."""
    t = _runs()[1]
    lab = Labeller().label(t)
    refused, accepted = _step_of(t, "edit 8:8", 0), _step_of(t, "edit 8:8", 1)
    assert t.messages[refused + 1]["content"].startswith("Your proposed edit has introduced new syntax error(s)")
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", refused)
    assert f"the same change went through at step {accepted}" in lab.first_signal.evidence


def test_a_run_stopped_by_the_cost_limit_is_f3():
    t = _runs()[2]
    assert Labeller().label(t).first_signal.id.startswith("F3.")
