"""Find a run and read what it recorded.

A finished run has ``summary.json`` in its directory; a run still in progress (or waiting for
review, or paused by an infrastructure failure) has only its checkpoint, from which the same
summary is rebuilt so a report can show what exists so far.

RUN may be a run id under ``<home>/runs``, a run directory (holds ``settings.json``), or a demo
output directory (holds ``summary.json`` and ``state/runs/<run-id>/``); ``_run_dir_of`` says which a bare name is.
"""

from __future__ import annotations

import json
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


def _run_dir_of(settings: Settings, spec: str, *, home_only: bool = False) -> Path:
    """The run ``spec`` names. A path (``/`` in it, or a leading ``.``) is a run or demo output directory. A bare
    name is the run of that id under ``<home>/runs``, else the run or demo output directory of that name in the
    working directory; when it is both (a copied run beside a home that holds it), an error asks for a path. A
    directory of that name here that holds no run (notes kept by run id) is no rival to the run under home."""
    base = Path(settings.home) / "runs"
    if "/" in spec or spec.startswith("."):
        if not Path(spec).is_dir():
            raise InputError(spec, "no such run directory")
        return _dir_run(Path(spec), spec)
    home_run, here = base / spec, Path(spec)
    if (home_run / "settings.json").is_file():
        if not home_only and _holds_run(here) and here.resolve() != home_run.resolve():
            raise InputError(spec, f"ambiguous: both {home_run} (a run under the home) and ./{spec} (a run "
                             f"directory here) are runs; name one by its path ({home_run} or ./{spec})")
        return home_run.resolve()
    if not home_only and _holds_run(here):
        return _dir_run(here, spec)
    known = sorted(p.name for p in base.glob("run-*")) if base.is_dir() else []
    where = f"no such run under {base}" + (f" (known: {', '.join(known[-5:])})" if known else "")
    if not home_only:
        where += (f", and ./{spec} here is not a run directory (no settings.json, summary.json or state/runs/run-*)"
                  if here.is_dir() else ", nor a directory of that name here")
    raise InputError(spec, where)


def _holds_run(path: Path) -> bool:
    """Whether ``path`` is a directory ``_dir_run`` reads a run from (or says why it cannot)."""
    return path.is_dir() and ((path / "settings.json").is_file() or (path / "summary.json").is_file()
                              or any((path / "state" / "runs").glob("run-*")))


def _dir_run(path: Path, spec: str) -> Path:
    """The run of a run directory (holds settings.json) or a demo output directory (summary.json, state/runs/)."""
    if (path / "settings.json").is_file():
        return path.resolve()
    if (path / "summary.json").is_file():  # a demo output directory
        data = _read_json(path / "summary.json")
        # its own state/ first: a copied demo directory is its copy's run, not the original's (the
        # recorded absolute run_dir named the original, so `ablate COPY` wrote into the original's run)
        for cand in (path / "state" / "runs" / str(data.get("run_id")),
                     Path(str((data.get("files") or {}).get("run_dir", "")))):
            if str(cand) and (cand / "settings.json").is_file():
                return cand.resolve()
        raise InputError(spec, f"summary.json names run {data.get('run_id')!r} but its run directory is gone")
    runs = sorted(p for p in (path / "state" / "runs").glob("run-*") if (p / "settings.json").is_file())
    if len(runs) == 1:  # a demo still running: no summary.json yet
        return runs[0].resolve()
    if len(runs) > 1:
        raise InputError(spec, "holds several runs (" + ", ".join(p.name for p in runs) + "); name one")
    raise InputError(spec, "not a run directory (no settings.json, summary.json or state/runs/run-*)")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(str(path), f"unreadable: {e}") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "not a JSON object")
    return data


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
    run_dir = _run_dir_of(settings, spec, home_only=home_only)
    # read as its resume reads it: a key removed since moved or dropped; a value this version refuses is one line
    # naming the run, the key and the way on (it was pydantic's four-line ValidationError)
    run_settings = saved_settings(run_dir / "settings.json", run_dir.name)
    run_id = run_dir.name
    harness = recorded_harness(run_dir, run_settings.home, run_settings.run.harness)  # an older relative one
    run_settings = run_settings.model_copy(update={"run": run_settings.run.model_copy(update={"harness": harness})})
    if (run_dir / "summary.json").is_file():
        summary = _read_json(run_dir / "summary.json")
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


def load_stored(record: RunRecord) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Evaluations (by split) and the ablation stored in the run directory, where present."""
    evaluations = {}
    for split in ("dev", "heldout"):
        path = record.evaluation_path(split)
        if path.is_file():
            evaluations[split] = _read_json(path)
    ablation = _read_json(record.ablation_path) if record.ablation_path.is_file() else None
    return evaluations, ablation
