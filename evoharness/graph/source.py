"""The run's rollout source: runs, stores and labels rollouts, paid from the run's ledger.

One rollout identity (`RolloutRequest.id`, `sandbox.api.rollout_id`): the request's harness commit, split,
task and seed -- the trajectory's id and the ledger's paid key. The ledger is an argument of every call
(`ObservationSource` contract).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import LABEL_SCHEMA_VERSION, Label, LabelHead, LabelLine
from evoharness.errors import InputError
from evoharness.graph.progress import Progress
from evoharness.sandbox.api import RolloutRequest, rollout_id
from evoharness.traces.models import Split, Trajectory
from evoharness.traces.store import TrajectoryStore, jsonl_lines
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.observations import Observation, observe


class RunLedger(BudgetLedger):
    """The run's ledger: also remembers which rollouts (by content key) it has paid for.

    It lives in the checkpointed state, so after a crash the re-run node pays again exactly
    for what the lost part of the node had paid -- the ledger of a resumed run equals that of
    an uninterrupted one -- while the content cache makes sure no rollout is *computed* twice.
    """

    paid_keys: list[str] = Field(default_factory=list)  # `RolloutRequest.id` of every rollout paid for

    @field_validator("paid_keys", mode="before")
    @classmethod
    def _old_keys(cls, keys: list[str]) -> list[str]:
        """A checkpoint of an older version paid by ``commit:split:task:seed``: the same rollouts by id."""
        return [_from_old_key(k) for k in keys]


_OLD_KEY = re.compile(r"^([^:/]+):([^:/]+):(.*):(-?\d+)$")


def _from_old_key(key: str) -> str:
    m = None if key[12:13] == "/" else _OLD_KEY.match(key)
    return rollout_id(m[3], m[1], m[2], int(m[4])) if m else key


def ledger_of(state: dict, total: float, units_per_rollout: float = 1.0) -> RunLedger:
    """The ledger in a run's state (a fresh one of ``total`` units before the first node)."""
    if state.get("ledger"):
        return RunLedger.model_validate(state["ledger"])
    return RunLedger(total=total, units_per_rollout=units_per_rollout)


class RunLabels:
    """The run's labels by trajectory id, made once per trajectory (``of``): the `GraphSource` labels each rollout it
    observes, the `Book` reads the same labels for its compositions. An id is content-determined (harness commit,
    split, task, seed), and the content cache gives a rollout's one trajectory at every observation.

    A resumed run starts with none in memory, but its store keeps a label line beside each trajectory it appended
    (``labels.jsonl``, ``TrajectoryStore.add``): at the first trajectory asked for, that file is read once, and a
    trajectory it labels is labelled again only when the line is not provably this labeller's label of this very
    trajectory (``datasets.export.reusable``: the labeller's fingerprint, the digest of the trajectory's canonical
    line). Before, a resumed run relabelled every trajectory it had labelled before the stop. A line that does not
    read as a label is passed over (its trajectory is labelled), as an export does."""

    def __init__(self, labeller: Labeller, path: Path | None = None) -> None:
        self.labeller = labeller
        self.path = path  # the store's labels file, None: none to read
        self.made: dict[str, Label] = {}
        self._stored: dict[str, tuple[LabelHead, bytes]] | None = None  # the file's lines by id, read at the first miss

    def of(self, t: Trajectory) -> Label:
        lab = self.made.get(t.id)
        if lab is None:
            lab = self._stored_label(t)
            if lab is None:
                lab = self.labeller.label(t)
            self.made[t.id] = lab
        return lab

    def _stored_label(self, t: Trajectory) -> Label | None:
        if self._stored is None:
            self._stored = self._read()
        kept = self._stored.pop(t.id, None)
        if kept is None:
            return None
        from evoharness.datasets.export import reusable

        head, raw = kept
        if reusable(head, self.labeller.fingerprint, t.model_dump_json(exclude_defaults=False).encode()):
            return None
        try:
            return Label.model_validate_json(raw)
        except ValidationError:
            return None

    def _read(self) -> dict[str, tuple[LabelHead, bytes]]:
        out: dict[str, tuple[LabelHead, bytes]] = {}
        if self.path is None or not self.path.exists():
            return out
        try:
            for _, raw in jsonl_lines(self.path):
                try:
                    head = LabelHead.read(raw)
                except ValueError:  # no label line: its trajectory is labelled
                    continue
                if head.schema_version == LABEL_SCHEMA_VERSION:
                    out[head.trajectory_id] = (head, raw)
        except (InputError, OSError):  # unreadable from here on: the rest are labelled again
            pass
        return out


class GraphSource:
    """The `ObservationSource` the verifier uses in a run: runs, stores and labels rollouts.

    ``pending`` counts the requests ``ledger`` has not paid for yet; ``observe`` records the ones it
    pays for in ``ledger.paid_keys``. ``labels``: the run's labels by trajectory id, which the run's `Book` reads
    too, so a rollout is labelled once however often it is observed (a sequential verdict's looks and the
    anchor's composition observe the same rollouts again).
    """

    def __init__(self, runner, store: TrajectoryStore, labeller: Labeller, progress: Progress,
                 labels: RunLabels | None = None) -> None:
        self.runner = runner
        self.store = store
        self.labeller = labeller
        self.progress = progress
        self.labels = labels if labels is not None else RunLabels(labeller, store.labels_path)

    def label(self, t: Trajectory) -> Label:
        """``t``'s label, made once per trajectory id (``RunLabels``)."""
        return self.labels.of(t)

    @staticmethod
    def _fired(lab: Label) -> tuple[frozenset[str], bool]:
        return frozenset(s.id for s in lab.signals), lab.failure_class.value == "healthy"

    def pending(self, requests: list[RolloutRequest], ledger: BudgetLedger | None = None) -> int:
        paid = set(getattr(ledger, "paid_keys", ()))
        return len({r.id for r in requests} - paid)

    def observe(self, requests: list[RolloutRequest],
                ledger: BudgetLedger | None = None) -> tuple[list[Observation], int]:
        if not requests:
            return [], 0
        self.progress.plan(len(requests), "rollouts")
        trajs = self.runner.run(requests)
        trajs = [t.model_copy(update={"id": r.id, "harness_commit": r.harness_commit,
                                      "rollout": r.rollout, "split": Split(r.split)})
                 for r, t in zip(requests, trajs, strict=True)]
        # labelled once: for the verifier's observations, the run's compositions (the `Book` reads ``self.labels``),
        # and kept beside the store with the digest of the line stored and the labeller's fingerprint, so an export
        # of the run's file reuses them (``datasets.export``)
        labels = {t.id: self.label(t) for t in trajs}
        fingerprint = self.labeller.fingerprint
        self.store.add(trajs, labels=lambda t, digest: LabelLine.of(
            labels[t.id], trajectory_sha256=digest, labeller_fingerprint=fingerprint).model_dump_json())
        paid = 0
        if isinstance(ledger, RunLedger):
            known = set(ledger.paid_keys)
            for r in requests:
                k = r.id
                if k not in known:
                    known.add(k)
                    ledger.paid_keys.append(k)
                    paid += 1
        self.progress.advance(len(requests), ledger.left - paid if ledger is not None else None)
        return [observe(r, t, lambda t: self._fired(labels[t.id])) for r, t in zip(requests, trajs, strict=True)], paid
