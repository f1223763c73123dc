"""The run's book: its tasks, rollouts (anchors and evaluations), labels and the training queue.

Every measurement is paid from the ledger passed in; nothing here keeps a ledger.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import Label, Lever
from evoharness.errors import EvoharnessError
from evoharness.graph.config import RunConfig
from evoharness.graph.progress import Progress
from evoharness.graph.source import GraphSource, RunLabels, RunLedger
from evoharness.graph.state import AnchorEntry
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.models import Trajectory
from evoharness.traces.store import TrajectoryStore


class Book:
    """``labels``: the run's labels by trajectory id, shared with its `GraphSource`, which labels each rollout it
    observes: a trajectory is labelled once in a run, not again for its composition, nor after a resume
    (``RunLabels``)."""

    def __init__(self, run: RunConfig, env, store: TrajectoryStore, labeller: Labeller, progress: Progress, *,
                 source: GraphSource | None = None, verifier=None, queue=None,
                 labels: RunLabels | None = None) -> None:
        self.run = run
        self.env = env
        self.store = store
        self.labeller = labeller
        self.progress = progress
        self.source = source
        self.verifier = verifier
        self.queue = queue
        self._cache: dict[str, Trajectory] = {}
        self._read_to = 0  # how far into the store file ``_cache`` has read (the store is append-only)
        self._labels = labels  # made when first asked (``labels``): the store's, unless given

    # -- tasks and trajectories -------------------------------------------------------------
    def tasks(self, split: str) -> list[str]:
        ids = [t.id for t in self.env.list_tasks(split)]
        limit = self.run.dev_limit if split == "dev" else self.run.heldout_limit
        return ids[:limit] if limit else ids

    def load(self, ids: list[str]) -> list[Trajectory]:
        missing = [i for i in ids if i not in self._cache]
        if missing:
            self._read_new()
            missing = [i for i in ids if i not in self._cache]
            if missing:
                raise EvoharnessError(f"trajectories missing from the store: {missing[:3]}")
        return [self._cache[i] for i in ids]

    def _read_new(self) -> None:
        """Read the lines the store gained since the last read (whole lines; a later line of an id wins, and
        an invalid line is skipped, as ``iter(store)`` does); from the start if the file shrank."""
        path = self.store.path
        if not path.exists():
            return
        with path.open("rb") as fh:
            if fh.seek(0, 2) < self._read_to:
                self._cache, self._read_to = {}, 0
            fh.seek(self._read_to)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        for raw in [*data[:end].splitlines(), data[end:]]:  # the last, unfinished line is read again next time
            if raw.strip():
                try:
                    t = Trajectory.model_validate_json(raw)
                except ValidationError:
                    continue
                self._cache[t.id] = t
        self._read_to += end

    def labels(self, trajs: list[Trajectory]) -> list[Label]:
        """Labels, memoised by trajectory id (ids are content-determined: commit, split, task, seed)."""
        if self._labels is None:
            self._labels = RunLabels(self.labeller, self.store.labels_path)
        return [self._labels.of(t) for t in trajs]

    def composition_of(self, ids: list[str]) -> dict[str, Any]:
        return Composition.from_labels(self.labels(self.load(ids))).to_dict()

    # -- anchors and evaluation --------------------------------------------------------------
    def measure_anchor(self, commit: str, ledger: RunLedger, round: int) -> AnchorEntry:
        """main's k-rollout measurement on the dev tasks (through the verifier, paid from the ledger)."""
        self.progress.note(f"measuring anchor of {commit[:10]} (round {round})")
        anchor = self.verifier.measure_anchor(commit, self.tasks("dev"), k=self.run.rollouts, round=round,
                                              ledger=ledger)
        ids = [o.trajectory_id for o in anchor.observations]
        return AnchorEntry(commit=commit, round=round, k=anchor.k, tasks=anchor.dev_tasks(), trajectory_ids=ids,
                           mean=anchor.mean, sigma=anchor.sigma, composition=self.composition_of(ids),
                           anchor=anchor.model_dump(mode="json"))

    def evaluate(self, commit: str, split: str, ledger: RunLedger, round: int) -> dict[str, Any] | None:
        """Composition of ``commit`` on a split (held-out included: measured, never selected or exported)."""
        tasks = self.tasks(split)
        if not tasks:
            return None
        reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=self.run.seed + r, rollout=r, split=split)
                for t in tasks for r in range(self.run.rollouts)]
        pending = self.source.pending(reqs, ledger)
        if not pending:  # main unchanged since the seed's evaluation: those rollouts (stored, paid) are the answer
            self.progress.note(f"{split} of {commit[:10]}: measured already ({len(reqs)} rollouts, none run again)")
            return self.composition_of([r.id for r in reqs])
        self.progress.note(f"evaluating {commit[:10]} on {split} ({len(reqs)} rollouts)")
        ledger.check(pending)
        obs, paid = self.source.observe(reqs, ledger)
        ledger.charge(paid, round, f"eval:{split}", "evaluation", tokens=sum(o.tokens for o in obs))
        return self.composition_of([o.trajectory_id for o in obs])

    # -- content failures --------------------------------------------------------------------
    def enqueue_content(self, ids: list[str], run_id: str, round: int, exclude: frozenset[str] = frozenset()) \
            -> list[str]:
        """Trajectories the Router sends to the weights lever go to the training queue, but those in ``exclude``
        (a harness cause named for what they cost: `HarnessEvidence.cost_explained`; they stay in the store)."""
        out = []
        trajs = self.load(ids)
        for t, lab in zip(trajs, self.labels(trajs), strict=True):
            if lab.lever == Lever.weights and t.id not in exclude:
                self.queue.enqueue(t, lab, run_id=run_id, round=round, labeller_fingerprint=self.labeller.fingerprint)
                out.append(t.id)
        return out
