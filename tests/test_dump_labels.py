"""scripts/dump_labels.py --tuning-only leaves the held-out test sets out: the labeller is not run on them."""

from __future__ import annotations

from pathlib import Path

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[1]


def _dump_labels():
    return load_file(ROOT / "scripts" / "dump_labels.py", "dump_labels")


def test_tuning_only_leaves_out_every_held_out_set(tmp_path, monkeypatch):
    mod = _dump_labels()
    labelled: list[str] = []
    real = mod.load_file

    def load_file(path, *a, **k):
        labelled.append(str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(mod, "load_file", load_file)
    data = ROOT / "tests" / "fixtures" / "data"  # the four public sets' vendored samples, held-out ones too
    assert mod.main([str(tmp_path / "all.tsv"), "--data", str(data)]) == 0
    assert any("Hand-Crafted" in p for p in labelled) and any("agentrx_magentic_one" in p for p in labelled)
    labelled.clear()
    assert mod.main([str(tmp_path / "tune.tsv"), "--data", str(data), "--tuning-only"]) == 0
    assert labelled and not [p for p in labelled if any(h in p for h in mod.HELD_OUT)]
    assert any("Algorithm-Generated" in p for p in labelled)
    rows = (tmp_path / "tune.tsv").read_text().splitlines()
    assert rows and not [r for r in rows if any(h in r.split("\t")[0] for h in mod.HELD_OUT)]
