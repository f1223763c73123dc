"""`--val-fraction`: one conversation under two task ids (a run imported or queued under another task id, one task
given two ids by two sources) goes to one side of the split, never to train and validation both."""

from __future__ import annotations

from evoharness.cli import main
from evoharness.datasets.export import export_dataset, read_manifest, validation_tasks
from evoharness.datasets.models import SourceKind
from evoharness.traces.store import write_trajectories

from .helpers import make_traj, read_jsonl


def _aliased(n: int = 12) -> list:
    """``n`` tasks, and each task's run again under another task id (``alias-i``) with another final answer: the same
    system message and user turns, not a duplicate record."""
    runs = []
    for i in range(n):
        run = make_traj(f"r{i}", f"task-{i}")
        again = run.model_copy(deep=True, update={"id": f"a{i}", "task_id": f"alias-{i}"})
        again.messages[-1] = {"role": "assistant", "content": f"another final answer {i}"}
        runs += [run, again]
    return runs


def _side(path, part) -> set[str]:
    return {m["task_id"] for m in read_jsonl(path / f"{part}.metadata.jsonl")}


def test_one_conversation_under_two_task_ids_goes_to_one_side(tmp_path):
    runs = _aliased()
    for seed in range(4):
        s = export_dataset(tmp_path / str(seed), source=SourceKind.all, trajectories=runs, val_fraction=0.5,
                           split_seed=seed)
        train, val = _side(tmp_path / str(seed), "train"), _side(tmp_path / str(seed), "validation")
        assert not train & val and len(train | val) == 24
        for i in range(12):  # before: about half the pairs had one task in train and the other in validation
            assert (f"task-{i}" in val) == (f"alias-{i}" in val), (seed, i, sorted(val))
        assert s.records == 24 and len(val) == 12  # round(0.5 x 12 groups) groups of two
        assert s.validation.linked_tasks == sorted([f"alias-{i}", f"task-{i}"] for i in range(12))
    card = (tmp_path / "0" / "README.md").read_text()
    assert ("24 tasks in 12 groups went to one side together: a run of each is the same conversation (system message "
            "and user turns) under another task id (alias-0/task-0, alias-1/task-1, alias-10/task-10 ...).") in card
    assert read_manifest(tmp_path / "0").validation.linked_tasks[0] == ["alias-0", "task-0"]


def test_unlinked_tasks_split_as_before_and_links_chain():
    tasks = {f"task-{i}" for i in range(20)}
    assert validation_tasks(tasks, 0.25, 3) == validation_tasks(tasks, 0.25, 3, linked=())
    # a-b and b-c: one group of three, on one side whatever the seed
    for seed in range(10):
        val = validation_tasks({"a", "b", "c", "d", "e"}, 0.5, seed, linked=[("a", "b"), ("c", "b")])
        assert {"a", "b", "c"} <= val or not {"a", "b", "c"} & val


def test_cli_refuses_a_split_of_one_conversation_under_two_ids(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, _aliased(1))
    assert main(["dataset", "export", "--source", "all", "-t", str(src), "--out", str(tmp_path / "o"),
                 "--val-fraction", "0.5"]) == 2
    assert capsys.readouterr().err == (
        "error: --val-fraction: a split by task needs at least 2 tasks; the sources hold 2 with a record to export "
        "(after --source and the filters; held-out tasks never are), in 1 group of tasks whose runs are one "
        "conversation\n")
