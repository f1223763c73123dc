"""``Labeller.first_signal`` (the export's labelling: class and first signal, the fallback detectors run only when
no located signal fired) gives what ``classify`` gives, on every public trace set and the vendored fixtures."""

from __future__ import annotations

from pathlib import Path

from evoharness.diagnosis.detectors import FALLBACK_SIGNALS
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import iter_files, load_file
from evoharness.traces.models import Trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SETS = ("tau_bench_airline_gpt4o", "mini_swe_agent_sample", "who_and_when", "agentrx_magentic_one")


def _trajectories(roots: list[Path]) -> list[Trajectory]:
    out = []
    for f in iter_files([r for r in roots if r.is_dir()]):
        try:
            out.extend(load_file(f))
        except Exception:  # noqa: BLE001 -- a fixture no importer reads (a bad-input case) is no trajectory
            continue
    return out


def _same(trajs: list[Trajectory]) -> tuple[int, int]:
    lab = Labeller()
    failed_located = 0
    for t in trajs:
        cls, first, signals = lab.classify(t)
        assert lab.first_signal(t) == (cls, first), t.id
        failed_located += cls != "healthy" and any(s.id not in FALLBACK_SIGNALS for s in signals) \
            and any(s.id in FALLBACK_SIGNALS for s in signals)
    return len(trajs), failed_located


def test_first_signal_is_classify_on_the_fixtures():
    n, both = _same(_trajectories([FIXTURES / "data", FIXTURES / "traces"]))
    assert n >= 40 and both > 0  # failed runs where a fallback detector fired beside a located one: skipped now


def test_first_signal_is_classify_on_the_public_sets(full_shared_data):
    n, both = _same(_trajectories([full_shared_data / s for s in SETS]))
    assert n >= 450 and both > 0


def test_first_signal_runs_a_fallback_detector_only_when_nothing_located_fired():
    class Counting:
        def __init__(self, inner):
            self.inner, self.id, self.failure_class, self.calls = inner, inner.id, inner.failure_class, 0
            for flag in ("multi_agent_only", "reads_friction"):
                if hasattr(inner, flag):
                    setattr(self, flag, getattr(inner, flag))

        def detect(self, view, cfg):
            self.calls += 1
            return self.inner.detect(view, cfg)

    lab = Labeller()
    lab = Labeller(detectors=[Counting(d) for d in lab.detectors])
    fallback = [d for d in lab.detectors if d.id in FALLBACK_SIGNALS]
    trajs = _trajectories([FIXTURES / "data" / "tau_bench_airline_gpt4o"])
    failed = [t for t in trajs if t.score is not None and t.score < lab.cfg.healthy_threshold]
    assert failed
    for t in failed:
        before = sum(d.calls for d in fallback)
        cls, first = lab.first_signal(t)
        ran = sum(d.calls for d in fallback) - before
        assert (ran == 0) == (first is not None and first.id not in FALLBACK_SIGNALS), t.id
    healthy = next(t for t in trajs if t.score == 1.0)
    before = sum(d.calls for d in lab.detectors)
    assert lab.first_signal(healthy) == ("healthy", None)
    assert sum(d.calls for d in lab.detectors) == before
