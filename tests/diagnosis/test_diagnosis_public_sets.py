"""On the full public single-agent sets: successes stay Healthy, friction the agent recovered from and
edit -> re-run cycles are never the first signal, and failures are located before the last message."""

from __future__ import annotations

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import friction_occurrences
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths


def _labels(path):
    labeller = Labeller()
    return [(t, labeller.label(t)) for t in load_paths([path])]


def test_tau_bench_successes_stay_healthy_and_failures_are_located_before_the_end(full_shared_data):
    pairs = _labels(full_shared_data / "tau_bench_airline_gpt4o")
    assert sum(lab.failure_class == "healthy" for t, lab in pairs if t.score == 1.0) == 84
    # not even a process signal is recorded in a successful run (a held-back set may read every signal)
    assert not [s.id for t, lab in pairs if t.score == 1.0 for s in lab.signals if s.id[:2] in ("F2", "F3")]
    failures = [(t, lab) for t, lab in pairs if lab.failure_class != "healthy"]
    assert len(failures) == 116
    at_end = sum(lab.first_signal.step == t.assistant_steps()[-1] for t, lab in failures)
    # at the last assistant message only where it says something (not "You're welcome!"): 6 of 116
    assert at_end <= len(failures) / 10, f"{at_end} of {len(failures)} failures located at the last message"
    for t, lab in failures:  # friction as the first signal only when unrecovered
        if lab.failure_class == "F2":
            view = TraceView.of(t)
            turns = {view.turn_of(s) for items in friction_occurrences(view).values() for s, _ in items}
            nxt = view.next_turn(view.turn_of(lab.first_signal.step))
            assert nxt is None or nxt in turns, lab.first_signal


def test_mini_swe_resolved_runs_stay_healthy_and_no_rejection_or_rerun_is_the_failure(full_shared_data):
    pairs = _labels(full_shared_data / "mini_swe_agent_sample")
    assert sum(lab.failure_class == "healthy" for _, lab in pairs) == sum(t.score == 1.0 for t, _ in pairs) == 10
    # a resolved run rejected twice in a row (django-14631) recovered: no friction signal is recorded
    assert not [s.id for _, lab in pairs for s in lab.signals if s.id[:2] in ("F2", "F3")]
    firsts = [lab.first_signal.id for _, lab in pairs if lab.failure_class != "healthy"]
    assert len(firsts) == 10
    assert not [f for f in firsts if f in ("F2.format_rejected", "F3.repeated_action")], firsts
