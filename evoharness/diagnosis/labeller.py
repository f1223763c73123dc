"""The first-signal labeller.

A trajectory whose score reaches ``healthy_threshold`` is Healthy (signals are still
recorded). Otherwise its class is that of the earliest firing signal. Ties at one
step break by class -- E, F2, F3, F1, F4 (a broken environment, friction and control explain
what follows them; content is judged last) -- then by signal id, so labels never depend on detector or
record order. The violation log (invariants.py) is read for failed runs only: a Healthy
run's label carries none. Fallback signals (``FALLBACK_SIGNALS``: a poor delivery, the first commitment
of a failed multi-agent run) say that a run failed, not where: one is first only when no
located signal fired -- or where the first located one is a confirmation missing at a write made after the run's
first write went through (``detectors.after_a_write_went_through``): the first write's signal, where it lies
earlier, is first then. With no signal at all: F4 if delivered, else F3 no_delivery (the
catalogue's own detectors already cover both, so this is a safety net).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import TypeVar

from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import Run, TraceView
from evoharness.diagnosis.detectors import (
    FALLBACK_SIGNALS,
    Detector,
    FirstWriteDetector,
    PolicyViolationDetector,
    after_a_write_went_through,
    friction_occurrences,
    promises,
)
from evoharness.diagnosis.fingerprint import labeller_fingerprint
from evoharness.diagnosis.models import FailureClass, Label, Signal
from evoharness.diagnosis.multiagent import responsible_agent
from evoharness.diagnosis.routing import Router
from evoharness.traces.jsontext import collection_held
from evoharness.traces.models import Trajectory

T = TypeVar("T")
BATCH = 16  # runs labelled together by ``Labeller.labelled``: each detector over the batch, then the next

_MAY_YIELD = PolicyViolationDetector.id  # the one located signal that may yield to F4.first_write (tested first: cheap)
_TIE_ORDER = {FailureClass.E: 0, FailureClass.F2: 1, FailureClass.F3: 2, FailureClass.F1: 3, FailureClass.F4: 4}


def signal_order(s: Signal) -> tuple[int, int, str]:
    return (s.step, _TIE_ORDER.get(s.failure_class, 9), s.id)


class Labeller:
    def __init__(self, cfg: DiagnosisConfig | None = None, detectors: Sequence[Detector] | None = None) -> None:
        self.cfg = cfg or DiagnosisConfig()
        self.detectors = list(detectors) if detectors is not None else default_catalogue()
        self._custom = detectors is not None
        self.router = Router.from_config(self.cfg)
        # the detectors to run by a run's shape (multi-agent log?, any friction?, Healthy?): a detector that cannot
        # fire on a shape is not called on it, by the promises it makes (``detectors.Detector``: ``multi_agent_only``,
        # ``reads_friction``, ``skips_healthy``). Calling one costs ~2k instructions
        self._by_shape = {(multi, friction, healthy): [
            d for d in self.detectors if (multi or not promises(d, "multi_agent_only"))
            and (friction or not promises(d, "reads_friction"))
            and not (healthy and promises(d, "skips_healthy"))]
            for multi in (False, True) for friction in (False, True) for healthy in (False, True)}
        # ``first_signal``: each shape's detectors whose signals say where (run first) and those that say only that
        # a run failed (``FALLBACK_SIGNALS``; a detector's signals carry its id), run only when the first found none
        self._located = {k: [d for d in ds if d.id not in FALLBACK_SIGNALS] for k, ds in self._by_shape.items()}
        self._fallback = {k: [d for d in ds if d.id in FALLBACK_SIGNALS] for k, ds in self._by_shape.items()}
        # of the located ones, those that take a bound (``bounded``: a ``detectors.BoundedDetector``, the claim check):
        # run last, bounded by the first signal the others found
        self._bounded = {k: [d for d in ds if promises(d, "bounded")] for k, ds in self._located.items()}
        self._unbounded = {k: [d for d in ds if not promises(d, "bounded")] for k, ds in self._located.items()}

    @property
    def fingerprint(self) -> str | None:
        """Which labeller this is (``fingerprint.labeller_fingerprint``: this code, these settings), written on the
        lines `evoharness label` writes so that `dataset export --labels` reuses a line only from this very labeller;
        None with detectors of the caller's own (no fingerprint says which)."""
        if self._custom:
            return None
        return labeller_fingerprint(self.cfg)

    def signals(self, traj: Trajectory, view: TraceView | None = None) -> list[Signal]:
        view = view or TraceView.of(traj)
        found: list[Signal] = []
        cfg = self.cfg
        score = view.traj.score  # (the view's plain copy: a pydantic attribute read is ~30x dearer)
        healthy = score is not None and score >= cfg.healthy_threshold
        for d in self._by_shape[(not view.calls, bool(friction_occurrences(view)), healthy)]:
            found.extend(d.detect(view, cfg))
        found.sort(key=signal_order)
        return found

    def first_signal(self, traj: Trajectory) -> tuple[FailureClass, Signal | None]:
        """``classify``'s class and first signal, for a caller that needs no more (the export of a failed run):
        without running a detector on a Healthy run (its class is Healthy whatever fires), and on a failed run the
        fallback detectors (``FALLBACK_SIGNALS``) only when no other signal fired: a located signal is first
        whatever they find; and a ``bounded`` detector (the claim check) told the step of the first signal the other
        located ones found, after which none of its signals can come first. The same answer as ``classify`` (tests
        compare them on every public trace set and on random runs)."""
        if traj.score is not None and traj.score >= self.cfg.healthy_threshold:
            return FailureClass.healthy, None
        view = TraceView.of(traj)
        shape = (not view.calls, bool(friction_occurrences(view)), False)
        cfg = self.cfg
        found: list[Signal] = []
        for d in self._unbounded[shape]:
            found.extend(d.detect(view, cfg))
        if self._bounded[shape]:
            first = min((s for s in found if s.id not in FALLBACK_SIGNALS), key=signal_order, default=None)
            stop = None if first is None else first.step
            for d in self._bounded[shape]:
                found.extend(d.detect(view, cfg, stop=stop))
        located = [s for s in found if s.id not in FALLBACK_SIGNALS]
        if located:
            first = min(located, key=signal_order)
            if first.id == _MAY_YIELD and after_a_write_went_through(view, first):  # the first write's signal, run now
                found = [s for d in self._fallback[shape] if d.id == FirstWriteDetector.id for s in d.detect(view, cfg)]
                first = _yielded_to(first, found)
            return first.failure_class, first
        for d in self._fallback[shape]:
            found.extend(d.detect(view, cfg))
        found.sort(key=signal_order)
        cls, first, _ = self._classified(traj, view, found)
        return cls, first

    def headline(self, traj: Trajectory) -> Label:
        """``label(traj)`` as the text `diagnose` reads it: its class, first signal, lever, score, delivered, agent and
        quote are ``label``'s, found as ``first_signal`` finds them -- no detector on a Healthy run, on a failed one the
        fallback detectors only where no located signal fired and the claim check bounded by the first signal -- while
        ``signals`` and ``violations`` are left empty: not looked for. For a reader of those fields alone (the
        composition, the failing-step lines); a caller that lists or stores the signals (``diagnose --json``,
        ``label``, verification's incidence counts) takes ``label``."""
        cls, first = self.first_signal(traj)
        return Label(trajectory_id=traj.id, task_id=traj.task_id, failure_class=cls, first_signal=first,
                     lever=self.router.lever(cls), scored=traj.score is not None, score=traj.score,
                     delivered=traj.final_answer is not None, agent=_agent_at(traj, first),
                     quote=_quote_at(traj, first))

    def classify(self, traj: Trajectory,
                 view: TraceView | None = None) -> tuple[FailureClass, Signal | None, list[Signal]]:
        """(class, first signal, signals) as ``label`` gives them, without the rest of a ``Label`` (the violation log,
        agent, quote and the model's validation): for a caller that needs only the class and the first signal."""
        view = view or TraceView.of(traj)
        return self._classified(traj, view, self.signals(traj, view))

    def _classified(self, traj: Trajectory, view: TraceView,
                    signals: list[Signal]) -> tuple[FailureClass, Signal | None, list[Signal]]:
        traj = view.traj  # (the run's fields as plain attributes: the same values)
        if traj.score is not None and traj.score >= self.cfg.healthy_threshold:
            return FailureClass.healthy, None, signals
        if signals:
            first = next((s for s in signals if s.id not in FALLBACK_SIGNALS), signals[0])
            if first.id == _MAY_YIELD and after_a_write_went_through(view, first):
                first = _yielded_to(first, signals)
            return first.failure_class, first, signals
        if traj.delivered and traj.score is None:  # no outcome and no signal: no verdict (a failure-only log's
            return FailureClass.unknown, None, signals  # delivery is F4.poor_delivery's: it fired above)
        if traj.delivered:
            first = Signal(id="F4.poor_delivery", failure_class=FailureClass.F4, step=view.final_step,
                           evidence=f"no signal fired; score {traj.score:.2f}")
        else:
            first = Signal(id="F3.no_delivery", failure_class=FailureClass.F3, step=view.final_step,
                           evidence="no signal fired; no final answer")
        return first.failure_class, first, [first]

    def label(self, traj: Trajectory) -> Label:
        view = TraceView.of(traj)
        return self._label(traj, view, self.signals(traj, view))

    def labelled(self, items: Iterable[T], traj_of: Callable[[T], Trajectory] | None = None,
                 batch: int = BATCH) -> Iterator[tuple[T, Label]]:
        """``(item, label(traj_of(item)))`` for each of ``items``, in order, read ``batch`` at a time (a stream
        stays a stream). The same labels as ``label``, made faster: within a batch each detector runs over every
        run of its shape before the next detector starts, so the interpreter keeps one rule's code and data hot
        instead of cycling through a dozen rules per run (on tau-bench airline ~5-8% less CPU for the same
        instructions). A run's signals are found in the same order either way (the catalogue's), then sorted."""
        it = iter(items)
        cfg = self.cfg
        while True:
            # the cyclic collector held while a batch is read and its detectors run (``collection_held``): its
            # collections there walked the batch's records again and freed nothing (tau-bench airline: 386 -> 381 M
            # instructions a pass); released before the labels are handed out (the caller's loop runs with it free)
            with collection_held:
                chunk = list(islice(it, batch))
                if not chunk:
                    break
                trajs = [item if traj_of is None else traj_of(item) for item in chunk]
                views = [TraceView.of(t) for t in trajs]
                found: list[list[Signal]] = [[] for _ in views]
                by_shape: dict[tuple[bool, bool, bool], list[int]] = {}
                for j, view in enumerate(views):
                    score = view.traj.score
                    healthy = score is not None and score >= cfg.healthy_threshold
                    by_shape.setdefault((not view.calls, bool(friction_occurrences(view)), healthy), []).append(j)
                for shape, js in by_shape.items():
                    for d in self._by_shape[shape]:
                        detect = d.detect
                        for j in js:
                            found[j].extend(detect(views[j], cfg))
            for item, t, view, signals in zip(chunk, trajs, views, found, strict=True):
                signals.sort(key=signal_order)
                yield item, self._label(t, view, signals)

    def _label(self, traj: Trajectory, view: TraceView, signals: list[Signal]) -> Label:
        cls, first, signals = self._classified(traj, view, signals)
        healthy = cls is FailureClass.healthy
        traj = view.traj  # (the run's fields as plain attributes: the same values)
        return Label(
            trajectory_id=traj.id,
            task_id=traj.task_id,
            failure_class=cls,
            first_signal=first,
            signals=signals,
            lever=self.router.lever(cls),
            scored=traj.score is not None,
            score=traj.score,
            delivered=traj.delivered,
            violations=[] if healthy else view.violations,
            agent=_agent_at(traj, first),
            quote=_quote_at(traj, first),
        )


def _yielded_to(first: Signal, signals: Iterable[Signal]) -> Signal:
    """The ``F4.first_write`` signal among ``signals`` that lies before ``first`` (a policy violation that yields to
    it: ``detectors.after_a_write_went_through``), else ``first``."""
    return next((s for s in signals if s.id == FirstWriteDetector.id and s.step < first.step), first)


def _agent_at(traj: Trajectory | Run, s: Signal | None) -> str | None:
    """The agent answerable for the failing step (multiagent.responsible_agent): its speaker, or at a
    terminal's output the agent whose code it ran."""
    return None if s is None else responsible_agent(traj.messages, s.step)


def _quote_at(traj: Trajectory | Run, s: Signal | None, limit: int = 140) -> str:
    """One line of the failing step's message: its text, else its tool calls."""
    if s is None or s.step >= len(traj.messages):
        return ""
    m = traj.messages[s.step]
    text = m.get("content") if isinstance(m.get("content"), str) else ""
    if not text.strip() and m.get("tool_calls"):
        calls = [tc.get("function", {}) for tc in m["tool_calls"] if isinstance(tc, dict)]
        text = "; ".join(f"{c.get('name')}({c.get('arguments')})" for c in calls if isinstance(c, dict))
    line = " ".join(text[:4 * limit].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def label_trajectory(traj: Trajectory, cfg: DiagnosisConfig | None = None) -> Label:
    return Labeller(cfg).label(traj)


def label_all(trajs: Iterable[Trajectory], cfg: DiagnosisConfig | None = None) -> list[Label]:
    return [lab for _, lab in Labeller(cfg).labelled(trajs)]
