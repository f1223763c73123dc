"""A broken line among good ones in OTLP / LangSmith JSON lines (fix, sixth session): with --skip-invalid it is one
`skipped:` line and every other line is imported (it took the whole file with it: `error: FILE: no trajectories
found`); without, one `error:` line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _otlp(tmp_path):
    return (TRACES / "otlp" / "genai.jsonl").read_text().splitlines()


def _langsmith(tmp_path):
    return [json.dumps(r) for r in json.loads((TRACES / "langsmith" / "runs.json").read_text())]


@pytest.mark.parametrize("lines", [_otlp, _langsmith], ids=["otlp", "langsmith"])
@pytest.mark.parametrize("broken", ['{"resourceSpans": [ cut', "\xff not json", '{"n": ' + "9" * 5000 + "}"])
def test_one_broken_line_is_skipped_and_the_rest_imported(lines, broken, tmp_path, capsys):
    good = lines(tmp_path)
    clean, dirty = tmp_path / "clean" / "traces.jsonl", tmp_path / "dirty" / "traces.jsonl"
    for path, body in ((clean, good), (dirty, [*good[:2], broken, *good[2:]])):
        path.parent.mkdir()
        path.write_text("\n".join(body) + "\n")
    assert main(["import", str(clean), "--out", str(tmp_path / "clean.jsonl")]) == 0
    capsys.readouterr()
    assert main(["import", str(dirty), "--out", str(tmp_path / "dirty.jsonl")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {dirty}:line 3: invalid JSON (truncated or not JSON)"]
    assert main(["import", str(dirty), "--out", str(tmp_path / "dirty.jsonl"), "--skip-invalid"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"skipped: {dirty}:line 3: invalid JSON (truncated or not JSON)"]
    assert (tmp_path / "dirty.jsonl").read_text() == (tmp_path / "clean.jsonl").read_text()


@pytest.mark.parametrize("lines", [_otlp, _langsmith], ids=["otlp", "langsmith"])
@pytest.mark.parametrize("name", ["runs.json", "spans.otel"])
def test_json_lines_in_a_file_named_otherwise_are_read_as_lines(lines, name, tmp_path, capsys):
    """README's "dumped as JSON / JSONL" as runs.json, `export-otel --out spans.otel`: a file of JSON lines whose name
    does not end in .jsonl was read as one document, 'line 2 col 1: invalid JSON (Extra data)' (then, from 09fb1d0,
    'rename it *.jsonl'). It is read by its content (``traces.layout``): as the same lines named *.jsonl are; one
    document with a real mistake after it keeps the old words."""
    path = tmp_path / name
    path.write_text("\n".join(lines(tmp_path)) + "\n")
    assert main(["diagnose", str(path)]) == 0
    as_named = capsys.readouterr().out
    renamed = path.rename(tmp_path / (Path(name).stem + ".jsonl"))
    assert main(["diagnose", str(renamed)]) == 0
    assert capsys.readouterr().out == as_named
    two = tmp_path / "two.json"
    two.write_text("[1]\n[2]\n")  # no object a line: not JSON lines of records
    assert main(["diagnose", str(two)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {two}:line 2 col 1: invalid JSON (Extra data)"]
