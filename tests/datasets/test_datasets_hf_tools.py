"""The hf export keeps `tools` as a JSON string (an Arrow list of structs would merge every row's tool schemas into
one type: each tool gets the other tools' parameters as null properties). TRL passes a row's `tools` to
`apply_chat_template`, which wants a list of schemas: `ds.cast_column("tools", datasets.Json())` decodes each row to
its own list, as the card and docs/datasets.md say. Checked against the openai export of the same runs."""

from __future__ import annotations

import json

import pytest

from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind

from .helpers import make_traj, offline_hf, read_jsonl  # noqa: F401 (offline_hf: the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")

datasets = pytest.importorskip("datasets")


def _trajs() -> list:
    """Runs whose tools differ in their parameters (and one with none): what Arrow would merge."""
    out = [make_traj(f"a{i}", "task-a", tool="lookup") for i in range(2)]
    out += [make_traj("b0", "task-b", tool="book")]
    bare = make_traj("c0", "task-c", tool="ping")
    bare.meta["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {}}
    return [*out, bare]


@pytest.mark.skipif(not hasattr(datasets, "Json"), reason="this datasets has no Json feature")
def test_the_hf_tools_column_decodes_to_each_rows_own_schemas(tmp_path):
    export_dataset(tmp_path / "hf", fmt=ExportFormat.hf, source=SourceKind.all, trajectories=_trajs())
    export_dataset(tmp_path / "openai", source=SourceKind.all, trajectories=_trajs())
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "hf/data/train-00000-of-00001.parquet"),
                               split="train", cache_dir=str(tmp_path / "cache"))
    assert isinstance(ds[0]["tools"], str)
    decoded = ds.cast_column("tools", datasets.Json())
    expected = [r["tools"] for r in read_jsonl(tmp_path / "openai/data.jsonl")]
    assert [row["tools"] for row in decoded] == expected
    assert expected[3][0]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert "cast_column(\"tools\", datasets.Json())" in (tmp_path / "hf/README.md").read_text()
    assert json.loads(ds[2]["tools"]) == expected[2]
