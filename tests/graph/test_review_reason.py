"""`reject --reason` takes one line of text, as the service's review endpoints do."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize("reason", ["line1\nline2", "nul \x00 here", "colour \x1b[31mred",
                                    "line1\u2028line2", "para1\u2029para2"])  # Unicode's line and paragraph breaks
def test_a_reason_with_a_control_character_is_one_error_line(tmp_path, capsys, reason):
    assert main(["--set", f"home={tmp_path}", "reject", "candidate/r1-x", "--run", "run-x", "--reason", reason]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: --reason: a control character ("), err
