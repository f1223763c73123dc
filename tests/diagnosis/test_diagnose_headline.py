"""The text `diagnose` labels each run by ``Labeller.headline``: the export's first-signal search (no detector on a
Healthy run; on a failed one the fallback detectors only where no located signal fired, the claim check bounded by
the first signal found), since the text lists no signal and no violation. What it prints must be what the full
labels (``Labeller.label``) print -- also for the runs where skipping a detector would be wrong: a failed run whose
only signal is a fallback's (``F4.first_write``, ``F4.poor_delivery``), a policy violation that yields to the first
write, a claim first made before every other signal, and a run that is Healthy only under the default threshold."""

from __future__ import annotations

import json
import random

import pytest

from evoharness.cli import main
from evoharness.diagnosis.composition import Tally
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.report import composition_text, failing_step_line, failing_steps_text
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Termination, Trajectory
from tests.diagnosis.test_labelling_fourteenth_pass import _random_run

HEALTHY_TOO = {d.id for d in Labeller().detectors if not getattr(d, "skips_healthy", False)}
PRINTED = ("trajectory_id", "task_id", "failure_class", "first_signal", "lever", "scored", "score", "delivered",
           "agent", "quote", "labeller")


def _runs(shared_data) -> list[Trajectory]:
    """The vendored tau-bench and mini-swe-agent samples, and random tau-bench-like runs -- failed, and the same
    runs scored 1 and 0.5 (Healthy runs on which detectors fire; a run Healthy only under a lower threshold). A run
    scored 1 with no final answer ended at its step budget (the task done by a write, then the steps ran out): the
    budget's detector fires on a Healthy run too, where ``F3.no_delivery`` does not."""
    runs = list(load_paths([shared_data / "tau_bench_airline_gpt4o", shared_data / "mini_swe_agent_sample"]))
    runs += [t.model_copy(update={"id": f"{t.id}-half", "score": 0.5}) for t in runs]
    rnd = random.Random(25)
    for k in range(150):
        t = _random_run(rnd, k)
        score = (0.0, 1.0, 0.5)[k % 3]
        out = score == 1.0 and t.final_answer is None
        runs.append(t.model_copy(update={"score": score, **({"termination": Termination.step_budget} if out else {})}))
    return runs


def test_the_headline_is_the_label_on_every_printed_field(shared_data) -> None:
    for cfg in (DiagnosisConfig(), DiagnosisConfig(healthy_threshold=0.5)):
        lab = Labeller(cfg)
        runs = _runs(shared_data)
        fired_on_healthy = 0
        for t in runs:
            full, head = lab.label(t), lab.headline(t)
            assert {k: getattr(head, k) for k in PRINTED} == {k: getattr(full, k) for k in PRINTED}, t.id
            assert head.signals == [] and head.violations == []  # not looked for: the headline's reader reads neither
            fired_on_healthy += full.failure_class == "healthy" and bool(full.signals)
        assert fired_on_healthy > 10  # Healthy runs whose detectors fire: the headline ran none of them
        # runs scored 0.5 with a signal from a detector that does not skip Healthy runs: Healthy only under 0.5
        assert sum(t.score == 0.5 and any(s.id in HEALTHY_TOO for s in lab.label(t).signals) for t in runs) > 2
        firsts = {lab.label(t).first_signal.id for t in runs if lab.label(t).first_signal}
        # the cases where a skipped detector would change the answer were exercised: a fallback's signal first, a
        # policy violation first, the bounded claim check's signal first
        assert {"F4.first_write", "F4.policy_violation", "F1.unbacked_claim"} <= firsts, firsts


@pytest.mark.parametrize("threshold", [None, "0.5"])
def test_diagnose_prints_what_the_full_labels_print(shared_data, tmp_path, capsys, threshold) -> None:
    runs = _runs(shared_data)
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in runs))
    cfg = DiagnosisConfig() if threshold is None else DiagnosisConfig(healthy_threshold=float(threshold))
    tally, shown, failures = Tally(), [], 0
    for t in runs:  # the text as the full labels make it
        lab = Labeller(cfg).label(t)
        tally.add(lab)
        if lab.failure_class not in ("healthy", "unknown"):
            failures += 1
            shown.append(failing_step_line(lab))
    expected = failing_steps_text(shown, failures) + composition_text(tally.composition(), cfg)
    settings = [] if threshold is None else ["--set", f"diagnosis.healthy_threshold={threshold}"]
    assert main([*settings, "diagnose", str(path), "--show", str(len(runs))]) == 0
    out = capsys.readouterr().out
    assert out == expected + "\n"
    assert failures > 50 and "F4.first_write" in out and "F1.unbacked_claim" in out
    # --json lists every signal: the full labels' (a Healthy run's signals included)
    assert main([*settings, "diagnose", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["trajectories"]
    assert [r["signals"] for r in rows] == [[s.id for s in Labeller(cfg).label(t).signals] for t in runs]
