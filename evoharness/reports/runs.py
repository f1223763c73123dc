"""Find a run and read what it recorded.

A finished run has ``summary.json`` in its directory; a run still in progress (or waiting for
review, or paused by an infrastructure failure) has only its checkpoint, from which the same
summary is rebuilt so a report can show what exists so far.

RUN may be a run id under ``<home>/runs``, a run directory (holds ``settings.json``), or a demo
output directory (holds ``summary.json`` and ``state/runs/<run-id>/``); ``run_dirs.run_dir_of`` says which a bare name
is (`diagnose` and `export-otel` resolve a run id with it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.checkpoint import open_checkpointer
from evoharness.graph.moved import moved_harness, recorded_harness
from evoharness.graph.resumed import saved_settings
from evoharness.graph.runner import RunOutcome
from evoharness.graph.summary import summary_dict
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.run_dirs import read_json as _read_json
from evoharness.run_dirs import run_dir_of

EVALUATION_FILE = "evaluation-{split}.json"
ABLATION_FILE = "ablation.json"


@dataclass
class RunRecord:
    """A run as a report sees it: its directory, its own settings, and its summary (possibly partial)."""

    run_id: str
    run_dir: Path
    settings: Settings
    summary: dict[str, Any]
    complete: bool
    note: str | None = None
    harness: Path | None = None  # the run's harness repo as found from where run_dir is now (moved_harness)

    def evaluation_path(self, split: str) -> Path:
        return self.run_dir / EVALUATION_FILE.format(split=split)

    @property
    def ablation_path(self) -> Path:
        return self.run_dir / ABLATION_FILE


def _checkpoint_state(settings: Settings, run_id: str, run_dir: Path) -> dict[str, Any] | None:
    """The run's latest checkpointed state, or None when it has none yet."""
    with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": run_id}})
    if found is None:
        return None
    return dict(found.checkpoint.get("channel_values") or {})


def _partial_summary(settings: Settings, run_id: str, run_dir: Path, state: dict[str, Any],
                     harness: Path) -> dict[str, Any]:
    """The summary `evoharness run` writes at the end, built from a checkpoint instead."""
    repo = HarnessRepo(harness, settings.harness_repo)
    # summary_dict reads only these attributes of the run's services
    services = SimpleNamespace(repo=repo, store=SimpleNamespace(path=run_dir / "trajectories.jsonl"))
    summary = summary_dict(RunOutcome(run_id, run_dir, state, []), services)
    current = _current_round(state, summary)
    if current is not None:
        summary["rounds"] = [*summary["rounds"], current]
    return summary


def _current_round(state: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any] | None:
    """The round under way (verified candidates, e.g. waiting for review), shaped like a finished one."""
    verdicts = {v.get("candidate"): v for v in state.get("verdicts") or []}
    rnd = state.get("round")
    if not verdicts or not state.get("anchor") or any(r.get("round") == rnd for r in summary["rounds"]):
        return None
    return {"round": rnd, "anchor_before": state["anchor"].get("mean"), "fresh_anchor": None,
            "anchor_commit": state["anchor"].get("commit"), "selection_optimism": None,
            "composition": state.get("composition"), "merged": [], "in_progress": True,
            "candidates": [{**c, "verdict": verdicts.get(c.get("branch"))} for c in state.get("candidates") or []],
            "accommodation_flags": 0, "reviews": len(state.get("reviews") or []),
            "budget_left": (summary.get("budget") or {}).get("left", 0)}


def load_run(settings: Settings, spec: str, *, home_only: bool = False) -> RunRecord:
    """Resolve ``spec`` and read the run; InputError (one line) when it is unknown or has nothing yet. With
    ``home_only`` (the service: a run id from a URL) ``spec`` is the run under ``<home>/runs`` only, whatever
    the working directory holds."""
    run_dir = run_dir_of(Path(settings.home), spec, home_only=home_only)
    # read as its resume reads it: a key removed since moved or dropped; a value this version refuses is one line
    # naming the run, the key and the way on (it was pydantic's four-line ValidationError)
    run_settings = saved_settings(run_dir / "settings.json", run_dir.name)
    run_id = run_dir.name
    harness = recorded_harness(run_dir, run_settings.home, run_settings.run.harness)  # an older relative one
    run_settings = run_settings.model_copy(update={"run": run_settings.run.model_copy(update={"harness": harness})})
    if (run_dir / "summary.json").is_file():
        summary = _read_json(run_dir / "summary.json")
        check_summary(run_dir / "summary.json", summary, run_id)
        harness = moved_harness(run_dir, (summary.get("files") or {}).get("run_dir"),
                                summary.get("harness_repo") or run_settings.run.harness)
        return RunRecord(run_id, run_dir, run_settings, summary, complete=True, harness=harness)
    harness = moved_harness(run_dir, Path(run_settings.home) / "runs" / run_id, run_settings.run.harness)
    state = _checkpoint_state(run_settings, run_id, run_dir)
    if not state or not state.get("anchors"):
        raise InputError(spec, f"run {run_id} is incomplete and has measured nothing yet (no anchor in its "
                         "checkpoint): nothing to report")
    summary = _partial_summary(run_settings, run_id, run_dir, state, harness)
    note = (f"run {run_id} is still in progress (status {state.get('status')!r}, at round {state.get('round')}); "
            "this report shows what it has measured so far")
    return RunRecord(run_id, run_dir, run_settings, summary, complete=False, note=note, harness=harness)


# What the report, `ablate` and `evaluate --run` read of a finished run's summary.json, and each one's type.
_SUMMARY_SHAPE: dict[str, type] = {"main": str, "anchors": list, "rounds": list, "merged": list, "rejected": list,
                                   "dropped": list, "before": dict, "after": dict, "budget": dict, "files": dict}
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
              bool: "true or false", type(None): "null"}


def check_summary(path: Path, summary: dict[str, Any], run_id: str) -> None:
    """``InputError`` when the summary.json a finished run wrote is not of the shape it writes (edited, or another
    file): `report` raised ``ValueError: no anchors to plot`` for ``"rounds": "x"``, `ablate` ``KeyError: 'main'``."""
    for key, kind in _SUMMARY_SHAPE.items():
        value = summary.get(key)
        if (value is not None or key == "main") and not isinstance(value, kind):
            raise InputError(str(path), f"not a run summary evoharness wrote: {key} is "
                             f"{_JSON_TYPE.get(type(value), 'of another type')}, not {_JSON_TYPE[kind]}")
        if kind is list and value and not all(isinstance(x, dict) for x in value):
            raise InputError(str(path), f"not a run summary evoharness wrote: {key} holds an item that is no object")
    if not summary.get("anchors"):
        raise InputError(str(path), f"run {run_id} measured nothing (its summary records no anchor): nothing to "
                         "report")


def load_stored(record: RunRecord) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Evaluations (by split) and the ablation stored in the run directory, where present."""
    evaluations = {}
    for split in ("dev", "heldout"):
        path = record.evaluation_path(split)
        if path.is_file():
            evaluations[split] = _read_json(path)
    ablation = _read_json(record.ablation_path) if record.ablation_path.is_file() else None
    return evaluations, ablation
