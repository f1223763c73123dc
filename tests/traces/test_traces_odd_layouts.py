"""Odd but common shapes of one trace file, read the same by every command: UTF-16 JSON lines of OpenAI records
(PowerShell 5's `>`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.traces.importers import load_paths

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

