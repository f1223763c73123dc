"""Canonical evoharness trajectories: JSONL, or a JSON list / single object."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.errors import InputError
from evoharness.traces.importers.jsonstream import ArrayRecords
from evoharness.traces.models import Trajectory
from evoharness.traces.store import _describe, read_trajectories


def matches(rec: dict) -> bool:
    return {"id", "task_id", "messages"} <= rec.keys() and "traj" not in rec


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    if data is None:
        yield from read_trajectories(path, skip_invalid=skip_invalid, on_invalid=on_invalid)
        return
    from evoharness.traces.importers import report_invalid

    records = data if isinstance(data, list | ArrayRecords) else [data]
    for i, rec in enumerate(records):
        try:
            yield Trajectory.model_validate(rec)
        except ValidationError as e:
            report_invalid(skip_invalid, on_invalid,
                           InputError(str(path), f"not a canonical trajectory: {_describe(e)}",
                                      where=f"record {i}"))
