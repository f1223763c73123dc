"""`dataset validate EXPORT_DIR` reads the format from the export's manifest.json (3589b66). A manifest that is not
an export's -- nested too deeply for the JSON reader, or naming a format no exporter has -- is bad input: the default
(openai) or one error line naming the manifest, exit 2, never a traceback."""

from __future__ import annotations

import json

from evoharness.cli import main

RECORD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def _export_dir(tmp_path, manifest: str):
    d = tmp_path / "ex"
    d.mkdir()
    (d / "data.jsonl").write_text(json.dumps(RECORD) + "\n")
    (d / "manifest.json").write_text(manifest)
    return d


def test_a_manifest_nested_too_deeply_is_no_manifest(tmp_path, capsys):
    d = _export_dir(tmp_path, "[" * 200_000)
    assert main(["dataset", "validate", str(d)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 records, all valid (openai)"


def test_a_manifest_naming_an_unknown_format_is_one_error_line_naming_it(tmp_path, capsys):
    d = _export_dir(tmp_path, json.dumps({"format": "bogus"}))
    assert main(["dataset", "validate", str(d)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "manifest.json" in line and "'bogus'" in line
