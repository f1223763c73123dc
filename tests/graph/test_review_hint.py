"""The approve/reject commands a run waiting for review prints carry the --config/--set it was given: a run
started with `--set home=DIR` printed `evoharness approve C --run ID`, which looked under the default home and
said 'no such run'."""

from __future__ import annotations

import shlex

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.graph.review_run import review_run_opts


def test_the_printed_approve_line_runs_as_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = review_run_opts(tmp_path / "my home")
    assert main(["run", "--review", *opts]) == 0
    out = capsys.readouterr().out
    approve = next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line)
    argv = shlex.split(approve)  # `evoharness ...`, or `python -m evoharness ...` under pytest
    args = argv[argv.index("evoharness") + 1:]
    assert f"home={tmp_path / 'my home'}" in args and args.index("approve") > args.index("--set")
    assert main(args) == 0, capsys.readouterr().err  # 'no such run under ~/.evoharness/runs' before


def test_approving_in_a_copied_directory_merges_into_the_copys_harness(tmp_path, capsys, monkeypatch):
    """The run's settings record its home and harness as absolute paths: `--set home=COPY/state approve` (or
    reject, run --resume) in a copy merged into the original's harness repository."""
    import shutil

    import git

    demo = tmp_path / "demo"
    init_harness(demo / "h")
    opts = review_run_opts(demo / "state", demo / "h")
    assert main(["run", "--review", *opts]) == 0
    out = capsys.readouterr().out
    approve = shlex.split(next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line))
    branch, run_id = approve[approve.index("approve") + 1], approve[approve.index("--run") + 1]
    copy = tmp_path / "copy"
    shutil.copytree(demo, copy)
    original = git.Repo(demo / "h").heads.main.commit.hexsha
    assert main(["--set", f"home={copy / 'state'}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert git.Repo(demo / "h").heads.main.commit.hexsha == original  # the original's main never moved
    merged = git.Repo(copy / "h").heads.main.commit
    assert merged.hexsha != original and len(merged.parents) == 2  # the verified merge, in the copy


def _review_run(cwd, home, capsys, monkeypatch):
    """A one-round run started in ``cwd`` with the relative harness ``h``, waiting for review: (branch, run id)."""
    monkeypatch.chdir(cwd)
    init_harness(cwd / "h")
    opts = review_run_opts(home)
    assert main(["run", "--review", *opts]) == 0
    out = capsys.readouterr().out
    approve = shlex.split(next(line.split("   (or:")[0].strip() for line in out.splitlines() if " approve " in line))
    return approve[approve.index("approve") + 1], approve[approve.index("--run") + 1]


def test_a_relative_harness_is_the_runs_own_from_another_cwd(tmp_path, capsys, monkeypatch):
    """`run.harness=h` was saved as given and read against the cwd of `approve` / `run --resume`: from another
    directory the merge went to (or created) another repository. Test fails before (./h in the other cwd)."""
    import json

    import git

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    home = tmp_path / "a" / "state"
    branch, run_id = _review_run(tmp_path / "a", home, capsys, monkeypatch)
    saved = json.loads((home / "runs" / run_id / "settings.json").read_text())
    assert saved["run"]["harness"] == str(tmp_path / "a" / "h") and saved["home"] == str(home)
    original = git.Repo(tmp_path / "a" / "h").heads.main.commit.hexsha
    monkeypatch.chdir(tmp_path / "b")
    assert main(["--set", f"home={home}", "approve", branch, "--run", run_id]) == 0, capsys.readouterr()
    assert not (tmp_path / "b" / "h").exists()
    merged = git.Repo(tmp_path / "a" / "h").heads.main.commit
    assert merged.hexsha != original and len(merged.parents) == 2  # the verified merge, in the run's harness


def test_an_older_runs_relative_harness_is_read_against_the_cwd_it_started_from(tmp_path, capsys, monkeypatch):
    """A settings.json written before paths were saved absolute (relative home and harness): the harness is
    found where `<cwd>/<home>/runs/<id>` says the run's cwd was, not in the cwd of the command."""
    import json

    import git

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    branch, run_id = _review_run(tmp_path / "a", "state", capsys, monkeypatch)
    path = tmp_path / "a" / "state" / "runs" / run_id / "settings.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, "home": "state", "run": {**saved["run"], "harness": "h"}}))
    original = git.Repo(tmp_path / "a" / "h").heads.main.commit.hexsha
    monkeypatch.chdir(tmp_path / "b")
    assert main(["--set", f"home={tmp_path / 'a' / 'state'}", "approve", branch, "--run", run_id]) == 0
    assert not (tmp_path / "b" / "h").exists()
    assert git.Repo(tmp_path / "a" / "h").heads.main.commit.hexsha != original
