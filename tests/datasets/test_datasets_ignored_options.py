"""`dataset export` refuses an option its --source would ignore, as it does --labels with --source queue: the
export came out of another source than the one the command line named, said nowhere."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.diagnosis.models import FailureClass
from evoharness.traces.store import write_trajectories

from .helpers import content_label, make_traj


@pytest.fixture
def sources(tmp_path):
    from evoharness.datasets.queue import TrainingQueue

    url = f"sqlite:///{tmp_path / 'queue.db'}"
    queued = make_traj("q1", "t-queue", score=0.1)
    TrainingQueue(url).enqueue(queued, content_label(queued, FailureClass.F4))
    mine = tmp_path / "mine.jsonl"
    write_trajectories(mine, [make_traj(f"m{i}", f"t-mine-{i}") for i in range(3)])
    return url, mine


@pytest.mark.parametrize(("source", "given", "named"), [
    ("queue", "trajectories", "--trajectories"),  # wrote the queue's 1 record, none of the file's 3
    ("healthy", "url", "--url"),  # read no queue at all
])
def test_an_option_the_source_ignores_is_refused(sources, tmp_path, capsys, source, given, named):
    url, mine = sources
    args = ["dataset", "export", "--source", source, "--out", str(tmp_path / "out")]
    args += ["-t", str(mine)] if source != "queue" or given == "trajectories" else []
    args += ["--url", url] if source != "healthy" or given == "url" else []
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {named} ") and "--source all" in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_sources_named_are_the_ones_read(sources, tmp_path, capsys):
    url, mine = sources
    for source, records in (("queue", "1 record"), ("healthy", "3 records"), ("all", "4 records")):
        args = ["dataset", "export", "--source", source, "--out", str(tmp_path / source)]
        args += ["-t", str(mine)] if source != "queue" else []
        args += ["--url", url] if source != "healthy" else []
        assert main(args) == 0, capsys.readouterr().err
        assert f"wrote {records} (" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value", "valid"), [
    ("--class", "F9", "healthy | F1 | F2 | F3 | F4 | E | unknown"),
    ("--split", "train", "dev | heldout | unknown"),
])
def test_a_filter_value_that_does_not_exist_names_the_option_and_the_values_it_takes(
        sources, tmp_path, capsys, option, value, valid):
    """`--class F9` said "'F9' is not a valid FailureClass": a Python type's name, no option, no way to the right
    value. Now one line names the option and every value it takes."""
    _, mine = sources
    args = ["dataset", "export", "--source", "healthy", "-t", str(mine), "--out", str(tmp_path / "out"), option, value]
    assert main(args) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: {option}: {value!r} is not one of {valid}", err
    assert not (tmp_path / "out").exists()


def test_a_fresh_home_gets_no_empty_queue_from_an_export(tmp_path, capsys):
    """`dataset export --source all` on a home where nothing was enqueued made an empty queue.db, even when its
    trajectory file then failed; `--source queue` there wrote an empty set (and the file). Now --source all exports the
    file alone and makes nothing, and --source queue says there is no queue yet."""
    home = tmp_path / "home"
    good, bad = tmp_path / "mine.jsonl", tmp_path / "bad.jsonl"
    write_trajectories(good, [make_traj("m0", "t-mine-0")])
    bad.write_text('{"bad\n')
    given = ["--set", f"home={home}", "dataset", "export"]
    assert main([*given, "--source", "all", "-t", str(bad), "--out", str(tmp_path / "a")]) == 2
    assert main([*given, "--source", "all", "-t", str(good), "--out", str(tmp_path / "b")]) == 0
    assert "wrote 1 record " in capsys.readouterr().out
    assert main([*given, "--source", "queue", "--out", str(tmp_path / "c")]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: --source queue: no training queue yet: nothing was enqueued"), err
    assert not (home / "queue.db").exists() and not (tmp_path / "c").exists()
