"""A resumed run keeps the settings it started with; what the resume was given otherwise is said, not dropped
silently: `run --resume` with `--set run.max_rounds=1 --set run.budget=100` (or an edited --config) ran the run's
two rounds on its 4,000 budget without a word."""

from __future__ import annotations

import json

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness


def test_a_resume_says_which_given_settings_it_did_not_apply(tmp_path, capsys):
    init_harness(tmp_path / "h")
    opts = ["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'h'}",
            "--set", "run.env=synthetic", "--set", "run.model=scripted:weak", "--set", "run.rollouts=4",
            "--set", "run.dev_limit=8",
            "--set", "run.heldout_limit=3", "--set", "run.max_rounds=1", "--set", "run.budget=4000",
            "--set", "sandbox.backend=inprocess", "--set", "roles.kind=playbook", "--set", "log_level=error"]
    assert main([*opts, "run", "--run-id", "run-x"]) == 0
    capsys.readouterr()
    assert main([*opts, "run", "--resume", "run-x"]) == 0
    assert "not applied" not in capsys.readouterr().err  # the same settings: nothing to say
    assert main([*opts, "--set", "run.max_rounds=3", "--set", "run.budget=100", "run", "--resume", "run-x"]) == 0
    err = capsys.readouterr().err
    assert "keeps the settings it started with, not applied:" in err, err
    assert "run.budget=100.0 (the run's: 4000.0)" in err and "run.max_rounds=3 (the run's: 1)" in err, err
    saved = json.loads((tmp_path / "state" / "runs" / "run-x" / "settings.json").read_text())
    assert saved["run"]["budget"] == 4000 and saved["run"]["max_rounds"] == 1


def test_a_bare_resume_lists_no_default_as_not_applied(tmp_path, capsys):
    """Only settings the resume was given are listed: `run --resume ID` alone listed every default that differs
    from the run's own settings (run.max_rounds=3 (the run's: 1), run.dev_limit=0 (the run's: 8), ...)."""
    init_harness(tmp_path / "h")
    home = ["--set", f"home={tmp_path / 'state'}"]
    opts = [*home, "--set", f"run.harness={tmp_path / 'h'}", "--set", "run.model=scripted:weak",
            "--set", "run.rollouts=4", "--set", "run.dev_limit=8", "--set", "run.heldout_limit=3",
            "--set", "run.max_rounds=1", "--set", "sandbox.backend=inprocess", "--set", "log_level=error"]
    assert main([*opts, "run", "--run-id", "run-y"]) == 0
    capsys.readouterr()
    assert main([*home, "run", "--resume", "run-y"]) == 0
    assert "not applied" not in capsys.readouterr().err
    assert main([*home, "--set", "run.max_rounds=2", "run", "--resume", "run-y"]) == 0
    err = capsys.readouterr().err
    assert "not applied: run.max_rounds=2 (the run's: 1)\n" in err, err
