"""An error names a path as the user typed it: a path argument read through ``Path`` loses its ``./`` (and a
trailing ``/``), and `evoharness import ./missing.json` said 'error: missing.json: no such file or directory'.
``cli.typed`` maps the error's input back to the argument that wrote it, for every command at once."""

from __future__ import annotations

import pytest

from evoharness.cli import main

COMMANDS = [  # (argv, the error line's end)
    (["import", "./missing.json", "-o", "out.jsonl"], "no such file or directory"),
    (["diagnose", "./missing.json"], "no such file or directory"),
    (["label", "./missing.json", "-o", "labels.jsonl"], "no such file or directory"),
    (["export-otel", "./missing.json", "-o", "o.jsonl"], "no such file or directory"),
    (["calibrate", "./missing.json", "--human", "./h.jsonl"], "no such file"),
    (["-c", "./missing.json", "schema", "trajectory"], "config file not found"),
]


@pytest.mark.parametrize(("argv", "end"), COMMANDS)
def test_a_missing_path_is_named_as_typed(argv, end, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: ./missing.json: {end}"]


def test_a_bad_file_inside_is_named_as_typed_with_its_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.jsonl").write_text('{"id": "a"}\nnot json\n')
    assert main(["diagnose", "./sub//bad.jsonl", "-f", "canonical"]) == 2
    [err] = capsys.readouterr().err.splitlines()
    assert err.startswith("error: ./sub//bad.jsonl:line 1: "), err


def test_typed_maps_only_another_spelling_of_the_same_path():
    from evoharness.cli import typed

    argv = ["import", "./a.json", "--out=./dir/", "b.json"]
    assert typed("a.json", argv) == "./a.json" and typed("dir", argv) == "./dir/"
    assert typed("b.json", argv) == "b.json" and typed("c.json", argv) == "c.json"
    assert typed("--out", argv) == "--out"
