"""A canonical trajectory's score is a finite number in [0, 1]: NaN was refused as "should be <= 1"."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from evoharness.cli import main
from evoharness.traces.models import Trajectory


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_a_score_that_is_no_finite_number_says_so(score):
    with pytest.raises(ValidationError, match="finite number"):
        Trajectory.model_validate({"id": "a", "task_id": "t", "score": score})


def test_import_names_a_nan_score(tmp_path, capsys):
    src = tmp_path / "nan.jsonl"
    src.write_text('{"id": "a", "task_id": "t", "score": NaN}\n')
    assert main(["import", str(src), "--format", "canonical", "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "score: Input should be a finite number" in err and "less than or equal" not in err
    assert not (tmp_path / "o.jsonl").exists()


def test_finite_scores_in_range_are_kept():
    scores = [Trajectory.model_validate({"id": "a", "task_id": "t", "score": s}).score for s in (0, 0.5, 1)]
    assert scores == [0, 0.5, 1]
