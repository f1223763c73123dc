"""A composition with unscored runs that no signal fired on (class ``unknown``, no verdict) is shown in the run
report's tables and plots, the evaluation text and the run summary: not dropped, so the classes add up to 100%."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import Labeller
from evoharness.graph.summary import summary_text
from evoharness.reports import plots
from evoharness.reports.report import composition_table, seed_vs_evolved
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import load_paths

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
UNSCORED = [TRACES / "autogen" / "magentic_one_messages.json", TRACES / "ag2" / "chat_history.json"]


def _mixed() -> dict:
    """Two unscored AutoGen / AG2 runs (unknown), one scored healthy run and one scored failure."""
    scored = [TraceBuilder(f"s{i}").user("What is 2 + 2?").deliver("4").build(score=s) for i, s in enumerate((1, 0))]
    labels = [Labeller().label(t) for t in [*load_paths(UNSCORED), *scored]]
    comp = Composition.from_labels(labels).to_dict()
    assert comp["counts"]["unknown"] >= 1 and abs(sum(comp["composition"].values()) - 1) < 1e-3
    return comp


def _share_sum(row: list[str]) -> float:
    return sum(float(x.rstrip("%")) for x in row if x.endswith("%"))


def test_report_tables_show_an_unknown_column_and_add_up():
    comp = _mixed()
    t = composition_table([("seed", comp), ("end", comp)])
    assert "Unknown (no verdict)" in t["head"]
    col = t["head"].index("Unknown (no verdict)")
    assert t["rows"][0][col] == f"{100 * comp['composition']['unknown']:.1f}%"
    shares = t["rows"][0][2:col + 1]  # Healthy .. Unknown (Delivery after it is not a class)
    assert abs(_share_sum(shares) - 100) < 0.5
    _, sve = seed_vs_evolved({"before": {"dev": comp}, "after": {"dev": comp}}, {})
    assert "Unknown (no verdict)" in sve["head"] and all(len(r) == len(sve["head"]) for r in sve["rows"])


def test_a_report_without_unknown_runs_keeps_its_columns():
    comp = Composition.from_labels([Labeller().label(TraceBuilder("s").user("q").deliver("4").build(score=1))])
    assert "Unknown (no verdict)" not in composition_table([("seed", comp.to_dict())])["head"]


def test_the_stacked_bars_draw_unknown_and_reach_100_percent(tmp_path):
    pytest.importorskip("matplotlib")
    comp = _mixed()
    plt = plots._pyplot()
    fig, ax = plt.subplots()
    plots._stacked(ax, ["seed"], [comp["composition"]])
    tops = [p.get_y() + p.get_height() for p in ax.patches]
    assert abs(max(tops) - 100) < 0.05
    assert "Unknown (no verdict)" in [c.get_label() for c in ax.containers]
    plt.close(fig)
    png = plots.composition_plot([("seed", comp)], tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_run_summary_lists_e_and_unknown():
    comp = _mixed()
    text = summary_text({"run_id": "r", "stop_reason": "x", "before": {"dev": comp}, "after": {}, "anchors": [],
                         "merged": [], "rejected": [], "harness_repo": "h", "main": "m", "files": {}})
    assert " E " in text and f"unknown (no verdict) {100 * comp['composition']['unknown']:5.1f}%" in text


def test_evaluate_text_has_the_unknown_column():
    from types import SimpleNamespace

    from evoharness.reports.cli import _evaluation_text

    comp = _mixed()
    arm = SimpleNamespace(rev="main", commit="0123456789ab", composition=comp, mean=0.5)
    ev = SimpleNamespace(env="e", model="m", split="dev", tasks=[1], k=1, seeds=[0], baseline=arm, candidate=arm,
                         difference=0.0, sigma=0.0, z=2.0, resolvable=0.0, resolvable_table=0.0, verdict="same")
    head, row = _evaluation_text(ev).splitlines()[1:3]
    assert "Unknown (no verdict)" in head and "50.0%" in row.split()
