"""A JSON list read one element at a time gives what json.loads gives, and its errors name where."""

from __future__ import annotations

import json

import pytest

from evoharness.errors import InputError
from evoharness.traces.importers.jsonstream import ArrayRecords

DOCS = [
    [],
    [1, 22, 333, -4.5e3, "x", None, True],
    [{"a": [1, 2, {"b": "ü, ] [ \" }"}]}, {"c": "é" * 50}, 12345678901234567890],
    [{"traj": [{"role": "user", "content": "line\nbreak"}], "reward": 1}] * 5,
]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_streamed_elements_equal_json_loads(tmp_path, doc, chunk):
    p = tmp_path / "a.json"
    p.write_text("\ufeff \n" + json.dumps(doc, indent=1, ensure_ascii=False) + "\n\n", encoding="utf-8")
    assert list(ArrayRecords(p, chunk=chunk)) == doc
    assert list(ArrayRecords(p, chunk=chunk)) == doc  # re-iterable


@pytest.mark.parametrize("text", ['[{"a": 1}, {"b": ', '[{"a": 1}\n {"b": 2}]', '[1, 2] 3', '[1,\n 2', '[1, 2,]'])
@pytest.mark.parametrize("chunk", [2, 1 << 20])
def test_errors_name_the_line_and_column_json_loads_names(tmp_path, text, chunk):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(json.JSONDecodeError) as whole:
        json.loads(text)
    with pytest.raises(InputError, match="invalid JSON") as e:
        list(ArrayRecords(p, chunk=chunk))
    assert str(p) in str(e.value)
    assert f"line {whole.value.lineno} col {whole.value.colno}" in str(e.value)


def test_non_utf8_is_one_clear_error(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(b'["caf\xe9"]')
    with pytest.raises(InputError, match="non-UTF-8"):
        list(ArrayRecords(p))


def test_deep_nesting_is_an_input_error(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('[{"traj": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    with pytest.raises(InputError, match="nested too deeply"):
        list(ArrayRecords(p))
