"""An export labels only the trajectories whose class it uses (issue 17: export speed). ``--source healthy``
keeps the runs that reach the healthy threshold, which the labeller calls Healthy by its first rule whatever
fires; a run below it is never Healthy, so it is dropped without running the detectors (they were most of such
an export's cost: 232 of 400 tau-bench rows labelled only to be dropped). ``--source all`` labels a failed run
when its class is needed: a ``--class`` filter, or its record is to be written; a run dropped for its split,
task, score or count (a held-out task's) is not labelled."""

from __future__ import annotations

import pytest

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.models import FailureClass

from .helpers import make_traj, read_jsonl


def _trajs() -> list:
    # healthy, failed and unscored runs (an unscored run is never Healthy either)
    return [make_traj(f"t{i}", f"task-{i % 4}", score=[1.0, 0.0, 0.4, None][i % 4]) for i in range(12)]


@pytest.mark.parametrize("fmt", [ExportFormat.openai, ExportFormat.sharegpt])
def test_a_healthy_export_runs_no_detector(tmp_path, labelled, fmt):
    s = export_dataset(tmp_path, fmt=fmt, source=SourceKind.healthy, trajectories=_trajs())
    assert labelled == []
    assert [m["id"] for m in read_jsonl(tmp_path / "metadata.jsonl")] == ["t0", "t4", "t8"]
    assert s.records == 3 and s.classes == {"healthy": 3}


def test_an_export_of_all_still_labels_every_run_below_the_threshold(tmp_path, labelled):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_trajs())
    assert sorted(labelled) == sorted(f"t{i}" for i in range(12) if i % 4)
    assert s.records == 12 and s.classes["healthy"] == 3


def _with_heldout() -> list:
    # task-3's runs (t3, t7, t11: unscored) are held out; task-0's are healthy
    trajs = _trajs()
    for t in trajs[3::4]:
        t.split = "heldout"
    return trajs


def test_held_out_runs_are_dropped_unlabelled(tmp_path, labelled):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_with_heldout())
    assert labelled == ["t1", "t2", "t5", "t6", "t9", "t10"]  # task-3's never
    assert s.heldout_tasks_excluded == 3 and s.records == 9


@pytest.mark.parametrize(("filters", "kept"), [
    (ExportFilters(tasks=["task-1"]), ["t1", "t5", "t9"]),
    (ExportFilters(min_score=0.3), ["t2", "t6", "t10"]),
    (ExportFilters(max_per_task=1), ["t1", "t2"]),
])
def test_runs_the_filters_drop_are_not_labelled(tmp_path, labelled, filters, kept):
    export_dataset(tmp_path, source=SourceKind.all, trajectories=_with_heldout(), filters=filters)
    assert labelled == kept
    assert [m["id"] for m in read_jsonl(tmp_path / "metadata.jsonl") if m["failure_class"] != "healthy"] == kept


def test_a_class_filter_labels_what_it_reads_and_exports_the_same(tmp_path, labelled):
    every = export_dataset(tmp_path / "every", source=SourceKind.all, trajectories=_with_heldout())
    labelled.clear()
    f4 = export_dataset(tmp_path / "f4", source=SourceKind.all, trajectories=_with_heldout(),
                        filters=ExportFilters(classes=["F4"]))
    assert sorted(labelled) == sorted(f"t{i}" for i in range(12) if i % 4)  # held-out ones too: --class reads them
    want = [m for m in read_jsonl(tmp_path / "every" / "metadata.jsonl") if m["failure_class"] == "F4"]
    assert want and read_jsonl(tmp_path / "f4" / "metadata.jsonl") == want
    assert f4.records == every.classes["F4"]


def test_every_detector_gives_a_failure_class():
    # what the healthy export relies on: below the threshold no signal can make a run Healthy
    for d in default_catalogue():
        assert d.failure_class not in (FailureClass.healthy, FailureClass.unknown), d.id
