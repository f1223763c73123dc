"""A SQLite checkpointer and copied runs. 'sqlite:PATH' was read against the cwd: `approve` or `run --resume` from
another directory found no checkpoint there and started the run over (every round re-run over its trajectories).
An absolute PATH stays the same in a copied run directory, so resuming the copy wrote into the original's checkpoint.
Now a relative PATH is read against the run directory (a copy has its own), a copy on an absolute PATH is refused
with one `error:` line (as on Postgres), and a run that made progress but has no checkpoint where its settings point
is refused rather than started over."""

from __future__ import annotations

import shlex
import shutil
import sqlite3

import git

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.graph.review_run import review_run_opts


def _checkpoints(path, run_id: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?", (run_id,)).fetchone()[0]


def _waiting_run(demo, spec, capsys):
    """A one-round run in ``demo`` on the checkpointer ``spec``, waiting for review: (branch, run id)."""
    init_harness(demo / "h")
    opts = review_run_opts(demo / "state", demo / "h", f"run.checkpointer={spec}")
    assert main(["run", "--review", *opts]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    approve = shlex.split(next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line))
    return approve[approve.index("approve") + 1], approve[approve.index("--run") + 1]


def test_a_relative_sqlite_path_is_the_run_directorys_from_any_cwd_and_a_copy_has_its_own(tmp_path, capsys,
                                                                                            monkeypatch):
    demo, copy, elsewhere = tmp_path / "demo", tmp_path / "copy", tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    branch, run_id = _waiting_run(demo, "sqlite:ck.sqlite", capsys)
    original = demo / "state" / "runs" / run_id / "ck.sqlite"
    assert original.is_file() and not (tmp_path / "ck.sqlite").exists()
    shutil.copytree(demo, copy)
    before, demo_main = _checkpoints(original, run_id), git.Repo(demo / "h").heads.main.commit.hexsha
    monkeypatch.chdir(elsewhere)  # the copy, approved from another directory: its own checkpoint, its own harness
    assert main(["--set", f"home={copy / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert _checkpoints(original, run_id) == before
    assert _checkpoints(copy / "state" / "runs" / run_id / "ck.sqlite", run_id) > before
    assert len(git.Repo(copy / "h").heads.main.commit.parents) == 2
    assert git.Repo(demo / "h").heads.main.commit.hexsha == demo_main
    assert list(elsewhere.iterdir()) == []
    # the original, from yet another directory, is still waiting for its review (it was not started over)
    monkeypatch.chdir(tmp_path)
    assert main(["--set", f"home={demo / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert _checkpoints(original, run_id) > before


def test_a_copy_never_writes_the_originals_absolute_sqlite_checkpoint(tmp_path, capsys, monkeypatch):
    demo, copy, elsewhere = tmp_path / "demo", tmp_path / "copy", tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = tmp_path / "shared" / "ck.sqlite"
    branch, run_id = _waiting_run(demo, f"sqlite:{db}", capsys)
    shutil.copytree(demo, copy)
    before = _checkpoints(db, run_id)
    copy_main = git.Repo(copy / "h").heads.main.commit.hexsha
    monkeypatch.chdir(elsewhere)
    for args in (["approve", branch, "--run", run_id], ["run", "--resume", run_id]):
        assert main(["--set", f"home={copy / 'state'}", *args]) == 2
        out, err = capsys.readouterr()
        errors = [ln for ln in err.splitlines() if ln.startswith("error")]
        assert errors == [err.splitlines()[-1]] and "Traceback" not in out + err
        assert "SQLite checkpoint" in errors[0] and "is a copy" in errors[0]
        assert str(demo / "state" / "runs" / run_id) in errors[0]
    assert _checkpoints(db, run_id) == before  # before: the copy's approve checkpointed into it
    assert git.Repo(copy / "h").heads.main.commit.hexsha == copy_main
    assert main(["--set", f"home={demo / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert _checkpoints(db, run_id) > before


def test_a_moved_run_on_an_absolute_sqlite_path_takes_its_thread_over(tmp_path, capsys):
    demo, moved = tmp_path / "demo", tmp_path / "moved"
    branch, run_id = _waiting_run(demo, f"sqlite:{tmp_path / 'ck.sqlite'}", capsys)
    shutil.move(demo, moved)
    assert main(["--set", f"home={moved / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert len(git.Repo(moved / "h").heads.main.commit.parents) == 2


def test_a_run_directory_copied_without_its_checkpoint_is_refused_not_started_over(tmp_path, capsys):
    demo, other = tmp_path / "demo", tmp_path / "other"
    branch, run_id = _waiting_run(demo, "sqlite", capsys)  # the default: <home>/runs/checkpoints.sqlite
    (other / "state" / "runs").mkdir(parents=True)
    shutil.copytree(demo / "state" / "runs" / run_id, other / "state" / "runs" / run_id)
    shutil.copytree(demo / "h", other / "h")  # the harness with it (else refused as a copy without its harness)
    lines = (other / "state" / "runs" / run_id / "trajectories.jsonl").read_bytes()
    assert main(["--set", f"home={other / 'state'}", "run", "--resume", run_id]) == 2
    out, err = capsys.readouterr()
    last = err.splitlines()[-1]
    assert [ln for ln in err.splitlines() if ln.startswith("error")] == [last] and "Traceback" not in out + err
    assert f"no checkpoint of run {run_id} in {other / 'state' / 'runs' / 'checkpoints.sqlite'}" in last
    assert (other / "state" / "runs" / run_id / "trajectories.jsonl").read_bytes() == lines  # nothing re-run
