"""Issue 13's held-back SWE properties on nebius' ``SWE-agent-trajectories`` rows (SWE-agent 0.x, the windowed editor
as shell commands: tests/fixtures/traces/nebius_swe_agent, hand-written in the dataset's columns). A resolved run stays
Healthy; an edit -> re-run cycle is no F3 and a linter refusal fixed on the next turn no F2; an unresolved run fails
where the change its delivered patch keeps was first written -- not at reproduce.py's writes (the script is gone from
the patch), nor at the last message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_file
from evoharness.traces.importers.nebius_swe_agent import command

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


def _as_traj(row: dict, version: str) -> dict:
    """The row as SWE-agent saves the run in a ``.traj``: 0.x (history of ``{role, content, agent}``, the assistant's
    ``thought`` / ``action``, a demonstration marked ``is_demo``) or 1.x (history with ``message_type``, ``trajectory``
    steps of ``action`` / ``observation`` / ``thought`` / ``response`` / ``query``); ``info.submission`` the patch."""
    turns, agent = row["trajectory"], "primary" if version == "0.x" else "main"
    typed = (lambda kind: {"message_type": kind}) if version == "1.x" else (lambda kind: {})
    history = [{"role": "system", "content": turns[0]["system_prompt"], "agent": agent, **typed("system_prompt")}]
    if version == "0.x":
        history.append({"role": "user", "content": "Here is a demonstration ...", "agent": agent, "is_demo": True})
    history.append({"role": "user", "content": turns[1]["text"], "agent": agent, **typed("observation")})
    steps = []
    for i, turn in enumerate(turns[2:], 2):
        if turn["role"] == "user":
            history.append({"role": "user", "content": turn["text"], "agent": agent, **typed("observation")})
            continue
        action = command(turn["text"]) + "\n"
        thought = turn["text"].split("```")[0].strip()
        history.append({"role": "assistant", "content": turn["text"], "thought": thought, "action": action,
                        "agent": agent, **typed("action")})
        observation = turns[i + 1]["text"] if i + 1 < len(turns) else ""
        steps.append({"action": action, "observation": observation, "thought": thought, "response": turn["text"],
                      "query": [{"role": "system", "content": history[0]["content"]}]})
    delivered = row["exit_status"].startswith("submitted")
    return {"environment": "swe_main", "trajectory": steps, "history": history,
            "info": {"exit_status": row["exit_status"], "submission": row["generated_patch"] if delivered else None,
                     **({"swe_agent_version": "1.0.1"} if version == "1.x" else {})}}


@pytest.mark.parametrize("version", ["0.x", "1.x"])
def test_the_same_run_saved_as_a_traj_gets_the_same_labels(tmp_path, version):
    """The ``swe-agent`` importer reads SWE-agent 0.x and 1.x ``.traj`` files of these runs as the rows are read:
    the same messages step for step (a 0.x demonstration left out), the same labels, resolved or not."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    for n, (row, t) in enumerate(zip(rows, _runs(), strict=True)):
        path = tmp_path / str(n) / f"{row['instance_id']}.traj"
        path.parent.mkdir()
        path.write_text(json.dumps(_as_traj(row, version)))
        (traj,) = load_file(path)
        assert [m["content"] for m in traj.messages] == [m["content"] for m in t.messages]
        assert (traj.termination, traj.final_answer, traj.events) == (t.termination, t.final_answer, t.events)
        for score in (0.0, 1.0):
            a, b = (Labeller().label(x.model_copy(update={"score": score})) for x in (traj, t))
            assert (a.failure_class, a.first_signal, a.signals) == (b.failure_class, b.first_signal, b.signals)
