"""ops/train/sft_lora.py: the data preparation that feeds TRL (the training itself needs torch)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind

from .helpers import make_traj

RECIPE = Path(__file__).resolve().parents[2] / "ops" / "train" / "sft_lora.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("sft_lora", RECIPE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports nothing heavy at module level
    return mod


def test_recipe_reads_an_openai_export_as_exported(tmp_path):
    recipe = _recipe()
    export_dataset(tmp_path, source=SourceKind.all, trajectories=[make_traj("a"), make_traj("b", "t2")])
    manifest = recipe.check_export(tmp_path)
    assert manifest["records"] == 2 and manifest["placebo"] is False
    examples = list(recipe.load_examples(tmp_path))
    assert len(examples) == 2
    assert examples[0]["tools"][0]["function"]["parameters"]["required"] == ["key"]  # no schema merging
    assert examples[0]["messages"][2]["tool_calls"][0]["id"] == "call_0"


def test_recipe_refuses_what_it_cannot_train_on(tmp_path):
    recipe = _recipe()
    with pytest.raises(SystemExit, match="not an evoharness export"):
        recipe.check_export(tmp_path)
    export_dataset(tmp_path / "sg", fmt=ExportFormat.sharegpt, source=SourceKind.all,
                   trajectories=[make_traj("a")])
    with pytest.raises(SystemExit, match="reads --format openai"):
        recipe.check_export(tmp_path / "sg")
    export_dataset(tmp_path / "ok", source=SourceKind.all, trajectories=[make_traj("a")])
    m = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    m["splits"] = {"heldout": 1}
    (tmp_path / "ok" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SystemExit, match="held-out"):
        recipe.check_export(tmp_path / "ok")
