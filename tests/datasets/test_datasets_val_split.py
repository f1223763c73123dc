"""`dataset export --val-fraction F [--split-seed S]`: a train and a validation split by task, no task in both,
the same split for the same tasks and seed whatever the order of the records, held-out tasks in neither, the placebo
permuted within each split, and the card, manifest and LLaMA-Factory's dataset_info.json saying so."""

from __future__ import annotations

import json

import pytest

from evoharness.cli import main
from evoharness.datasets.export import export_dataset, read_manifest, validation_tasks
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
from evoharness.errors import InputError
from evoharness.traces.store import write_trajectories

from .helpers import make_traj, offline_hf, read_jsonl  # noqa: F401 (offline_hf: the fixture the hf case uses)


def _trajs(tasks: int = 10, runs: int = 3) -> list:
    return [make_traj(f"t{i}-{r}", f"task-{i}", calls=1 + r % 2) for i in range(tasks) for r in range(runs)]


def _tasks_of(path) -> set[str]:
    return {m["task_id"] for m in read_jsonl(path)}


def test_the_split_is_by_task_and_covers_every_record_once(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_trajs(), val_fraction=0.2)
    assert s.files[:4] == ["train.jsonl", "train.metadata.jsonl", "validation.jsonl", "validation.metadata.jsonl"]
    assert not (tmp_path / "data.jsonl").exists()
    train, val = _tasks_of(tmp_path / "train.metadata.jsonl"), _tasks_of(tmp_path / "validation.metadata.jsonl")
    assert len(val) == 2 and len(train) == 8 and not train & val  # round(0.2 x 10) tasks, none in both
    assert val == set(s.validation.tasks)
    rows = read_jsonl(tmp_path / "train.jsonl") + read_jsonl(tmp_path / "validation.jsonl")
    assert len(rows) == s.records == 30 and s.validation.records == {"train": 24, "validation": 6}
    ids = [m["id"] for p in ("train", "validation") for m in read_jsonl(tmp_path / f"{p}.metadata.jsonl")]
    assert sorted(ids) == sorted(t.id for t in _trajs())
    card = (tmp_path / "README.md").read_text()
    assert "  - split: train\n    path: train.jsonl\n  - split: validation\n    path: validation.jsonl" in card
    assert ("- **Validation split:** by task, no task in both: 2 of the 10 tasks with a record to write "
            "(fraction 0.2, seed 0) are validation tasks; 6 records of 2 tasks in `validation.jsonl`, 24 "
            "records of 8 tasks in `train.jsonl`.") in card
    assert read_manifest(tmp_path).validation.tasks == sorted(val)


def test_the_same_seed_gives_the_same_split_in_any_order_and_another_seed_another(tmp_path):
    trajs = _trajs(tasks=20)
    a = export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=trajs, val_fraction=0.25)
    b = export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=trajs[::-1], val_fraction=0.25)
    assert a.validation.tasks == b.validation.tasks and len(a.validation.tasks) == 5
    others = [validation_tasks({t.task_id for t in trajs}, 0.25, seed) for seed in range(1, 6)]
    assert any(o != set(a.validation.tasks) for o in others)
    assert all(len(o) == 5 for o in others)


def test_held_out_tasks_are_in_neither_split(tmp_path):
    trajs = _trajs(tasks=6) + [make_traj("h1", "task-held", split="heldout")]
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=trajs, val_fraction=0.5,
                       declared_heldout=["task-0"])
    assert s.validation.tasks_considered == 5 and len(s.validation.tasks) == 2  # round(2.5): 2
    seen = _tasks_of(tmp_path / "train.metadata.jsonl") | _tasks_of(tmp_path / "validation.metadata.jsonl")
    assert seen == {f"task-{i}" for i in range(1, 6)}
    assert s.heldout_tasks_excluded == 4


def test_the_placebo_permutes_within_each_split(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_trajs(), val_fraction=0.3, placebo=True)
    val_answers = {f"final answer of t{i}-{r}" for i in range(10) for r in range(3)
                   if f"task-{i}" in s.validation.tasks}
    for part, inside in (("validation", True), ("train", False)):
        for row in read_jsonl(tmp_path / f"{part}.jsonl"):
            assert (row["messages"][-1]["content"] in val_answers) is inside


@pytest.mark.parametrize("fmt", ["sharegpt", "hf"])
def test_other_formats_write_a_file_per_split_and_llamafactory_gets_both(tmp_path, fmt, offline_hf):  # noqa: F811
    if fmt == "hf":
        pytest.importorskip("datasets")
    s = export_dataset(tmp_path, fmt=ExportFormat(fmt), source=SourceKind.all, trajectories=_trajs(),
                       val_fraction=0.2)
    if fmt == "hf":
        assert s.validation.files == {"train": "data/train-00000-of-00001.parquet",
                                      "validation": "data/validation-00000-of-00001.parquet"}
        import datasets

        ds = datasets.load_dataset(str(tmp_path), cache_dir=str(tmp_path / "cache"))
        assert {k: len(v) for k, v in ds.items()} == {"train": 24, "validation": 6}
        assert not set(ds["train"]["task_id"]) & set(ds["validation"]["task_id"])
        return
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert {k: v["file_name"] for k, v in info.items()} == {"evoharness_train": "train.jsonl",
                                                           "evoharness_validation": "validation.jsonl"}
    assert len(read_jsonl(tmp_path / "validation.jsonl")) == 6


def test_a_split_needs_two_tasks_and_a_fraction_inside_0_1(tmp_path):
    with pytest.raises(InputError, match="at least 2 tasks; the sources hold 1"):
        export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=_trajs(tasks=1), val_fraction=0.5)
    with pytest.raises(InputError, match="between 0 and 1"):
        export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=_trajs(), val_fraction=1.0)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_cli_splits_validates_both_files_and_refuses_a_lone_seed(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, _trajs())
    out = tmp_path / "out"
    assert main(["dataset", "export", "-t", str(src), "--source", "all", "--out", str(out), "--val-fraction", "0.2",
                 "--split-seed", "7"]) == 0
    said = capsys.readouterr().out
    assert "split by task: train 24 records of 8 tasks (train.jsonl), validation 6 records of 2 tasks " \
           "(validation.jsonl)" in said
    assert read_manifest(out).validation.seed == 7
    assert main(["dataset", "validate", str(out)]) == 0
    assert capsys.readouterr().out == "30 records, all valid (openai: train.jsonl 24, validation.jsonl 6)\n"
    assert main(["dataset", "export", "-t", str(src), "--out", str(tmp_path / "o2"), "--split-seed", "7"]) == 2
    assert "--split-seed 7: it chooses the tasks of --val-fraction, which was not given" in capsys.readouterr().err
    assert main(["dataset", "export", "-t", str(src), "--out", str(tmp_path / "o3"), "--val-fraction", "0"]) == 2
    assert "--val-fraction 0.0: must lie between 0 and 1" in capsys.readouterr().err
    # an export without the option into the same directory replaces the split files with its one file
    assert main(["dataset", "export", "-t", str(src), "--source", "all", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["README.md", "data.jsonl", "manifest.json",
                                                                    "metadata.jsonl"]


def _two_healthy_of_ten() -> list:
    """10 tasks, each with a failed run; only task-3 and task-7 also have healthy runs."""
    trajs = [make_traj(f"f{i}", f"task-{i}", score=0.0) for i in range(10)]
    return trajs + [make_traj(f"h{i}-{r}", f"task-{i}", calls=1 + r) for i in (3, 7) for r in range(2)]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_split_is_chosen_among_the_tasks_with_records_to_export(tmp_path, seed):
    # with the default --source healthy only task-3 and task-7 have records: before the fix the split was drawn
    # from all 10 tasks, and seeds 1-3 left validation empty (a warning only)
    trajs = _two_healthy_of_ten()
    s = export_dataset(tmp_path / "a", trajectories=trajs, val_fraction=0.2, split_seed=seed)
    assert s.validation.tasks_considered == 2 and len(s.validation.tasks) == 1
    assert s.validation.records == {"train": 2, "validation": 2}
    assert s.validation.tasks_written == {"train": 1, "validation": 1}
    assert _tasks_of(tmp_path / "a" / "validation.metadata.jsonl") == set(s.validation.tasks)
    b = export_dataset(tmp_path / "b", trajectories=trajs[::-1], val_fraction=0.2, split_seed=seed)
    assert b.validation.tasks == s.validation.tasks  # whatever the order of the records


def test_the_filters_narrow_the_tasks_the_split_chooses_from(tmp_path):
    trajs = _trajs(tasks=6) + [make_traj("low", "task-low", score=0.5)]
    s = export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=trajs, val_fraction=0.5)
    assert s.validation.tasks_considered == 7
    s = export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=trajs, val_fraction=0.5,
                       filters=ExportFilters(min_score=0.9))
    assert s.validation.tasks_considered == 6 and "task-low" not in s.validation.tasks
    with pytest.raises(InputError, match="at least 2 tasks; the sources hold 1 with a record to export"):
        export_dataset(tmp_path / "c", trajectories=_two_healthy_of_ten()[:10] + [make_traj("h", "task-0")],
                       val_fraction=0.5)


class _Reads(list):
    """A list of trajectories that counts how often the export reads it through."""

    reads = 0

    def __iter__(self):  # counted when the reading starts (``iter(src) is src`` reads nothing)
        self.reads += 1
        yield from super().__iter__()


@pytest.mark.parametrize("placebo", [False, True])
def test_a_split_reads_its_sources_once_and_writes_what_three_passes_wrote(tmp_path, placebo):
    """`--val-fraction` read the file three times (its held-out tasks, the tasks to choose from, the export; with
    `--class` every failed run labelled twice): now once, the records waiting on disk until the tasks are chosen. The
    split and every record are those of the three passes: each task's records on the side its task was given, in the
    order of the file, as one file per split of a whole export would have them."""
    trajs = _Reads(_trajs(tasks=12, runs=3))
    trajs.append(make_traj("h-0", "task-held", split="heldout"))
    s = export_dataset(tmp_path / "split", source=SourceKind.all, trajectories=trajs, val_fraction=0.25,
                       placebo=placebo, placebo_window=4, filters=ExportFilters(max_per_task=2))
    assert trajs.reads == 1
    whole = export_dataset(tmp_path / "whole", source=SourceKind.all, trajectories=list(trajs),
                           filters=ExportFilters(max_per_task=2))
    assert s.validation.tasks == sorted(validation_tasks({f"task-{i}" for i in range(12)}, 0.25))
    assert s.validation.tasks_considered == 12 and s.heldout_tasks_excluded == 1
    rows = {m["id"]: r for r, m in zip(read_jsonl(tmp_path / "whole" / "data.jsonl"),
                                       read_jsonl(tmp_path / "whole" / "metadata.jsonl"), strict=True)}
    for part in ("train", "validation"):
        metas = read_jsonl(tmp_path / "split" / f"{part}.metadata.jsonl")
        assert {m["task_id"] in s.validation.tasks for m in metas} == {part == "validation"}
        ids = [m["id"] for m in metas]
        assert ids == [i for i in rows if i in set(ids)]  # in the file's order
        if not placebo:
            assert read_jsonl(tmp_path / "split" / f"{part}.jsonl") == [rows[m["id"]] for m in metas]
    assert s.records == whole.records == 24
    assert not list((tmp_path / "split").glob(".export-*")) and not list((tmp_path / "split").rglob("*.pickle"))
