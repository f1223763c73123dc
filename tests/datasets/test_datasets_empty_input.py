"""An empty input file is an error for every dataset command (as for `diagnose`, `import`, `label`): one
`error:` line naming the file, exit 2, and nothing written. Each of these exited 0 with "0 ..." before."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.traces.store import write_trajectories

from .helpers import make_traj


@pytest.fixture(params=["", "\n  \n\n"], ids=["empty", "blank-lines"])
def empty(request, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text(request.param)
    return path


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_validate_of_an_empty_file_or_export_is_an_error(empty, fmt, capsys):
    assert main(["dataset", "validate", str(empty), "--format", fmt]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {empty}: empty file, no records to validate\n"
    export_dir = empty.parent / "export"
    export_dir.mkdir()
    (export_dir / "data.jsonl").write_text(empty.read_text())
    assert main(["dataset", "validate", str(export_dir), "--format", fmt]) == 2
    assert capsys.readouterr().err == f"error: {export_dir / 'data.jsonl'}: empty file, no records to validate\n"


def test_validate_of_a_parquet_without_rows_is_an_error(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"messages": pa.array([], pa.list_(pa.struct([("role", pa.string())]))),
                             "tools": pa.array([], pa.string())}), path)
    assert main(["dataset", "validate", str(path), "--format", "hf"]) == 2
    assert capsys.readouterr().err == f"error: {path}: empty file, no records to validate\n"


def test_enqueue_of_an_empty_file_is_an_error_and_creates_no_queue(empty, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(empty), "--url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {empty}: empty file, no trajectories to enqueue\n"
    assert not (tmp_path / "queue.db").exists()


def test_export_of_an_empty_trajectory_file_is_an_error_and_writes_nothing(empty, tmp_path, capsys):
    out_dir = tmp_path / "ex"
    for source in ("healthy", "all"):
        assert main(["dataset", "export", "--out", str(out_dir), "--source", source,
                     "--trajectories", str(empty)]) == 2
        assert capsys.readouterr().err == f"error: {empty}: empty file, no trajectories to export\n"
        assert not out_dir.exists()


def test_a_file_with_records_still_goes_through(tmp_path, capsys):
    """The check reads only to the first record: a real file is enqueued and exported as before."""
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("a", score=1.0), make_traj("b", score=0.0)])
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(path), "--url", url]) == 0
    assert capsys.readouterr().out.startswith("2 trajectories, ")
    assert main(["dataset", "export", "--out", str(tmp_path / "ex"), "--trajectories", str(path)]) == 0
    assert "wrote 1 record " in capsys.readouterr().out
    assert main(["dataset", "validate", str(tmp_path / "ex")]) == 0
    assert capsys.readouterr().out == "1 records, all valid (openai)\n"


def test_validate_of_a_fifo_says_what_it_is_not_that_it_is_missing(tmp_path, capsys):
    """'dataset validate FIFO' said 'FIFO: no such file' of a path that exists (export and enqueue already said
    'not a regular file'); it still reads nothing from it (a FIFO would hang the reader)."""
    import os

    fifo = tmp_path / "data.jsonl"
    os.mkfifo(fifo)
    assert main(["dataset", "validate", str(fifo)]) == 2
    assert capsys.readouterr().err == f"error: {fifo}: not a regular file (a FIFO, socket or device is refused)\n"
    assert main(["dataset", "validate", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing.jsonl'}: no such file or directory\n"


def test_enqueue_of_a_malformed_file_is_an_error_and_creates_no_queue(tmp_path, capsys):
    """A non-empty file whose first record is no trajectory stopped with one error line but left an empty queue
    database behind (the queue was opened before the file was read)."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"not": "a trajectory"\n')
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(path), "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "queue.db").exists()


def test_enqueue_of_only_healthy_runs_still_creates_the_queue_it_names(tmp_path, capsys):
    path = tmp_path / "ok.jsonl"
    write_trajectories(path, [make_traj("a", score=1.0)])
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(path), "--url", url]) == 0
    assert capsys.readouterr().out == "1 trajectory, 0 content failures, 0 newly queued (0 in queue)\n"
    assert (tmp_path / "queue.db").exists()


def test_labels_from_a_fifo_say_what_they_are_not_that_they_are_missing(tmp_path, capsys):
    """'dataset export --labels <(...)' (a shell's process substitution, /dev/fd/N: a pipe) said 'no such file' of a
    path that exists; it still reads nothing from it."""
    import os

    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj("x0")])
    fifo = tmp_path / "labels.jsonl"
    os.mkfifo(fifo)
    assert main(["dataset", "export", "-o", str(tmp_path / "out"), "--source", "all", "-t", str(src),
                 "--labels", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --labels {fifo}: not a regular file (a FIFO") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
