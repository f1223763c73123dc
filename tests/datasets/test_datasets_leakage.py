"""Leakage: a held-out task never appears in any export (any format, source, placebo or not)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoharness.cli import main
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
from evoharness.datasets.queue import TrainingQueue
from evoharness.errors import InputError
from evoharness.traces.store import write_trajectories

from .helpers import content_label, make_traj


@pytest.fixture(autouse=True)
def _fresh_logging():
    yield
    structlog.reset_defaults()


def _exported_text(out: Path) -> str:
    parts = []
    for p in sorted(out.rglob("*")):
        if p.is_file():
            if p.suffix == ".parquet":
                import pyarrow.parquet as pq

                parts.append(str(pq.read_table(p).to_pylist()))
            else:
                parts.append(p.read_text())
    return "\n".join(parts)


def _mixed(seed_splits: list[str]) -> list:
    """Trajectories over tasks T0..; tasks whose split is heldout are named HELDOUTTASK<i>."""
    trajs = []
    for i, split in enumerate(seed_splits):
        task = f"HELDOUTTASK{i}" if split == "heldout" else f"devtask{i}"
        for k in range(2):
            trajs.append(make_traj(f"{task}-r{k}", task, split=split, score=1.0 if k == 0 else 0.2,
                                   final=f"answer for {task}"))
    return trajs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(splits=st.lists(st.sampled_from(["dev", "heldout", "unknown"]), min_size=2, max_size=8).filter(
    lambda s: "heldout" in s and set(s) != {"heldout"}),
       placebo=st.booleans(), source=st.sampled_from(list(SourceKind)))
def test_no_heldout_task_in_any_export(splits, placebo, source):
    trajs = _mixed(splits)
    tmp = Path(tempfile.mkdtemp())
    try:
        q = TrainingQueue(f"sqlite:///{tmp / 'q.db'}")
        for t in trajs:
            if t.score < 1.0:  # the failures, held-out ones included, sit in the queue
                q.enqueue(t, content_label(t))
        s = export_dataset(tmp / "out", source=source, trajectories=trajs, queue=q, placebo=placebo)
        text = _exported_text(tmp / "out")
        assert "HELDOUTTASK" not in text.replace("heldout_tasks_excluded", "")
        assert s.records > 0 and s.heldout_tasks_excluded > 0
        assert "heldout" not in s.splits
    finally:
        shutil.rmtree(tmp)


@pytest.mark.parametrize("fmt", list(ExportFormat))
@pytest.mark.parametrize("placebo", [False, True])
def test_every_format_excludes_heldout(tmp_path, fmt, placebo):
    trajs = _mixed(["dev", "heldout", "dev", "heldout"])
    s = export_dataset(tmp_path, fmt=fmt, source=SourceKind.all, trajectories=trajs, placebo=placebo)
    assert s.records == 4 and s.heldout_tasks_excluded == 4
    assert "HELDOUTTASK" not in _exported_text(tmp_path).replace("heldout_tasks_excluded", "")


class _Counted(list):
    """A list that counts the items read from it."""

    reads = 0

    def __iter__(self):
        for t in super().__iter__():
            self.reads += 1
            yield t


def test_a_task_heldout_anywhere_is_heldout_everywhere(tmp_path):
    # the same task recorded once as heldout and once as dev, in either order: neither copy is exported
    a, b = make_traj("a", "HELDOUTTASKx", split="heldout"), make_traj("b", "HELDOUTTASKx", split="dev")
    c = make_traj("c", "fine", split="dev")
    texts = []
    # held out first: learnt while writing, one pass; held out after a dev copy went by: the export
    # starts again with the held-out tasks learnt first (the aborted pass, the held-out pass, the export)
    for name, order, reads in (("first", [a, b, c], 3), ("late", [b, c, a], 9)):
        trajs = _Counted(order)
        s = export_dataset(tmp_path / name, source=SourceKind.all, trajectories=trajs)
        assert s.tasks == {"fine": 1} and s.heldout_tasks_excluded == 2 and s.records == 1
        assert trajs.reads == reads, name
        texts.append((tmp_path / name / "data.jsonl").read_text())
        assert "HELDOUTTASK" not in (tmp_path / name / "metadata.jsonl").read_text()
    assert texts[0] == texts[1]
    with pytest.raises(InputError, match="HELDOUTTASKx"):  # asking for a task found held out late
        export_dataset(tmp_path / "asked", source=SourceKind.all, trajectories=[c, a],
                       filters=ExportFilters(tasks=["fine", "HELDOUTTASKx"]))
    assert not (tmp_path / "asked").exists()


def test_declared_heldout_tasks_are_excluded(tmp_path):
    trajs = [make_traj("a", "HELDOUTTASKd", split="dev"), make_traj("c", "fine")]
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=trajs, declared_heldout=["HELDOUTTASKd"])
    assert s.tasks == {"fine": 1}


def test_asking_for_heldout_is_an_error_and_writes_nothing(tmp_path):
    trajs = _mixed(["dev", "heldout"])
    with pytest.raises(InputError, match="never exported"):
        export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=trajs,
                       filters=ExportFilters(splits=["heldout"]))
    with pytest.raises(InputError, match="HELDOUTTASK1"):
        export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=trajs,
                       filters=ExportFilters(tasks=["HELDOUTTASK1", "devtask0"]))
    with pytest.raises(InputError, match="only held-out"):  # a filter that admits nothing else
        export_dataset(tmp_path / "c", source=SourceKind.all, trajectories=trajs,
                       filters=ExportFilters(min_score=0.9), declared_heldout=["devtask0"])
    dev_poor = [make_traj("d", "devtask9", score=0.1), make_traj("h", "HELDOUTTASK9", split="heldout")]
    with pytest.raises(InputError, match="only held-out"):
        export_dataset(tmp_path / "c", source=SourceKind.all, trajectories=dev_poor,
                       filters=ExportFilters(min_score=0.9))
    for d in ("a", "b", "c"):
        assert not (tmp_path / d / "data.jsonl").exists() and not (tmp_path / d / "README.md").exists()


def test_cli_heldout_requests_exit_2(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _mixed(["dev", "heldout"]))
    base = ["dataset", "export", "-t", str(path), "--source", "all", "--out", str(tmp_path / "o")]
    assert main([*base, "--split", "heldout"]) == 2
    assert "never exported" in capsys.readouterr().err
    assert main([*base, "--task", "HELDOUTTASK1"]) == 2
    assert main(["--set", 'datasets.heldout_tasks=["devtask0"]', *base]) == 2
    assert "only held-out" in capsys.readouterr().err
    assert not (tmp_path / "o" / "data.jsonl").exists()
    assert main([*base, "--min-score", "0.99", "--class", "F1"]) == 0  # nothing matches: not an error
    assert "wrote 0 records" in capsys.readouterr().out
    assert main(base) == 0
    assert "HELDOUTTASK" not in (tmp_path / "o" / "data.jsonl").read_text()
    assert "warning" not in capsys.readouterr().err


def test_cli_a_task_that_admits_nothing_is_warned(tmp_path, capsys):
    """`--task` with a typo wrote 0 records and said nothing but the count; a task that admits a record is silent."""
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _mixed(["dev"]))
    base = ["dataset", "export", "-t", str(path), "--source", "all", "--out", str(tmp_path / "o")]
    assert main([*base, "--task", "devtask0", "--task", "no-such-task"]) == 0
    out, err = capsys.readouterr()
    assert "warning: --task no-such-task: no record of this task was written" in err
    assert "devtask0" not in err and "wrote 0 records" not in out  # devtask0's records were written


def test_cli_a_task_that_admits_nothing_in_an_empty_export_is_warned_once(tmp_path, capsys):
    """`--task X` that wrote nothing at all printed 'no record was written: none of ... passed --task X' and then
    '--task X: no record of this task was written': the same thing twice. The first warning names the task."""
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _mixed(["dev"]))
    base = ["dataset", "export", "-t", str(path), "--source", "all", "--out", str(tmp_path / "o")]
    assert main([*base, "--task", "no-such-task"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: no record was written: ") and "--task no-such-task" in err[0]


def test_cli_an_export_that_writes_nothing_says_why(tmp_path, capsys):
    """'wrote 0 records ..., 0 held-out excluded, 0 skipped' and nothing else: the filters that admitted nothing, an
    empty source and skipped candidates were not told apart. An export that writes a record says no such thing."""
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _mixed(["dev"]))
    base = ["dataset", "export", "-t", str(path), "--out", str(tmp_path / "o")]
    for args, why in (
            (["--source", "all", "--min-score", "0.99", "--class", "F1"],  # a fresh home: no queue was read
             "none of the runs in --trajectories (no training queue yet) passed --min-score 0.99 --class F1"),
            (["--source", "healthy", "--class", "F4"],
             "none of the runs labelled healthy in --trajectories passed --class F4")):
        assert main([*base, *args]) == 0
        out, err = capsys.readouterr()
        assert "wrote 0 records" in out
        assert err.splitlines() == [f"warning: no record was written: {why}"]
    failed = tmp_path / "failed.jsonl"
    write_trajectories(failed, [t for t in _mixed(["dev"]) if t.score < 1])
    assert main(["dataset", "export", "-t", str(failed), "--out", str(tmp_path / "f")]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: no record was written: --source healthy found none of the runs labelled healthy in --trajectories"]
    assert main([*base, "--source", "all"]) == 0
    assert "no record was written" not in capsys.readouterr().err
    # with a queue, the warning names its items too (it named them on a fresh home, where no queue was read)
    home = tmp_path / "home"
    queued = make_traj("q1", "devtaskq", score=0.0)
    TrainingQueue(f"sqlite:///{home / 'queue.db'}").enqueue(queued, content_label(queued))
    assert main([*base, "--set", f"home={home}", "--source", "all", "--class", "F2"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: no record was written: none of the runs in --trajectories and the training queue's items passed "
        "--class F2"]


def test_queue_heldout_marks_apply_to_file_trajectories(tmp_path):
    q = TrainingQueue(f"sqlite:///{tmp_path / 'q.db'}")
    h = make_traj("qh", "HELDOUTTASKq", split="heldout", score=0.1)
    q.enqueue(h, content_label(h))
    assert q.heldout_task_ids() == {"HELDOUTTASKq"}
    file_copy = make_traj("fh", "HELDOUTTASKq", split="dev")  # the file says dev; the queue knows better
    trajs = [file_copy, make_traj("ok", "fine")]
    s = export_dataset(tmp_path / "o", source=SourceKind.all, trajectories=trajs, queue=q)
    assert s.tasks == {"fine": 1}


def test_one_shot_iterators_are_refused():
    with pytest.raises(InputError, match="re-iterable"):
        export_dataset(Path(tempfile.mkdtemp()), source=SourceKind.all,
                       trajectories=iter([make_traj("a")]))
