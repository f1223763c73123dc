"""Tool-call arguments are parsed once per trajectory on the way to any export format (issue 17: "parsed once and
kept parsed"): labelling's parse (``Trajectory.tool_calls()``) or cleaning's is the one every later step reads,
the ShareGPT writer included (it writes each call's arguments as a value)."""

from __future__ import annotations

from collections import Counter

import pytest

import evoharness.datasets.formats as formats
import evoharness.traces.models as models
from evoharness.datasets.chat import record_and_arguments, to_record
from evoharness.datasets.export import export_dataset
from evoharness.datasets.formats import to_sharegpt
from evoharness.datasets.models import ExportFormat, SourceKind

from .helpers import make_traj, read_jsonl


def _trajs() -> list:
    # failed runs (labelled by --source all) and healthy ones (cleaning parses them), 1-3 calls each
    return [make_traj(f"t{i}", f"task-{i % 3}", score=[1.0, 0.0, 0.4][i % 3], calls=1 + i % 3) for i in range(9)]


@pytest.fixture
def parses(monkeypatch) -> Counter:
    """Every argument text parsed, counted (the parser the trajectory, cleaning and the writers share)."""
    seen: Counter = Counter()
    real = models.loads

    def counting(text):
        seen[text] += 1
        return real(text)

    monkeypatch.setattr(models, "loads", counting)
    monkeypatch.setattr(formats, "loads", counting)
    return seen


@pytest.mark.parametrize("source", [SourceKind.all, SourceKind.healthy])
@pytest.mark.parametrize("placebo", [False, True])
def test_a_sharegpt_export_parses_each_argument_text_once(tmp_path, parses, source, placebo):
    trajs = _trajs()
    texts = {tc["function"]["arguments"] for t in trajs for m in t.messages for tc in m.get("tool_calls") or ()}
    s = export_dataset(tmp_path, fmt=ExportFormat.sharegpt, source=source, trajectories=trajs, placebo=placebo)
    assert s.records > 0
    assert parses and set(parses) <= texts
    assert max(parses.values()) == 1, [t for t, n in parses.items() if n > 1]
    written = [c for r in read_jsonl(tmp_path / "data.jsonl") for c in r["conversations"]
               if c["from"] == "function_call"]
    assert len(written) == sum(1 + i % 3 for i in range(9) if source is SourceKind.all or i % 3 == 0)


def test_sharegpt_with_the_parsed_values_is_the_sharegpt_without_them():
    for t in _trajs():
        record, arguments = record_and_arguments(t)
        assert record == to_record(t)
        assert set(arguments) == {tc["function"]["arguments"] for m in t.messages for tc in m.get("tool_calls") or ()}
        assert to_sharegpt(record, arguments) == to_sharegpt(record)
