"""A candidate's branch deleted while its run waits for review (a `git branch -D` clean-up): `approve` said 'no such
candidate branch' -- after the run had taken the decision -- and the run was wedged: `approve` and `reject` then said
'the run is not waiting for a review', and `run --resume` repeated 'no such candidate branch' for ever. The merge
records it as a refused merge, as it does a branch moved after verification, and the run goes on to its end."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.graph.review_run import review_run_opts


def _waiting_run(tmp_path, capsys, monkeypatch) -> tuple[list[str], str, str]:
    """A run on a harness repo ``tmp_path / "h"`` that waits for review: its options, the candidate and the run id."""
    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = review_run_opts(tmp_path / "state")
    assert main(["run", "--review", *opts]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if " approve " in x]
    words = shlex.split(lines[0].split("   (or:")[0])
    return opts, words[words.index("approve") + 1], words[words.index("--run") + 1]


def test_approving_a_candidate_whose_branch_was_deleted_is_recorded_and_the_run_ends(tmp_path, capsys, monkeypatch):
    opts, branch, run_id = _waiting_run(tmp_path, capsys, monkeypatch)
    subprocess.run(["git", "-C", str(tmp_path / "h"), "branch", "-q", "-D", branch], check=True)
    main_before = subprocess.run(["git", "-C", str(tmp_path / "h"), "rev-parse", "main"], capture_output=True,
                                 text=True, check=True).stdout
    assert main([*opts, "approve", branch, "--run", run_id]) == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((tmp_path / "state" / "runs" / run_id / "summary.json").read_text())
    assert summary["merged"] == []
    reason = next(r["reason"] for r in summary["rejected"] if r["branch"] == branch)
    assert reason.startswith("accepted, not merged: no such candidate branch"), reason
    assert subprocess.run(["git", "-C", str(tmp_path / "h"), "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout == main_before  # main did not move


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_deleted_candidate_whose_commit_git_pruned_too_is_recorded_and_the_run_ends(tmp_path, capsys, monkeypatch,
                                                                                       decision):
    """The branch deleted and its commit pruned by git (``gc --prune=now``, or git's own gc two weeks on): `approve`
    and `reject` stopped with a ValueError traceback ('SHA ... could not be resolved') every time -- the review node
    read the missing commit for its static review, then the rejection its tree -- and the run was wedged as before
    561ffbb. Now nothing is reviewed or noted on a commit that is gone; the outcome is recorded and the run ends."""
    opts, branch, run_id = _waiting_run(tmp_path, capsys, monkeypatch)
    git = ["git", "-C", str(tmp_path / "h")]
    sha = subprocess.run([*git, "rev-parse", branch], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([*git, "branch", "-q", "-D", branch], check=True)
    subprocess.run([*git, "reflog", "expire", "--expire=now", "--all"], check=True)
    subprocess.run([*git, "gc", "-q", "--prune=now"], check=True)
    assert subprocess.run([*git, "cat-file", "-e", sha], capture_output=True).returncode != 0  # the commit is gone
    assert main([*opts, decision, branch, "--run", run_id]) == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((tmp_path / "state" / "runs" / run_id / "summary.json").read_text())
    assert summary["merged"] == []
    reason = next(r["reason"] for r in summary["rejected"] if r["branch"] == branch)
    assert reason.startswith({"approve": "accepted, not merged: no such candidate branch",
                              "reject": "rejected by reviewer"}[decision]), reason
