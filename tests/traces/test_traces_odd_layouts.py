"""Odd but common shapes of one trace file, read the same by every command: UTF-16 JSON lines of OpenAI records
(PowerShell 5's `>`), a gzip-compressed file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.errors import InputError
from evoharness.traces.importers import load_bytes, load_paths

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _openai_lines() -> str:
    return "\n".join(json.dumps(r) for r in json.loads((TRACES / "tau_retail" / "runs.json").read_text())) + "\n"


@pytest.mark.parametrize("name", ["t.jsonl", "t.json"])
def test_utf16_json_lines_of_openai_records_read_as_their_utf8_twin(name, tmp_path):
    """The OpenAI importer read its JSON lines itself, as UTF-8 bytes: UTF-16 lines were 'line 1: invalid JSON
    (truncated or not JSON)' while format detection (and every other line format) read them through
    ``jsonl_lines``, which decodes them."""
    (tmp_path / "u8").mkdir()
    (tmp_path / "u16").mkdir()
    (tmp_path / "u8" / name).write_text(_openai_lines())
    (tmp_path / "u16" / name).write_bytes(_openai_lines().encode("utf-16"))
    twin = [t.model_dump_json() for t in load_paths([tmp_path / "u8" / name])]
    assert len(twin) == 10
    assert [t.model_dump_json() for t in load_paths([tmp_path / "u16" / name])] == twin


@pytest.mark.parametrize("name", ["t.jsonl", "t.json", "t.jsonl.gz"])
def test_a_gzip_file_is_one_reason_in_every_command(name, tmp_path, capsys):
    """A gzip-compressed trace file was 'not JSON: binary content' to `import` / `diagnose` / `label` and 'line 1:
    invalid JSON (truncated or not JSON)' to the dataset commands: one reason, and what to do, from all of them."""
    canonical = "\n".join(t.model_dump_json() for t in load_paths([TRACES / "tau_retail" / "runs.json"])) + "\n"
    path = tmp_path / name
    path.write_bytes(gzip.compress(canonical.encode()))
    reason = "gzip-compressed, not JSON: decompress it first (`gunzip -k FILE`)"
    for args in (["diagnose", str(path)], ["label", str(path), "--out", str(tmp_path / "l.jsonl")],
                 ["import", str(path), "--out", str(tmp_path / "i.jsonl")],
                 ["dataset", "export", "--source", "all", "-t", str(path), "--out", str(tmp_path / "ds")],
                 ["dataset", "enqueue", str(path), "--url", f"sqlite:///{tmp_path}/q.db"]):
        assert main(["--set", f"home={tmp_path / 'home'}", *args]) == 2
        assert capsys.readouterr().err == f"error: {path}: {reason}\n", args
    with pytest.raises(InputError) as e:
        load_bytes(path.read_bytes(), source="body")
    assert str(e.value) == f"body: {reason}"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16"])
def test_telling_a_one_line_json_list_reads_no_more_than_its_opening(encoding, tmp_path):
    """``json_lines`` read a file's whole first line before looking at it: a JSON list written on one line
    (``json.dump``'s default), which the importers stream element by element, was first held whole in memory (a
    10.8 MB tau-bench list: +20 MB of peak RSS). It reads up to the first non-blank character now."""
    import tracemalloc

    from evoharness.traces.layout import json_lines

    record = json.loads((TRACES / "tau_retail" / "runs.json").read_text())[0]
    path = tmp_path / "runs.json"
    path.write_text("  \n[" + ",".join([json.dumps(record)] * 2000) + "]", encoding=encoding)
    assert path.stat().st_size > 4_000_000
    tracemalloc.start()
    try:
        assert json_lines(path) is False
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000, peak
    lines = tmp_path / "runs2.json"  # and JSON lines are still told as such, under the same name
    lines.write_text("\n" + "\n".join([json.dumps(record)] * 3) + "\n", encoding=encoding)
    assert json_lines(lines) is True
