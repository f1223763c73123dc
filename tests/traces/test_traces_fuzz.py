"""Importers never crash on arbitrary input: they yield trajectories or raise InputError."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoharness.errors import InputError
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", 3])},
    optional={"content": st.none() | st.text(max_size=30) | st.integers(),
              "tool_calls": st.lists(json_values, max_size=2), "tool_call_id": st.text(max_size=5)},
)
record = st.fixed_dictionaries(
    {}, optional={"traj": st.lists(message, max_size=5) | json_values, "reward": json_values,
                  "task_id": json_values, "trial": json_values, "messages": st.lists(message, max_size=3),
                  "history": st.lists(json_values, max_size=3), "question": json_values,
                  "info": json_values, "id": json_values},
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check(path):
    try:
        for t in load_paths([path]):
            assert isinstance(t, Trajectory)
    except InputError as e:
        assert str(path) in str(e)


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(tmp_path, data):
    for suffix in (".json", ".jsonl"):
        p = tmp_path / f"f{suffix}"
        p.write_bytes(data)
        _check(p)


@SETTINGS
@given(st.lists(record, max_size=4))
def test_structured_records(tmp_path, records):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(records))
    _check(p)
    q = tmp_path / "r.jsonl"
    q.write_text("\n".join(json.dumps(r) for r in records))
    _check(q)


@SETTINGS
@given(record)
def test_single_object(tmp_path, rec):
    p = tmp_path / "one.json"
    p.write_text(json.dumps(rec))
    _check(p)
