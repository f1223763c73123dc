"""`-` names standard input for import, diagnose, label and export-otel (it was "-: no such file or directory");
commands that read a file twice, or a labels file, refuse it with one line saying what to do."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from evoharness.cli import main

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TAU = DATA / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def _pipe(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.fixture
def canonical(tmp_path, capsys) -> bytes:
    if not TAU.is_file():
        pytest.skip("../shared/data not present")
    out = tmp_path / "plain.jsonl"
    assert main(["import", str(TAU), "--out", str(out)]) == 0
    capsys.readouterr()
    return b"".join(out.read_bytes().splitlines(keepends=True)[:5])


def test_import_of_stdin_is_the_import_of_the_file(canonical, tmp_path, monkeypatch):
    src = tmp_path / "five.jsonl"
    src.write_bytes(canonical)
    assert main(["import", str(src), "--out", str(tmp_path / "a.jsonl")]) == 0
    _pipe(monkeypatch, canonical)
    assert main(["import", "-", "--out", str(tmp_path / "b.jsonl")]) == 0
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()


def test_a_json_document_on_stdin_is_detected_as_its_file_would_be(tmp_path, monkeypatch, capsys):
    if not TAU.is_file():
        pytest.skip("../shared/data not present")
    _pipe(monkeypatch, TAU.read_bytes())
    assert main(["import", "-", "--out", str(tmp_path / "o.jsonl")]) == 0
    lines = (tmp_path / "o.jsonl").read_text().splitlines()
    assert len(lines) == 200 and json.loads(lines[0])["id"] == "stdin:0:0"  # ids name it as a file "stdin"
    assert "evoharness-stdin" not in (tmp_path / "o.jsonl").read_text()  # no temporary path leaks
    assert capsys.readouterr().out.startswith("wrote 200 trajectories")


def test_diagnose_label_and_export_otel_read_stdin(canonical, tmp_path, monkeypatch, capsys):
    _pipe(monkeypatch, canonical)
    assert main(["diagnose", "-", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["trajectories"]) == 5
    _pipe(monkeypatch, canonical)
    assert main(["label", "-", "--out", str(tmp_path / "l.jsonl")]) == 0
    assert len((tmp_path / "l.jsonl").read_text().splitlines()) == 5
    _pipe(monkeypatch, canonical)
    assert main(["export-otel", "-", "--out", str(tmp_path / "s.jsonl")]) == 0
    assert "exported 5 trajectories" in capsys.readouterr().out


@pytest.mark.parametrize(("data", "says"), [
    (b"", "error: -: empty file\n"),
    (b"garbage\n", "error: -:line 1 col 1: invalid JSON (Expecting value)\n"),
    (b'{"a": 1}\n', "error: -: unrecognised format"),
])
def test_bad_stdin_is_one_error_line_naming_it(data, says, tmp_path, monkeypatch, capsys):
    _pipe(monkeypatch, data)
    assert main(["import", "-", "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1 and "evoharness-stdin" not in err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_bad_record_on_stdin_is_skipped_by_name(canonical, tmp_path, monkeypatch, capsys):
    bad = b'{"id": "x", "task_id": "t", "messages": [], "score": 7}\n'
    _pipe(monkeypatch, bad + canonical)
    assert main(["import", "-", "--skip-invalid", "--out", str(tmp_path / "o.jsonl")]) == 0
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 5
    assert capsys.readouterr().err.startswith("skipped: -:line 1: not a canonical trajectory: score")


def test_stdin_twice_or_a_terminal_is_refused(tmp_path, monkeypatch, capsys):
    _pipe(monkeypatch, b"")
    assert main(["import", "-", "-", "--out", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err == "error: -: standard input given twice\n"

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal(io.BytesIO(b"")))
    assert main(["diagnose", "-"]) == 2
    assert capsys.readouterr().err.startswith("error: -: standard input is a terminal")


@pytest.mark.parametrize("argv", [["calibrate", "-", "--human", "h.jsonl"], ["dataset", "validate", "-"]])
def test_commands_that_take_no_stdin_say_so(argv, monkeypatch, capsys):
    _pipe(monkeypatch, b"")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: -: ") and "reads a file, not standard input" in err and err.count("\n") == 1
