"""A checkpoint database SQLite finds damaged -- cut short by a crash or a full disk in the middle of a write, a page
overwritten -- is one error line naming the file, exit 2, for every command that reads it. It was a
``sqlite3.DatabaseError: database disk image is malformed`` traceback (exit 1) from `approve` and `reject`
(scripts/fuzz_cli.py, once its workspace held a run waiting for review, cut the checkpoint database)."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.checkpoint import open_checkpointer


def _database(runs) -> bytes:
    """A checkpoint database of ~30 pages, as bytes."""
    with open_checkpointer("sqlite", runs / "r") as saver:
        saver.conn.execute("CREATE TABLE pad (x)")
        saver.conn.executemany("INSERT INTO pad VALUES (?)", [("x" * 500,)] * 200)
    return (runs / "checkpoints.sqlite").read_bytes()


@pytest.mark.parametrize("cut", [100, 4096, 12295, 0.5])
def test_a_cut_checkpoint_database_is_an_input_error_naming_it(tmp_path, cut):
    runs = tmp_path / "runs"
    (runs / "r").mkdir(parents=True)
    raw = _database(runs)
    (runs / "checkpoints.sqlite").write_bytes(raw[:int(len(raw) * cut) if isinstance(cut, float) else cut])
    with pytest.raises(InputError) as e, open_checkpointer("sqlite", runs / "r") as saver:
        list(saver.list({"configurable": {"thread_id": "r"}}))
    assert e.value.source == str(runs / "checkpoints.sqlite")
    assert "is damaged (database disk image is malformed)" in e.value.reason


def test_a_malformed_error_of_another_database_is_not_blamed_on_the_checkpoints(tmp_path):
    import sqlite3

    (tmp_path / "r").mkdir()
    with pytest.raises(sqlite3.DatabaseError, match="malformed"), open_checkpointer("sqlite", tmp_path / "r"):
        raise sqlite3.DatabaseError("database disk image is malformed")  # its code unset: not SQLite's own


@pytest.mark.parametrize("command", ["approve", "reject"])
def test_approve_and_reject_on_a_cut_checkpoint_database_say_so_in_one_line(tmp_path, capsys, monkeypatch, command):
    home, harness = tmp_path / "home", tmp_path / "h"
    monkeypatch.setenv("EVOHARNESS_HOME", str(home))
    assert main(["init", str(harness)]) == 0
    run_dir = home / "runs" / "run-x"
    run_dir.mkdir(parents=True)
    settings = Settings.model_validate({"home": str(home), "run": {"harness": str(harness)}})
    (run_dir / "settings.json").write_text(settings.model_dump_json())
    raw = _database(home / "runs")
    (home / "runs" / "checkpoints.sqlite").write_bytes(raw[:len(raw) // 2])
    capsys.readouterr()
    assert main([command, "candidate/r1-x", "--run", "run-x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    runs = home / "runs"
    assert err == [f"error: {runs / 'checkpoints.sqlite'}: the checkpoint database of run.checkpointer 'sqlite' is "
                   "damaged (database disk image is malformed): the runs it holds cannot be read (their run "
                   "directories and the harness repository are untouched). Move it aside with its -wal and -shm files "
                   f"(`cd {runs} && for f in checkpoints.sqlite*; do mv -- \"$f\" \"$f.damaged\"; done`), then put a "
                   "whole copy of it in its place; without a copy the runs it holds cannot go on (new runs start "
                   "afresh)"], err


@pytest.mark.parametrize("damage", ["cut", "empty"])
def test_run_resume_refused_by_its_checkpoint_says_only_the_error(tmp_path, capsys, monkeypatch, damage):
    """`run --resume` said "resuming RUN; ..." on stderr before the refusal (scripts/fuzz_cli.py, a run's checkpoint
    database emptied): two lines for one refusal. The line is said once the checkpoint is read."""
    home, harness = tmp_path / "home", tmp_path / "h"
    monkeypatch.setenv("EVOHARNESS_HOME", str(home))
    assert main(["init", str(harness)]) == 0
    run_dir = home / "runs" / "run-x"
    run_dir.mkdir(parents=True)
    settings = Settings.model_validate({"home": str(home), "run": {"harness": str(harness), "env": "synthetic"}})
    (run_dir / "settings.json").write_text(settings.model_dump_json())
    (run_dir / "trajectories.jsonl").write_text("{}\n")  # it has made progress: no start over
    raw = _database(home / "runs")
    (home / "runs" / "checkpoints.sqlite").write_bytes(raw[:len(raw) // 2] if damage == "cut" else b"")
    capsys.readouterr()
    assert main(["run", "--resume", "run-x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert ("is damaged" if damage == "cut" else "no checkpoint of run run-x") in err[0], err
