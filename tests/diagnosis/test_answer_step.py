"""Where a run delivered its final answer (``answer_step``): the last message that holds the whole answer, not a later
one that merely begins as it does. The step F4.poor_delivery, F4.stalled and the claim check (F1.unbacked_claim) name.
"""

from __future__ import annotations

import json

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

ANSWER = "The mayor who opened the Lakeview public library was Eleanor Whitcombe, in office when it was built."


def _who_when(tmp_path, history):
    path = tmp_path / "Algorithm-Generated" / "1.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"question": "Who was the mayor that opened Lakeview's public library?",
                                "history": history, "mistake_agent": "Librarian_Expert", "mistake_step": "1"}))
    [traj] = load_paths([path])
    return traj


def test_the_delivery_is_the_message_with_the_whole_answer_not_a_later_one_that_begins_as_it_does(tmp_path):
    """A Who&When log: the FINAL ANSWER (step 2) is the delivery; the verifier after it repeats the answer's first 60
    characters and goes on otherwise. Before, the answer's first 50 characters found the verifier's message, the
    latest that held them: the failed delivery was the verifier's (step 3), not the expert's who gave the answer."""
    traj = _who_when(tmp_path, [
        {"role": "assistant", "name": "Librarian_Expert", "content": "The library's plaque names the mayor."},
        {"role": "assistant", "name": "History_Expert", "content": f"FINAL ANSWER: {ANSWER}"},
        {"role": "assistant", "name": "Verification_Expert",
         "content": ANSWER[:60] + "? I cannot confirm that from the plaque myself. TERMINATE"},
    ])
    assert traj.final_answer == ANSWER
    lab = Labeller().label(traj)
    delivery = next(s for s in lab.signals if s.id == "F4.poor_delivery")
    assert (delivery.step, traj.messages[delivery.step]["name"]) == (2, "History_Expert")


def test_a_later_message_that_repeats_the_whole_answer_is_still_the_delivery(tmp_path):
    """The latest message holding the whole answer stays the delivery, as before (a sign-off quoting it)."""
    traj = _who_when(tmp_path, [
        {"role": "assistant", "name": "Librarian_Expert", "content": "The library's plaque names the mayor."},
        {"role": "assistant", "name": "History_Expert", "content": f"FINAL ANSWER: {ANSWER}"},
        {"role": "assistant", "name": "Verification_Expert", "content": f"Agreed:\n{ANSWER}\nTERMINATE"},
    ])
    lab = Labeller().label(traj)
    assert next(s for s in lab.signals if s.id == "F4.poor_delivery").step == 3
