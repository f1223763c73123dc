"""A new run's settings.json is whole or absent: a full disk at the run's start never leaves a cut one."""

from __future__ import annotations

import resource

import pytest

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.runner import load_run_settings, save_run_settings


def test_settings_the_disk_refuses_leave_no_cut_file(tmp_path):
    """A cut settings.json made the run id dead: `run --run-id` said the run exists, `run --resume` that its saved
    settings are no JSON. The file size limit (RLIMIT_FSIZE) fails the write as a full disk does."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")}})
    run_dir = tmp_path / "home" / "runs" / "run-x"
    assert len(settings.model_dump_json(indent=2)) > 2048
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))
    try:
        with pytest.raises(OSError):
            save_run_settings(run_dir, settings)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert list(run_dir.iterdir()) == []
    with pytest.raises(InputError, match="no such run"):
        load_run_settings(settings, "run-x")


@pytest.mark.parametrize("damage", ["HEAD damaged", "main damaged", "not a repository", "a link leading nowhere"])
def test_a_harness_repo_that_cannot_be_opened_stops_the_run_before_it_starts(tmp_path, monkeypatch, capsys, damage):
    """`run` whose run.harness git cannot open (a damaged HEAD, main at garbage, a directory with no .git) printed
    its start line, wrote settings.json, evidence.jsonl and run.lock under a new run id, then gave the error: a run
    that never starts was left among the home's runs, which `diagnose RUN` called one that 'has written no
    trajectories yet: try again once its first rollouts are done' (found by scripts/fuzz_cli.py's git states on
    `run`). The repo is opened before the run directory is made now: one error line, no run. A run.harness that is a
    link leading nowhere was taken for a missing repo to make, and said 'file exists' after the run's directory was
    made (the twenty-sixth session's review)."""
    from evoharness.cli import main
    from evoharness.harness_repo.init import init_harness

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOHARNESS_HOME", str(tmp_path / "home"))
    if damage == "a link leading nowhere":
        (tmp_path / "h").symlink_to(tmp_path / "nowhere")
    elif damage == "not a repository":
        (tmp_path / "h").mkdir()
        (tmp_path / "h" / "lessons.md").write_text("- a file, no git\n")
    else:
        init_harness(tmp_path / "h")
        where = {"HEAD damaged": "HEAD", "main damaged": "refs/heads/main"}[damage]
        (tmp_path / "h" / ".git" / where).write_text("garbage\n")
    argv = ["run", "--set", "run.harness=h", "--set", "run.env=synthetic", "--set", "run.model=standin:weak",
            "--set", "sandbox.backend=inprocess", "--set", "run.max_rounds=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    runs = tmp_path / "home" / "runs"
    assert not [p for p in runs.glob("run-*")] if runs.is_dir() else True, list(runs.iterdir())
    if damage == "a link leading nowhere":
        assert err == ["error: h: a symbolic link that cannot be followed: no such file or directory"], err
