"""A trace path that is a symbolic link which cannot be followed (a loop, or a link to a missing file) said "no
such file or directory" for a name `ls` shows: now one error line says it is a link and why it leads nowhere, a loop
in the one wording every command uses (`dataset export -t`, `--labels` and `dataset validate` said "trajectory file
not found" / "no such file" until the twentieth session)."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize(("make", "why"), [
    (lambda d: ((d / "a").symlink_to(d / "b"), (d / "b").symlink_to(d / "a")),
     "a symlink loop (too many levels of symbolic links)"),
    (lambda d: (d / "a").symlink_to(d / "missing.json"), "a symbolic link that cannot be followed: no such file or "
                                                          "directory"),
])
@pytest.mark.parametrize("command", [["diagnose", "A"], ["import", "A", "--out", "OUT"],
                                     ["dataset", "export", "-t", "A", "--out", "OUT"],
                                     ["dataset", "validate", "A"]])
def test_a_link_that_leads_nowhere_is_named_as_a_link(tmp_path, capsys, make, why, command):
    make(tmp_path)
    argv = [c.replace("OUT", str(tmp_path / "out")).replace("A", str(tmp_path / "a")) for c in command]
    assert main(argv) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: {tmp_path / 'a'}: {why}", err
    assert not (tmp_path / "out").exists()


def test_a_labels_file_that_is_a_symlink_loop_is_named_so(tmp_path, capsys):
    (tmp_path / "t.jsonl").write_text("")
    (tmp_path / "loop").symlink_to("loop")
    assert main(["dataset", "export", "-t", str(tmp_path / "t.jsonl"), "--labels", str(tmp_path / "loop"),
                 "--out", str(tmp_path / "out")]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: --labels {tmp_path / 'loop'}: a symlink loop (too many levels of symbolic links)", err


def test_a_missing_path_that_is_no_link_is_still_missing(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nothing.json")]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == f"error: {tmp_path / 'nothing.json'}: no such file or directory"
