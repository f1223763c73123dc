"""The approve/reject commands a run waiting for review prints carry the --config/--set it was given: a run
started with `--set home=DIR` printed `evoharness approve C --run ID`, which looked under the default home and
said 'no such run'."""

from __future__ import annotations

import shlex

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness


def test_the_printed_approve_line_runs_as_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = ["--set", f"home={tmp_path / 'my home'}", "--set", "run.harness=h", "--set", "run.env=synthetic",
            "--set", "run.model=scripted:weak", "--set", "run.rollouts=8", "--set", "run.dev_limit=8",
            "--set", "run.heldout_limit=3", "--set", "run.max_rounds=1", "--set", "sandbox.backend=inprocess",
            "--set", "roles.kind=playbook", "--set", "log_level=error"]
    assert main(["run", "--review", *opts]) == 0
    out = capsys.readouterr().out
    approve = next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line)
    argv = shlex.split(approve)  # `evoharness ...`, or `python -m evoharness ...` under pytest
    args = argv[argv.index("evoharness") + 1:]
    assert f"home={tmp_path / 'my home'}" in args and args.index("approve") > args.index("--set")
    assert main(args) == 0, capsys.readouterr().err  # 'no such run under ~/.evoharness/runs' before
