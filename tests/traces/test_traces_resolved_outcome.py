"""A record's SWE-bench verdict is its outcome: ``resolved`` (true / false, or SWE-rebench's int64 1 / 0) scores an
``openai`` record that has no ``reward`` / ``score`` (it was unscored, so a resolved run could never be Healthy), and
nebius' SWE-rebench OpenHands records (chat messages under ``trajectory``) are read (they were "unrecognised")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "swe_rebench_openhands" / "sample.jsonl"
CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix values() on an empty list."},
        {"role": "assistant", "content": "Done: values() returns None for an empty list."}]


def _one(tmp_path: Path, **fields) -> list:
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps({"messages": CHAT, "task_id": "pkg__pkg-101", **fields}) + "\n")
    return list(load_file(f))


@pytest.mark.parametrize(("resolved", "score"), [(True, 1.0), (False, 0.0), (1, 1.0), (0, 0.0)])
def test_a_resolved_flag_is_the_outcome_of_a_record_without_a_reward(tmp_path, resolved, score):
    (t,) = _one(tmp_path, resolved=resolved)
    assert t.score == score


def test_a_reward_still_comes_first(tmp_path):
    (t,) = _one(tmp_path, reward=0.0, resolved=True)
    assert t.score == 0.0


@pytest.mark.parametrize("resolved", ["true", 2, 0.5, [], {"resolved": True}])
def test_a_resolved_flag_that_is_no_verdict_is_refused(tmp_path, resolved):
    with pytest.raises(InputError, match="resolved must be true or false"):
        _one(tmp_path, resolved=resolved)


def test_a_boolean_score_is_still_refused(tmp_path):
    with pytest.raises(InputError, match="reward must be a number"):
        _one(tmp_path, score=True, resolved=True)


def test_swe_rebench_openhands_records_are_read_with_their_verdict():
    assert detect_format(FIXTURE) == "openai"
    runs = list(load_file(FIXTURE))
    assert [(t.id, t.task_id, t.score) for t in runs] == [
        ("chatcmpl-0001", "pkg__pkg-101", 1.0), ("chatcmpl-0002", "pkg__pkg-102", 0.0)]
    assert [m["tool_calls"][0]["function"]["name"] for m in runs[0].messages if m.get("tool_calls")] == [
        "execute_bash", "str_replace_editor", "execute_bash", "finish"]
    labels = [Labeller().label(t) for t in runs]
    assert labels[0].failure_class == "healthy"
    assert labels[1].failure_class != "healthy"
