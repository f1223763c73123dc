"""The thirteenth pass's labelling cuts (docs/benchmarks.md, "thirteenth session").

- Labelling a run leaves no reference cycle behind: a memo a detector keeps on the view (``AgentLog``, the calls
  that went through) holds the view's parts, not the view, so the run, its view and everything the detectors
  derived are freed when the caller drops the run, not when the garbage collector next runs (before, every failed
  run's whole trajectory waited for a collection). Checked on every run of the vendored fixtures but the held-out
  sets (tau-bench airline, Who&When Algorithm-Generated, mini-swe-agent, OpenHands, SWE-agent, tau2, ...), labelled
  with the collector off.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import iter_files, load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HELD_OUT = ("Hand-Crafted", "agentrx_magentic_one", "agentrx_tau", "swe_blind2")  # never labelled here


def _fixture_files() -> list[Path]:
    return [f for f in iter_files([FIXTURES / "data", FIXTURES / "traces"])
            if not any(h in str(f) for h in HELD_OUT)]


@pytest.fixture
def collector_off():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_a_labelled_run_is_freed_when_dropped_without_the_garbage_collector(collector_off) -> None:
    labeller = Labeller()
    kept: list[str] = []
    failed = 0
    for f in _fixture_files():
        try:
            runs = list(load_file(f))
        except Exception:  # noqa: BLE001 -- a fixture no importer reads (a README, a licence) has no run to label
            continue
        while runs:
            traj = runs.pop()
            failed += labeller.label(traj).failure_class != "healthy"
            ref = weakref.ref(traj)
            del traj
            if ref() is not None:
                kept.append(f"{f.relative_to(FIXTURES)}: {ref().id}")
    assert failed >= 30  # the failed runs are the ones every detector reads
    assert kept == []
    assert gc.collect() == 0  # nothing else of a label waits for the collector either

