"""A candidate's evidence and predicted flips are read back from its commit as they were written (fuzz, eighteenth
session). The trailers joined the ids with ', ' and split them on ',', and collapsed their whitespace: an id
holding a comma (`run:a,b`) came back as two ids, `a  b` as `a b`, and `show`, the critic and verification read
those."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main
from evoharness.harness_repo.repo import HarnessRepo

IDS = ["run:a,b/s0", "two  spaces", "tab\there", "50%2C off", "(none)", "caf\u00e9, 1", "plain@3"]


def test_ids_with_commas_whitespace_and_percent_signs_are_read_back_whole(tmp_path: Path, capsys) -> None:
    root = tmp_path / "h"
    assert main(["init", str(root)]) == 0
    edit = {"message": "Add a loop lesson", "targets": "F3.repeated_action", "evidence": IDS,
            "predicted_flips": IDS[::-1],
            "changes": [{"path": "lessons.md", "content": "- Never repeat a failing call.\n"}]}
    (tmp_path / "edit.json").write_text(json.dumps(edit))
    capsys.readouterr()
    assert main(["candidate", "new", "--harness", str(root), "--edit", str(tmp_path / "edit.json")]) == 0
    branch = capsys.readouterr().out.strip()
    candidate = HarnessRepo(root).candidate(branch)
    assert candidate.evidence == IDS
    assert candidate.predicted_flips == IDS[::-1]


def test_a_commit_written_before_keeps_its_ids() -> None:
    """A trailer an earlier version wrote (ids joined by ', ', none holding ',' or '%') reads as it did."""
    from evoharness.harness_repo.candidates import candidate_from_message

    message = ("Add a lesson\n\nTargets: F3.x\nFailure-Class: F3\nEvidence: t1/dev/0/s0, t2@4\n"
               "Predicted-Flips: (none)\nCritic: ok\nRound: 0\nBase: abc\n")
    c = candidate_from_message("candidate/r0-x", "c0ffee", message)
    assert c.evidence == ["t1/dev/0/s0", "t2@4"] and c.predicted_flips == []
