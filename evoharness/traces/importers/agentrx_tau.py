"""AgentRx's tau-bench runs: one tau-bench record per file whose messages carry a 1-based ``index``.

AgentRx (microsoft/AgentRx, ``data/tau_dataset/<task_id>.json``) stores each tau-bench retail run as one
JSON object: ``task_id``, ``trial``, ``reward``, ``info`` (the task, the expected actions, the reward's
parts), ``traj`` (OpenAI chat messages, each with an ``index``: 1, 2, 3, ...) and ``records``. The record is
read as a tau-bench record (``openai_records``: tool calls, ``Error: ...`` tool results as events, the
simulated user's instruction) and scored by its ``reward``.

Steps: our step i is message i of ``traj``; ``meta["source_index"][i]`` is that message's own ``index``
(i + 1 in AgentRx's files), so a step a user reads in the source is found here and back.

Human labels: AgentRx's ground truth (``tau_ground_truth.json``: per ``trajectory_id`` -- the file's name,
which is its task id -- a list of ``failures`` whose ``step_number`` is a message's ``index``), found as
``agentrx.ground_truth_files`` finds it (beside the runs, one folder up, or in a ``ground_truth/`` folder
there), is kept in ``meta["human_failures"]`` as ``{step, category, agent, reason}`` with ``step`` our step;
a ``step_number`` that names no message's ``index`` is left out and counted in
``meta["human_failures_unplaced"]``. No such labels are public: the format is AgentRx's, the labels
whoever holds them.

A file may also hold a JSON list of such records (each becomes a trajectory; the labels join by task id),
read one record at a time (``jsonstream.ArrayRecords``): memory does not grow with their number.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.errors import InputError
from evoharness.traces.importers import agentrx, openai_records
from evoharness.traces.importers.jsonstream import ArrayRecords
from evoharness.traces.models import Trajectory
from evoharness.traces.store import _describe


def matches(rec: dict) -> bool:
    """A tau-bench record (``traj`` list) whose first message carries an integer ``index``."""
    traj = rec.get("traj")
    if not isinstance(traj, list) or not traj or not isinstance(traj[0], dict):
        return False
    index = traj[0].get("index")
    return isinstance(index, int) and not isinstance(index, bool)


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import read_json_file, report_invalid

    if data is None:
        data = read_json_file(path)
    many = isinstance(data, list | ArrayRecords)  # a list: read element by element when it is a file's
    for i, rec in enumerate(data if many else [data]):
        where = f"record {i}" if many else None
        try:
            yield convert(path, rec, i if many else None)
        except ValidationError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), f"bad tau-bench record: {_describe(e)}",
                                                                where=where))
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=where))


def convert(path: Path, rec: Any, position: int | None = None) -> Trajectory:
    if not isinstance(rec, dict):
        raise ValueError(f"expected a tau-bench record (an object), got {type(rec).__name__}")
    t = openai_records.convert(rec, path.stem, position or 0)
    index = [m.get("index") for m in t.messages]
    run_id = path.stem if position is None else str(rec.get("task_id", position))
    places: dict[int, int] = {}
    for step, n in enumerate(index):
        if isinstance(n, int) and not isinstance(n, bool):
            places.setdefault(n, step)
    unplaced: list[int] = []

    def step_of(n: int) -> int | None:
        if n not in places:
            unplaced.append(n)
        return places.get(n)

    labels, problems = agentrx.human_failures(path, run_id, step_of)
    if labels is None and run_id != t.task_id:
        labels = agentrx.human_failures(path, t.task_id, step_of)[0]
    meta: dict[str, Any] = {**t.meta, "source_format": "agentrx-tau", "source_index": index}
    if labels is not None:
        meta["human_failures"] = labels
    if problems:
        meta["import_warnings"] = problems
    if unplaced:
        meta["human_failures_unplaced"] = unplaced
    t.meta = meta
    t.id = f"agentrx-tau:{run_id}" if position is None else f"agentrx-tau:{path.stem}:{position}"
    return t
