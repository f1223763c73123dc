"""First-signal ordering, tie-breaks, healthy threshold, routing, order independence."""

from __future__ import annotations

import random

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller, label_all, label_trajectory
from evoharness.diagnosis.models import FailureClass, Lever
from evoharness.diagnosis.routing import recommend
from evoharness.traces.builder import TraceBuilder


def looping(task="t", n=3):
    b = TraceBuilder(task, id=f"{task}#loop").user("x")
    for _ in range(n):
        b.call("f", {"q": 1}, result="ok")
    return b


def test_earliest_signal_decides_the_class():
    # a loop at step 5, then an invented id in the answer at step 6: F3 wins
    t = looping().deliver("booked ZZ9999").build(score=0.0)
    lab = label_trajectory(t)
    assert lab.failure_class == FailureClass.F3
    assert lab.first_signal.id == "F3.repeated_action"
    assert {s.id for s in lab.signals} >= {"F3.repeated_action", "F1.unbacked_claim", "F4.poor_delivery"}
    assert lab.lever == Lever.harness


def test_tie_at_one_step_breaks_f2_before_f3():
    b = TraceBuilder().user("x").call("f", {}, result="Error: blocked")
    b.event("blocked_call", "not allowed", step=1).end("step_budget")
    lab = label_trajectory(b.build(score=0.0))
    ids_at_1 = [s.id for s in lab.signals if s.step == 1]
    assert ids_at_1[0].startswith("F2.")
    assert lab.failure_class == FailureClass.F2


def test_tie_f1_before_f4_at_the_answer():
    t = TraceBuilder().user("x").deliver("your code is QQ1234").build(score=0.0)
    lab = label_trajectory(t)
    assert lab.first_signal.id == "F1.unbacked_claim"
    assert lab.lever == Lever.weights


def test_healthy_keeps_signals_and_threshold_is_configurable():
    t = looping().deliver("ok").build(score=0.8)
    assert label_trajectory(t).failure_class == FailureClass.F3
    lab = label_trajectory(t, DiagnosisConfig(healthy_threshold=0.75))
    assert lab.failure_class == FailureClass.healthy
    assert lab.first_signal is None and lab.signals  # still recorded
    assert lab.lever == Lever.none


def test_unscored_is_never_healthy():
    t = TraceBuilder().user("x").deliver("answer").build(score=None, meta={"failure_only": True})
    lab = label_trajectory(t)
    assert lab.failure_class == FailureClass.F4 and not lab.scored


def test_fallback_when_no_detector_fires():
    lab = Labeller(detectors=[]).label(TraceBuilder().user("x").deliver("a").build(score=0.2))
    assert lab.failure_class == FailureClass.F4 and lab.first_signal.id == "F4.poor_delivery"
    lab = Labeller(detectors=[]).label(TraceBuilder().user("x").build(score=0.0))
    assert lab.failure_class == FailureClass.F3 and lab.first_signal.id == "F3.no_delivery"


def test_routing_policy_is_a_table():
    t = TraceBuilder().user("x").deliver("a").build(score=0.0)
    cfg = DiagnosisConfig(routing={"healthy": "none", "F1": "weights", "F2": "harness", "F3": "harness",
                                   "F4": "harness"})
    assert label_trajectory(t, cfg).lever == Lever.harness


def test_labels_do_not_depend_on_record_order():
    trajs = [looping(f"t{i}").build(score=0.0) for i in range(3)]
    trajs += [TraceBuilder(f"h{i}", id=f"h{i}").user("x").deliver("a").build(score=1.0) for i in range(3)]
    trajs += [TraceBuilder(f"n{i}", id=f"n{i}").user("x").build(score=0.0) for i in range(3)]
    base = {lab.trajectory_id: lab.model_dump() for lab in label_all(trajs)}
    for seed in range(5):
        shuffled = trajs[:]
        random.Random(seed).shuffle(shuffled)
        assert {lab.trajectory_id: lab.model_dump() for lab in label_all(shuffled)} == base
    comp = Composition.from_labels(label_all(trajs))
    assert comp.counts == {"healthy": 3, "F1": 0, "F2": 0, "F3": 6, "F4": 0, "E": 0}
    assert abs(comp.delivery_rate - 1 / 3) < 1e-9


def test_ceiling_recommends_weights_when_process_share_is_low():
    trajs = [TraceBuilder(f"c{i}", id=f"c{i}").user("x").deliver("a").build(score=0.0) for i in range(19)]
    trajs.append(looping("p").build(score=0.0))
    rec = recommend(Composition.from_labels(label_all(trajs)), DiagnosisConfig(ceiling_process_share=0.1))
    assert rec.ceiling and rec.lever == "weights" and "weight training" in rec.message
    trajs += [looping(f"p{i}").build(score=0.0) for i in range(10)]
    rec = recommend(Composition.from_labels(label_all(trajs)))
    assert not rec.ceiling and rec.lever == "weights"


def test_a_failed_conversation_is_not_located_at_its_closing_pleasantry():
    b = TraceBuilder().user("cancel my trip").say("I need the reservation id to cancel; I cannot look it up.")
    b.user("Thanks anyway.").say("You're welcome! Feel free to reach out. Safe travels!")
    b.user("Bye ###STOP###").deliver("Thank you! Have a great day!")
    lab = label_trajectory(b.build(score=0.0))  # the refusal: F4.stalled (located) and F4.poor_delivery both say 1
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.stalled", 1)
    assert any(s.id == "F4.poor_delivery" and s.step == 1 for s in lab.signals)
    # a last reply with substance (a figure) is the delivery itself
    b = TraceBuilder().user("how many bags?").say("Let me check.").user("ok")
    lab = label_trajectory(b.deliver("Thank you for waiting: you can take 3 bags.").build(score=0.0))
    assert lab.first_signal.step == 3


def test_a_closing_reply_that_states_an_outcome_or_action_is_the_delivery_not_a_pleasantry():
    # no digit, opens with thanks, under 300 characters -- and carries the claim the run failed on
    outcomes = ["Thanks, your refund is done.", "Thank you! I have cancelled the reservation. Have a great day!",
                "You're welcome! You're all set for Friday.", "No problem, the booking has been updated.",
                "Thank you. Unfortunately, I cannot remove a passenger; please call the airline.",
                "Thank you! I'm transferring you to a human agent now."]
    for reply in outcomes:
        b = TraceBuilder().user("refund my trip").say("I can help with that. Which trip?").user("The Paris one.")
        lab = label_trajectory(b.deliver(reply).build(score=0.0))
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.poor_delivery", 3), reply
    # waiting or wishing states nothing done: still a pleasantry, the run is located before it
    for reply in ["No problem! Once that's done, feel free to reach out. Take care!",
                  "You're welcome! I hope everything is resolved soon. Safe travels!"]:
        b = TraceBuilder().user("refund my trip").say("I need the trip's id; I cannot look it up.").user("Thanks.")
        lab = label_trajectory(b.deliver(reply).build(score=0.0))
        assert lab.first_signal.step == 1, reply


def test_classify_gives_labels_class_first_signal_and_signals_on_the_vendored_sets():
    # the export takes (class, first signal) from classify, not label: they must never disagree
    from pathlib import Path

    from evoharness.traces.importers import iter_files, load_file

    labeller = Labeller()
    data = Path(__file__).resolve().parents[1] / "fixtures" / "data"
    seen = set()
    for path in iter_files([data]):
        for t in load_file(path):
            lab = labeller.label(t)
            cls, first, signals = labeller.classify(t)
            assert (cls, first, signals) == (lab.failure_class, lab.first_signal, lab.signals), t.id
            seen.add(cls)
    assert len(seen) >= 3  # healthy and failure classes both checked
    for t in (TraceBuilder().user("x").deliver("a").build(score=0.2), TraceBuilder().user("x").build(score=0.0)):
        lab = Labeller(detectors=[]).label(t)  # the fallbacks when nothing fires
        assert Labeller(detectors=[]).classify(t) == (lab.failure_class, lab.first_signal, lab.signals)
