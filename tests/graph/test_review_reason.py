"""`reject --reason` takes one line of text, as the service's review endpoints do."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize("reason", ["line1\nline2", "nul \x00 here", "colour \x1b[31mred",
                                    "line1\u2028line2", "para1\u2029para2",  # Unicode's line and paragraph breaks
                                    # bidi controls: 'approve \u202eevil' shows as 'approve live'
                                    "approve \u202eevil", "ok \u2066x\u2069", "\u202aembedded\u202c"])
def test_a_reason_with_a_control_character_is_one_error_line(tmp_path, capsys, reason):
    assert main(["--set", f"home={tmp_path}", "reject", "candidate/r1-x", "--run", "run-x", "--reason", reason]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: --reason: a control character ("), err


def test_a_bidi_control_is_named_and_right_to_left_text_and_joiners_are_text():
    from evoharness.untrusted import control_character

    assert control_character("approve \u202eevil") == "'\\u202e', a bidirectional text control"
    assert control_character("נראה טוב, merged \U0001F469\u200d\U0001F4BB") is None  # Hebrew; a ZWJ emoji
