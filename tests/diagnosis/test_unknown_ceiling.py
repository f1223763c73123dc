"""The lever shares and the ceiling are read over the runs with a verdict: an ``unknown`` run (unscored, no failure
signal: neither healthy nor a failure, 9a600e5) is left out of them, as unscored runs are left out of the mean
score. Counted in, 97 quiet unscored traces beside 5 known failures read as a 2% process share and 'ceiling:
recommend weight training', as if the 97 were healthy."""

from __future__ import annotations

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.routing import Router
from evoharness.traces.builder import TraceBuilder


def _labels(unknown: int, f4: int, f3: int, healthy: int = 0):
    lab = Labeller()
    quiet = [lab.label(TraceBuilder(f"u{i}").user("What is 2 + 2?").deliver("4").build(score=None))
             for i in range(unknown)]
    poor = [lab.label(TraceBuilder(f"p{i}").user("What is 2 + 2?").deliver("5").build(score=0.0)) for i in range(f4)]
    none = [lab.label(TraceBuilder(f"n{i}").user("What is 2 + 2?").build(score=0.0)) for i in range(f3)]
    good = [lab.label(TraceBuilder(f"h{i}").user("What is 2 + 2?").deliver("4").build(score=1.0))
            for i in range(healthy)]
    return quiet + poor + none + good


def test_unknown_runs_do_not_dilute_the_lever_shares_into_a_ceiling():
    with_unknown = Router().recommend(Composition.from_labels(_labels(97, 3, 2)))
    without = Router().recommend(Composition.from_labels(_labels(0, 3, 2)))
    assert not with_unknown.ceiling and with_unknown.lever == without.lever == "weights"
    assert abs(with_unknown.harness_share - without.harness_share) < 1e-9 and abs(without.harness_share - 0.4) < 1e-9
    assert abs(with_unknown.weights_share - without.weights_share) < 1e-9
    assert "97" in with_unknown.message and "unknown" in with_unknown.message
    assert "unknown" not in without.message


def test_healthy_runs_still_count_and_all_unknown_routes_nothing():
    mostly_healthy = Router().recommend(Composition.from_labels(_labels(50, 0, 1, healthy=97)))
    assert mostly_healthy.ceiling and abs(mostly_healthy.harness_share - 1 / 98) < 1e-9
    only_unknown = Router().recommend(Composition.from_labels(_labels(4, 0, 0)))
    assert (only_unknown.lever, only_unknown.ceiling) == ("none", False)
    assert only_unknown.message.startswith("no failures")


def test_a_runs_ceiling_reads_the_anchor_shares_the_same_way():
    shares = Composition.from_labels(_labels(97, 3, 2)).shares
    assert Router().stop_reason(shares) is None
    assert Router().stop_reason(Composition.from_labels(_labels(0, 3, 0, healthy=97)).shares) is not None



def test_failures_no_lever_repairs_are_not_called_no_failures(capsys):
    """A set whose only failures are E (the environment broke the task: routed to neither lever) was 'no failures:
    nothing to route', as if every run had gone well: `diagnose` on the OTLP sample (1 E run, 3 unknown)."""
    import json
    from pathlib import Path

    from evoharness.cli import main

    otlp = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "otlp"
    assert main(["diagnose", str(otlp), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    failures = {c: k for c, k in out["counts"].items() if k and c not in ("healthy", "unknown")}
    assert failures == {"E": 1}  # the case under test: failures, none of them a lever's
    rec = out["recommendation"]
    assert (rec["lever"], rec["ceiling"]) == ("none", False)
    assert not rec["message"].startswith("no failures") and "1 E" in rec["message"], rec["message"]
