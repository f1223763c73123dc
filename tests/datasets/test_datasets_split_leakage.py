"""`--val-fraction`: one conversation under two task ids (a run imported or queued under another task id, one task
given two ids by two sources) goes to one side of the split, never to train and validation both."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.datasets.export import export_dataset, read_manifest, validation_tasks
from evoharness.datasets.models import ExportFilters, SourceKind
from evoharness.errors import HeldOutRequested
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Split
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
            "and user turns) or simulated-user instruction as a run of another task id of its group (alias-0/task-0, "
            "alias-1/task-1, alias-10/task-10 ...).") in card
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


def _held_and_copy(copy_first: bool) -> list:
    """Tasks task-0..5, a held-out task's run, and that run again under another task id (``other``, marked dev) with
    another final answer; ``other`` has a second run of its own."""
    runs = [make_traj(f"r{i}", f"task-{i}") for i in range(6)]
    held = make_traj("h", "held", split="heldout")
    copy = held.model_copy(deep=True, update={"id": "c", "task_id": "other", "split": Split.dev})
    copy.messages[-1] = {"role": "assistant", "content": "another final answer"}
    pair = [copy, held] if copy_first else [held, copy]
    return runs[:3] + pair + runs[3:] + [make_traj("o2", "other")]


@pytest.mark.parametrize("copy_first", [False, True])
def test_a_held_out_tasks_run_under_another_task_id_is_never_exported(tmp_path, copy_first):
    # before: the copy under task id 'other' (and other's own run) was exported: a held-out task in the training set
    for split in (None, 0.5):
        out = tmp_path / f"{copy_first}-{split}"
        s = export_dataset(out, source=SourceKind.all, trajectories=_held_and_copy(copy_first), val_fraction=split)
        written = {m["task_id"] for f in out.glob("*metadata.jsonl") for m in read_jsonl(f)}
        assert written == {f"task-{i}" for i in range(6)}, written
        assert s.heldout_tasks_excluded == 3 and s.heldout_linked_tasks == ["other"]
        assert "1 of those tasks are held out because a run of each is a held-out task's under another id" in (
            out / "README.md").read_text()


def test_a_task_the_config_holds_out_is_held_out_under_another_id_too(tmp_path):
    runs = _held_and_copy(False)
    runs[3] = runs[3].model_copy(update={"split": Split.dev})  # held out by the config, not by its mark
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=runs, declared_heldout=["held"])
    assert set(s.tasks) == {f"task-{i}" for i in range(6)} and s.heldout_linked_tasks == ["other"]
    with pytest.raises(HeldOutRequested, match="other"):  # asking for it is asking for a held-out task
        export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=runs, declared_heldout=["held"],
                       filters=ExportFilters(tasks=["other"]))


def _reworded(i: int, task: str, wording: int, split: str = "dev"):
    """A run of task ``i`` whose simulated user words it anew (``wording``), with the instruction the user was given."""
    run = make_traj(f"{task}-{wording}", task, split=split)
    run.messages[1] = {"role": "user", "content": f"wording {wording}: hello, help me with job {i}"}
    run.meta["user_instruction"] = f"You are user {i}.  You want job {i} done.\n"
    return run


def test_runs_of_one_instruction_under_two_task_ids_are_linked_though_the_user_words_them_anew(tmp_path):
    # a file's '7' and a rollout's 'tau2:airline/7': the simulated user never opens alike, the instruction is the same
    runs = [_reworded(i, str(i), 0) for i in range(8)] + [_reworded(i, f"tau2:airline/{i}", 1) for i in range(8)]
    runs[-1].meta["user_instruction"] = "You are user 7. You want job 7 done."  # whitespace aside, the same
    for seed in range(4):
        s = export_dataset(tmp_path / str(seed), source=SourceKind.all, trajectories=runs, val_fraction=0.25,
                           split_seed=seed)
        val = set(s.validation.tasks)
        assert len(val) == 4 and all((str(i) in val) == (f"tau2:airline/{i}" in val) for i in range(8)), val
        assert len(s.validation.linked_tasks) == 8
    runs[0] = _reworded(0, "0", 0, split="heldout")
    s = export_dataset(tmp_path / "held", source=SourceKind.all, trajectories=runs)
    assert "tau2:airline/0" not in s.tasks and s.heldout_linked_tasks == ["tau2:airline/0"]


def test_tau_bench_runs_link_only_within_their_task(tmp_path, full_shared_data):
    # tau-bench airline, 50 tasks x 4 trials: every trial words its task anew (193 distinct first user turns); trials
    # 2-3 renamed to another task id are linked to trials 0-1 of their task by the instruction, and to no other task
    runs = list(load_paths([full_shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))
    renamed = [t if int(t.id.rsplit(":", 1)[1]) < 2 else t.model_copy(update={"task_id": f"copy-{t.task_id}"})
               for t in runs]
    s = export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=runs, val_fraction=0.2)
    assert s.validation.linked_tasks == [] and s.validation.tasks_considered == 50
    s = export_dataset(tmp_path / "b", source=SourceKind.all, trajectories=renamed, val_fraction=0.2)
    assert s.validation.linked_tasks == sorted(sorted([t, f"copy-{t}"]) for t in {r.task_id for r in runs})


def test_runs_with_no_system_or_user_text_are_not_one_task(tmp_path):
    # without a guard every such run had the same conversation key: one held-out run would hold out all of them
    runs = [make_traj(f"r{i}", f"task-{i}", split="heldout" if i == 0 else "dev") for i in range(4)]
    for run in runs:
        run.messages = [m for m in run.messages if m["role"] not in ("system", "user")]
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=runs)
    assert s.heldout_linked_tasks == [] and s.heldout_tasks_excluded == 1
