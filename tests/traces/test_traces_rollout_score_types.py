"""A canonical record's rollout is a non-negative index and its score a number: `-1` and `true` were accepted
(`score: true` read as a success, 1.0), and so was a string (`"score": "1"`, eighteenth session)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from evoharness.cli import main
from evoharness.traces.models import Trajectory
from evoharness.traces.store import parse_trajectory


@pytest.mark.parametrize(("field", "value", "says"), [
    ("rollout", -1, "greater than or equal to 0"),
    ("rollout", True, "rollout must be a number, not a boolean (true)"),
    ("score", True, "score must be a number, not a boolean (true)"),
    ("score", False, "score must be a number, not a boolean (false)"),
    # a number written as a string was read as the number (lax validation): "1" a success, as `true` was
    ("score", "1", "score must be a number, not a string ('1')"),
    ("score", " 0.5 ", "score must be a number, not a string (' 0.5 ')"),
    ("rollout", "2", "rollout must be a number, not a string ('2')"),
])
def test_refused_in_both_ways_a_record_is_read(field, value, says):
    rec = {"id": "a", "task_id": "t", field: value}
    with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Trajectory.model_validate(rec)
    with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_trajectory(json.dumps(rec))  # the import's fast path


def test_numbers_are_kept():
    t = parse_trajectory(json.dumps({"id": "a", "task_id": "t", "rollout": 3, "score": 1}))
    assert (t.rollout, t.score) == (3, 1.0)
    assert Trajectory.model_validate({"id": "a", "task_id": "t", "rollout": 0, "score": 0}).score == 0


def test_import_refuses_a_boolean_score_and_skips_it_when_asked(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"id": "a", "task_id": "t", "messages": [], "score": True}) + "\n"
                   + json.dumps({"id": "b", "task_id": "t", "messages": [], "score": 1.0}) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["import", str(src), "--out", str(out)]) == 2
    assert "not a boolean" in capsys.readouterr().err and not out.exists()
    assert main(["import", str(src), "--skip-invalid", "--out", str(out)]) == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["b"]
    assert "line 1" in capsys.readouterr().err
