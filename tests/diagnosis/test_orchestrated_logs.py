"""Attribution in orchestrator-led logs (Magentic-One shapes), on the project's own synthetic fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import human_label, prediction_of
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.multiagent import CONTROL, is_ledger
from evoharness.traces.importers import load_paths

SYNTHETIC = Path(__file__).resolve().parents[1] / "fixtures" / "magentic_synthetic"
EXPECTED = {  # file -> the signal that carries the principle
    "origin_not_relay": "F4.answer_origin",
    "plan_guess": "F4.answer_origin",
    "unreached_success": "F4.accepted_report",
    "failure_report_accepted": "F4.accepted_report",
    "stall_bare_ledger": "F4.no_progress",
    "failed_script": "F4.first_commitment",
    "no_evidence": "F4.first_commitment",
}


def _runs() -> dict[str, object]:
    return {t.id.rsplit(":", 1)[-1]: t for t in load_paths([SYNTHETIC])}


def test_the_synthetic_set_is_whole():
    assert set(_runs()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_principle_names_its_step_and_agent(name):
    t = _runs()[name]
    truth = human_label(t)
    lab = Labeller().label(t)
    got = prediction_of(t, lab)
    assert lab.first_signal.id == EXPECTED[name], lab.first_signal
    assert (got.step, got.agent) == (truth.step, truth.agent), json.loads((SYNTHETIC / f"{name}.json").read_text())[
        "principle"]


def test_a_bare_json_ledger_is_a_ledger_and_no_claim():
    # AutoGen 0.2's orchestrator prints its progress ledger as the JSON object alone: before, only a ledger headed
    # "Updated Ledger" was read, so its "no progress" went unseen and the run fell back to the orchestrator's first
    # instruction; its reasons' numbers were read as the orchestrator's claims
    bare = json.dumps({"is_request_satisfied": {"reason": "r", "answer": False},
                       "is_progress_being_made": {"reason": "350 cookies at 180 degrees", "answer": False}}, indent=4)
    assert is_ledger(bare) and is_ledger("Updated Ledger:\n" + bare) and CONTROL.match(bare)
    assert not is_ledger('{"answer": 42}') and not is_ledger("The ledger says is_request_satisfied")
    t = _runs()["stall_bare_ledger"]
    ids = {s.id: s.step for s in Labeller().label(t).signals}
    assert ids.get("F4.no_progress") == 4 and "F1.unsupported_fact" not in ids


def test_a_ledger_the_orchestrator_could_not_parse_is_no_claim():
    # Magentic-One 0.2 logs "Failed to parse ledger information: <the raw ledger>" as the orchestrator's (error): its
    # reasons' numbers were read as the orchestrator stating new facts
    t = _runs()["stall_bare_ledger"]
    raw = '{"is_request_satisfied": {"reason": "The page lists 4,310 entries from 2,871 sources", "answer": false'
    t.messages.insert(5, {"role": "assistant", "name": "Orchestrator",
                          "content": "Failed to parse ledger information: " + raw})
    assert CONTROL.match(t.messages[5]["content"])
    assert "F1.unsupported_fact" not in {s.id for s in Labeller().label(t).signals}
