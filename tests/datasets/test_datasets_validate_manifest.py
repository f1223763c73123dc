"""`dataset validate EXPORT_DIR` checked every export as openai unless --format said otherwise: a ShareGPT export's
directory was every record failing ('unexpected keys ['conversations', 'system']', exit 2) and an hf export's
'no such file' (data.jsonl). The export's manifest.json names its format; validate now reads it when --format is
not given (found walking docs/datasets.md as a new user)."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind

from .helpers import make_traj


@pytest.fixture(autouse=True)
def _offline_hf(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def _export(out, fmt: str) -> int:
    trajs = [make_traj(f"t{i}", f"task-{i % 3}", score=0.5, calls=1) for i in range(6)]
    return export_dataset(out, fmt=ExportFormat(fmt), source=SourceKind.all, trajectories=trajs).records


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "hf"])
def test_validate_reads_the_exports_format_from_its_manifest(tmp_path, capsys, fmt):
    if fmt == "hf":
        pytest.importorskip("datasets")
    n = _export(tmp_path / "ex", fmt)
    assert main(["dataset", "validate", str(tmp_path / "ex")]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.splitlines()[-1] == f"{n} records, all valid ({fmt})"


def test_an_explicit_format_still_wins_and_a_file_without_a_manifest_is_openai(tmp_path, capsys):
    _export(tmp_path / "ex", "sharegpt")
    assert main(["dataset", "validate", str(tmp_path / "ex"), "--format", "openai"]) == 2  # asked for: checked so
    assert "unexpected keys" in capsys.readouterr().out
    lone = tmp_path / "lone" / "data.jsonl"
    lone.parent.mkdir()
    lone.write_bytes((tmp_path / "ex" / "data.jsonl").read_bytes())
    assert main(["dataset", "validate", str(lone)]) == 2
    (tmp_path / "lone" / "manifest.json").write_text("{not json")  # a broken manifest: the default, no traceback
    assert main(["dataset", "validate", str(lone)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("problems in 6 records") == 2
