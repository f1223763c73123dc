"""A new run's id names its directory under <home>/runs: `run --run-id ../x` made the run at <home>/x (outside runs/,
where no listing, report or the service finds it) and `a/b` a nested one; ids the service refuses are refused here
too, as one error line, with nothing written."""

from __future__ import annotations

import pytest

from evoharness.cli import main

RUN = ["--set", "run.env=synthetic", "--set", "run.model=scripted:weak", "--set", "run.rollouts=1",
       "--set", "run.dev_limit=2", "--set", "run.heldout_limit=1", "--set", "run.max_rounds=1",
       "--set", "sandbox.backend=inprocess", "--set", "roles.kind=playbook", "--set", "log_level=error"]


@pytest.mark.parametrize("run_id", ["../x", "a/b", "..", "-x", ".hidden", "x" * 129])
def test_a_run_id_that_is_no_plain_name_is_one_error_line_and_nothing_is_written(run_id, tmp_path, capsys):
    home = tmp_path / "state"
    code = main(["--set", f"home={home}", "--set", f"run.harness={tmp_path / 'h'}", *RUN, "run", "--run-id", run_id])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --run-id") and len(err.strip().splitlines()) == 1, err
    assert not home.exists() or not any(home.rglob("settings.json"))


@pytest.mark.parametrize("run_id", ["../outside", "../../etc", "a/b", "-x", "a\nb", "x" * 129])
def test_resume_checks_the_id_before_it_reads_a_path_made_of_it(run_id, tmp_path, capsys):
    """Was: `run --resume ../outside` read <home>/../outside/settings.json, a run saved outside runs/ was resumed
    from there; a newline in the id was echoed into the error as two lines."""
    home = tmp_path / "state"
    (home / "outside").mkdir(parents=True)
    (home / "outside" / "settings.json").write_text("{}")  # a run's settings where no run of <home>/runs is
    code = main(["--set", f"home={home / 'inner'}", *RUN, "run", "--resume", run_id])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --resume: ") and "a run id is" in err, err
    assert len(err.strip().splitlines()) == 1
