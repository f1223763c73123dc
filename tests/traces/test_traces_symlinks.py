"""A trace path that is a symbolic link which cannot be followed (a loop, or a link to a missing file) said "no
such file or directory" for a name `ls` shows: now one error line says it is a link and why it leads nowhere."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize(("make", "why"), [
    (lambda d: ((d / "a").symlink_to(d / "b"), (d / "b").symlink_to(d / "a")), "too many levels of symbolic links"),
    (lambda d: (d / "a").symlink_to(d / "missing.json"), "no such file or directory"),
])
@pytest.mark.parametrize("command", [["diagnose"], ["import", "--out", "OUT"]])
def test_a_link_that_leads_nowhere_is_named_as_a_link(tmp_path, capsys, make, why, command):
    make(tmp_path)
    argv = [c.replace("OUT", str(tmp_path / "out.jsonl")) for c in command]
    assert main([argv[0], str(tmp_path / "a"), *argv[1:]]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: {tmp_path / 'a'}: a symbolic link that cannot be followed: {why}", err


def test_a_missing_path_that_is_no_link_is_still_missing(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nothing.json")]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: {tmp_path / 'nothing.json'}: no such file or directory"
