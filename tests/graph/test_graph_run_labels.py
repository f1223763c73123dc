"""A run keeps the labels it made beside its trajectory store, and an export of the run's file reuses them."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter

from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.diagnosis.labeller import Labeller
from evoharness.graph.progress import Progress
from evoharness.graph.runner import drive, resume_run, runs_dir, save_run_settings, start_run
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


def _stopped_run(settings, run_id: str, after: int):
    """A run stopped after ``after`` graph steps (as the service stops one on SIGTERM), ready to resume."""
    run_dir = runs_dir(settings) / run_id
    saved = save_run_settings(run_dir, settings)
    stop, steps = threading.Event(), []

    def on_state(_values):
        steps.append(1)
        if len(steps) >= after:
            stop.set()

    out = drive(saved, run_id, run_dir, {"run_id": run_id}, QUIET, stop=stop, on_state=on_state)
    assert out.stopped
    return run_dir


def test_a_resumed_run_reuses_the_labels_it_kept_and_labels_only_what_is_new(make_settings, monkeypatch):
    """A resumed run labelled again every trajectory it had labelled before the stop (the labels lived in memory
    only): now it reads them back from the labels file beside its store, each checked against the trajectory's line
    and the labeller's fingerprint, and labels only the trajectories it has not labelled yet."""
    settings = make_settings(rollouts=2, max_rounds=2)
    run_dir = _stopped_run(settings, "r-stop", after=4)
    before = {t.id for t in read_trajectories(run_dir / "trajectories.jsonl")}
    assert before
    calls: Counter[str] = Counter()
    label = Labeller.label

    def counted(self, t, *args, **kw):
        calls[t.id] += 1
        return label(self, t, *args, **kw)

    monkeypatch.setattr(Labeller, "label", counted)
    out = resume_run(settings, "r-stop", progress=QUIET)
    assert out.done
    after = {t.id for t in read_trajectories(run_dir / "trajectories.jsonl")}
    assert after > before and set(calls) == after - before  # the new ones labelled, once each; the kept ones not
    assert {i: n for i, n in calls.items() if n > 1} == {}


def test_a_resumed_run_labels_again_a_kept_label_that_is_not_the_trajectorys(make_settings, monkeypatch):
    """A label line whose digest names another line (the trajectory edited since), of another labeller, or no label
    at all is not reused: its trajectory is labelled again, and the run's labels are those of labelling anew."""
    settings = make_settings(rollouts=2, max_rounds=2)
    run_dir = _stopped_run(settings, "r-edit", after=4)
    path = run_dir / "labels.jsonl"
    lines = path.read_bytes().splitlines()
    assert len(lines) >= 3
    first, second = json.loads(lines[0]), json.loads(lines[1])
    first["trajectory_sha256"] = "0" * 64
    second["labeller_fingerprint"] = "another"
    path.write_bytes(b"\n".join([json.dumps(first).encode(), json.dumps(second).encode(), b"{not json", *lines[2:]])
                     + b"\n")
    calls: Counter[str] = Counter()
    label = Labeller.label

    def counted(self, t, *args, **kw):
        calls[t.id] += 1
        return label(self, t, *args, **kw)

    monkeypatch.setattr(Labeller, "label", counted)
    resume_run(settings, "r-edit", progress=QUIET)
    assert first["trajectory_id"] in calls and second["trajectory_id"] in calls
    reused = {json.loads(x)["trajectory_id"] for x in lines[2:]}
    assert not reused & set(calls)
