"""`reject --reason` takes one line of text, as the service's review endpoints do."""

from __future__ import annotations

import json

import pytest

from evoharness.cli import main
from tests.graph.review_run import review_run_opts


@pytest.mark.parametrize("reason", ["line1\nline2", "nul \x00 here", "colour \x1b[31mred",
                                    "line1\u2028line2", "para1\u2029para2",  # Unicode's line and paragraph breaks
                                    # bidi controls: 'approve \u202eevil' shows as 'approve live'
                                    "approve \u202eevil", "ok \u2066x\u2069", "\u202aembedded\u202c"])
def test_a_reason_with_a_control_character_is_one_error_line(tmp_path, capsys, reason):
    assert main(["--set", f"home={tmp_path}", "reject", "candidate/r1-x", "--run", "run-x", "--reason", reason]) == 2
    err = capsys.readouterr().err.splitlines()
    # a NUL is refused before any command reads its options (cli._no_nul), naming the option it follows
    start = "error: argument 8 (after --reason): " if "\x00" in reason else "error: --reason: a control character ("
    assert len(err) == 1 and err[0].startswith(start), err


def test_a_bidi_control_is_named_and_right_to_left_text_and_joiners_are_text():
    from evoharness.untrusted import control_character

    assert control_character("approve \u202eevil") == "'\\u202e', a bidirectional text control"
    assert control_character("נראה טוב, merged \U0001F469\u200d\U0001F4BB") is None  # Hebrew; a ZWJ emoji


def test_an_approvals_reason_is_recorded_and_shown_by_review_and_pr(tmp_path, capsys, monkeypatch):
    """`approve --reason` was accepted and dropped: only a rejection's reason reached the verdict. Now the merged
    candidate's verdict note carries it, and `review`, the merge commit and the PR body show it."""
    import shlex
    import subprocess

    from evoharness.harness_repo.init import init_harness

    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = review_run_opts(tmp_path / "state")
    assert main(["run", "--review", *opts]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if " approve " in x)
    words = shlex.split(line.split("   (or:")[0])
    branch, run_id = words[words.index("approve") + 1], words[words.index("--run") + 1]
    assert main([*opts, "approve", branch, "--run", run_id, "--reason", "the lesson reads right"]) == 0
    merged_line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(f"  {branch}  "))
    assert merged_line.endswith("  approved by reviewer: the lesson reads right"), merged_line
    # the run's summary.json and its report list the merge with the approval, as the verdict note has it
    summary = json.loads((tmp_path / "state" / "runs" / run_id / "summary.json").read_text())
    assert [m.get("approval") for m in summary["merged"]] == ["approved by reviewer: the lesson reads right"]
    from evoharness.reports.report import lists

    assert lists(summary)["merged"][0].endswith("; approved by reviewer: the lesson reads right")

    assert main(["review", "--harness", "h"]) == 0
    row = capsys.readouterr().out.split(branch, 1)[1]
    assert "  merged  " in row.splitlines()[0]
    assert "approved by reviewer: the lesson reads right" in row.splitlines()[1]
    merge_message = subprocess.run(["git", "-C", "h", "log", "-1", "--format=%B", "main"], capture_output=True,
                                   text=True, check=True).stdout
    assert "Approval: approved by reviewer: the lesson reads right" in merge_message
    subprocess.run(["git", "init", "-q", "--bare", "remote.git"], check=True)
    assert main(["pr", branch, "--harness", "h", "--remote", str(tmp_path / "remote.git"), "--allow-unverified",
                 "--body-out", "body.md"]) == 0
    assert "approved by reviewer: the lesson reads right" in (tmp_path / "body.md").read_text()


def test_an_approval_without_a_reason_still_says_a_person_approved():
    from evoharness.harness_repo.models import Verdict
    from evoharness.harness_repo.review import summarise

    v = Verdict(candidate="candidate/r1-x", commit="c", base="b", accepted=True, reason="gain 0.1")
    assert summarise(v) == "accepted: gain 0.1"
    assert summarise(v.model_copy(update={"approval": "approved by reviewer"})) == \
        "accepted: gain 0.1; approved by reviewer"
