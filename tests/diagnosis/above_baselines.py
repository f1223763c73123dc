"""The check the SWE label-set tests share: on one figure of a scored set, the labeller is strictly above every
trivial baseline that reports that figure (a set with no labels of the figure is skipped, and then no baseline may
report it either)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.accuracy import baselines_for


def assert_strictly_above_baselines(scores, figure: str) -> None:
    ours = scores.figures["evoharness"].get(figure)
    rivals = {b: scores.figures[b][figure] for b in baselines_for(scores.name) if figure in scores.figures.get(b, {})}
    if ours is None:
        assert not rivals, f"{figure}: baselines report it, the labeller does not"
        pytest.skip(f"no {figure} labels (a single-agent run)")
    assert rivals
    for base, (hits, n) in rivals.items():
        assert ours[0] / ours[1] > hits / n, f"{figure}: {ours[0]}/{ours[1]} <= {base} {hits}/{n}"
