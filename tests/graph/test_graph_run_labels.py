"""A run keeps the labels it made beside its trajectory store, and an export of the run's file reuses them."""

from __future__ import annotations

import json
import shutil
from collections import Counter

from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.diagnosis.labeller import Labeller
from evoharness.graph.progress import Progress
from evoharness.graph.runner import start_run
from evoharness.traces.store import line_digest, read_trajectories

QUIET = Progress(quiet=True)


def _export(path, out, **kw):
    s = export_dataset(out, source=SourceKind.all, trajectories=JsonlSource(path), keep_duplicates=True, **kw)
    return s, (out / "data.jsonl").read_bytes(), (out / "metadata.jsonl").read_bytes()


def test_a_run_keeps_a_checked_label_per_trajectory_and_its_export_reuses_them(make_settings, tmp_path):
    settings = make_settings(rollouts=2, max_rounds=1)
    out = start_run(settings, progress=QUIET)
    store, labels = out.run_dir / "trajectories.jsonl", out.run_dir / "labels.jsonl"
    lines = [raw for raw in store.read_bytes().splitlines() if raw.strip()]
    kept = [json.loads(raw) for raw in labels.read_bytes().splitlines()]
    fingerprint = Labeller(settings.diagnosis).fingerprint
    # one label a trajectory, in the store's order, each the labeller's and naming the very line it labelled
    assert [k["trajectory_id"] for k in kept] == [t.id for t in read_trajectories(store)]
    assert [k["trajectory_sha256"] for k in kept] == [line_digest(raw) for raw in lines]
    assert {k["labeller_fingerprint"] for k in kept} == {fingerprint}
    labeller = Labeller(settings.diagnosis)
    for k, t in zip(kept, read_trajectories(store), strict=True):
        assert k["failure_class"] == labeller.label(t).failure_class.value

    warm, data, meta = _export(store, tmp_path / "warm", diagnosis_cfg=settings.diagnosis)
    alone = tmp_path / "alone" / "trajectories.jsonl"  # the same file with no labels beside it: labelled cold
    alone.parent.mkdir()
    shutil.copy(store, alone)
    cold, cold_data, cold_meta = _export(alone, tmp_path / "cold", diagnosis_cfg=settings.diagnosis)
    # held-out tasks are excluded: every unhealthy record written had its class from the run's labels
    unhealthy = sum(json.loads(m)["failure_class"] != "healthy" for m in meta.splitlines())
    assert unhealthy and warm.records == cold.records and warm.heldout_tasks_excluded
    assert (warm.labels_reused, warm.labels_relabelled) == (unhealthy, {})
    assert (cold.labels_reused, cold.labels_relabelled) == (0, {})
    assert (data, meta) == (cold_data, cold_meta)  # the same bytes, labelled or reused


def test_a_run_labels_each_trajectory_once(make_settings, monkeypatch):
    """The source labels a rollout when it observes it; the book's compositions, the verifier's later looks and the
    anchor's second observation read that label (before: 82 of 294 trajectories labelled twice, 12 four times)."""
    calls: Counter[str] = Counter()
    label = Labeller.label

    def counted(self, t, *args, **kw):
        calls[t.id] += 1
        return label(self, t, *args, **kw)

    monkeypatch.setattr(Labeller, "label", counted)
    out = start_run(make_settings(rollouts=2, max_rounds=1), progress=QUIET)
    stored = {t.id for t in read_trajectories(out.run_dir / "trajectories.jsonl")}
    assert stored and set(calls) == stored  # every trajectory of the run labelled, in this process
    assert {i: n for i, n in calls.items() if n > 1} == {}
