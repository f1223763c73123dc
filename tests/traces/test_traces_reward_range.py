"""A reward is read as the run's score whatever its size: an integer past what a float holds (JSON has no limit)
clamps to 0..1 as 5.0 does, and a NaN is refused as any other non-number is -- in every importer that reads one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from evoharness.errors import InputError
from evoharness.traces.importers import load_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
HUGE = "1" + "0" * 400  # a valid JSON number; float() of it overflows
CHAT = [{"role": "user", "content": "Fix values() on an empty list."},
        {"role": "assistant", "content": "Done: values() returns None for an empty list."}]


def _openai(tmp: Path, reward: str) -> Path:
    path = tmp / "runs.jsonl"
    path.write_text(json.dumps({"messages": CHAT, "task_id": "t1", "reward": 0.5}).replace("0.5", reward) + "\n")
    return path


def _tau2(tmp: Path, reward: str) -> Path:
    text = (FIXTURES / "tau2" / "results.json").read_text()
    path = tmp / "results.json"
    path.write_text(re.sub(r'"reward": [0-9.]+', f'"reward": {reward}', text))
    return path


def _atif(tmp: Path, reward: str) -> Path:
    trial = tmp / "trial-1"
    shutil.copytree(FIXTURES / "atif" / "trial-1", trial)
    result = trial / "result.json"
    result.write_text(re.sub(r'"reward": [0-9.]+', f'"reward": {reward}', result.read_text()))
    return trial / "agent" / "trajectory.json"


FORMATS = {"openai": _openai, "tau2": _tau2, "atif": _atif}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("reward", "score"), [(HUGE, 1.0), (f"-{HUGE}", 0.0)])
def test_a_reward_too_large_for_a_float_clamps_as_any_reward_out_of_range(tmp_path, fmt, reward, score):
    runs = list(load_paths([FORMATS[fmt](tmp_path, reward)]))
    assert runs and {t.score for t in runs} == {score}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_nan_reward_is_refused_not_read_as_a_score(tmp_path, fmt):
    with pytest.raises(InputError, match="reward must be a number, got nan"):
        list(load_paths([FORMATS[fmt](tmp_path, "NaN")]))
