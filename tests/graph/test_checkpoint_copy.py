"""A copied run directory whose run uses a Postgres checkpointer names the original's thread (the run id) in the
same database: `approve` or `run --resume` in the copy wrote its rounds into the original's checkpoint. The copy
is refused with one `error:` line; a moved directory takes its thread over. Runs for real when
EVOHARNESS_TEST_POSTGRES is set (scripts/services.sh starts PostgreSQL); skipped otherwise."""

from __future__ import annotations

import shlex
import shutil

import git
import pytest

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.graph.review_run import review_run_opts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]




def _checkpoints(url: str, run_id: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", (run_id,)).fetchone()[0]


def _waiting_run(demo, url, capsys):
    """A one-round run in ``demo`` on the Postgres checkpointer ``url``, waiting for review: (branch, run id)."""
    init_harness(demo / "h")
    opts = review_run_opts(demo / "state", demo / "h", f"run.checkpointer={url}")
    assert main(["run", "--review", *opts]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    approve = shlex.split(next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line))
    return approve[approve.index("approve") + 1], approve[approve.index("--run") + 1]


def test_a_copy_never_writes_the_originals_postgres_checkpoint(tmp_path, capsys, pg_checkpointer):
    demo, copy = tmp_path / "demo", tmp_path / "copy"
    branch, run_id = _waiting_run(demo, pg_checkpointer, capsys)
    shutil.copytree(demo, copy)
    before = _checkpoints(pg_checkpointer, run_id)
    copy_main = git.Repo(copy / "h").heads.main.commit.hexsha
    for args in (["approve", branch, "--run", run_id], ["run", "--resume", run_id]):
        assert main(["--set", f"home={copy / 'state'}", *args]) == 2
        out, err = capsys.readouterr()
        last = err.splitlines()[-1]  # after `run --resume`'s progress line 'resuming RUN'
        assert [ln for ln in err.splitlines() if ln.startswith("error")] == [last]
        assert "is a copy" in last and str(demo / "state" / "runs" / run_id) in last
        assert "Traceback" not in out + err
    assert _checkpoints(pg_checkpointer, run_id) == before  # before: the copy's approve checkpointed into it
    assert git.Repo(copy / "h").heads.main.commit.hexsha == copy_main  # nothing merged in the copy either
    # the original itself is still its own: its approve goes on
    assert main(["--set", f"home={demo / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert _checkpoints(pg_checkpointer, run_id) > before


def test_a_moved_run_directory_takes_its_thread_over(tmp_path, capsys, pg_checkpointer):
    demo, moved = tmp_path / "demo", tmp_path / "moved"
    branch, run_id = _waiting_run(demo, pg_checkpointer, capsys)
    shutil.move(demo, moved)
    assert main(["--set", f"home={moved / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert len(git.Repo(moved / "h").heads.main.commit.parents) == 2  # merged, in the moved harness


def test_runs_claiming_their_threads_at_once_on_a_fresh_database_all_succeed(pg_checkpointer, tmp_path):
    """claim_thread created its table with CREATE TABLE IF NOT EXISTS outside the setup lock: runs started at once
    on a fresh database raced: all but one failed with psycopg's UniqueViolation on pg_type."""
    import threading

    from evoharness.graph.checkpoint import open_checkpointer
    from evoharness.graph.threads import claim_thread

    n = 6
    start, errors = threading.Barrier(n), []

    def run(i: int) -> None:
        run_dir = tmp_path / f"run-{i}"
        run_dir.mkdir()
        with open_checkpointer(pg_checkpointer, run_dir) as saver:
            start.wait(timeout=60)
            try:
                claim_thread(saver, pg_checkpointer, f"run-{i}", run_dir)
            except Exception as e:  # noqa: BLE001 -- the test reports any failure
                errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
