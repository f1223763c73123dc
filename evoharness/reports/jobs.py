"""Evaluate and ablate a recorded run, storing the results in its run directory for `report`."""

from __future__ import annotations

from pathlib import Path

from evoharness.config import Settings
from evoharness.errors import InputError
from evoharness.graph.progress import Progress
from evoharness.reports.ablate import Ablation, ablate
from evoharness.reports.measure import Evaluation, Measurer, compare
from evoharness.reports.runs import RunRecord
from evoharness.traces.store import replacing

SPLITS = ("dev", "heldout")


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise InputError("--split", f"unknown split {split!r} (dev | heldout)")
    return split


def run_settings(record: RunRecord) -> Settings:
    """The run's own settings, with ``home`` taken from where the run directory actually is.

    (``<home>/runs/<run-id>``: a relative home in settings.json depends on the cwd the run had.)
    """
    return record.settings.model_copy(update={"home": record.run_dir.parent.parent})


def run_harness(record: RunRecord) -> Path:
    """The run's harness repo: in a copied demo directory, the copy's (runs.moved_harness)."""
    return record.harness or Path(record.summary.get("harness_repo") or record.settings.run.harness)


def run_measurer(record: RunRecord, progress: Progress, model: str | None = None) -> Measurer:
    s = record.settings.run
    return Measurer.of(run_settings(record), run_harness(record), s.env, model or s.model, progress)


def run_tasks(record: RunRecord, measurer: Measurer, split: str) -> list[str]:
    run = record.settings.run
    return measurer.tasks(split, run.dev_limit if split == "dev" else run.heldout_limit)


def seed_of(record: RunRecord) -> str:
    anchors = record.summary.get("anchors") or []
    if not anchors or not anchors[0].get("commit"):
        raise InputError(record.run_id, "the run has no seed anchor recorded")
    return anchors[0]["commit"]


def evaluate_run(record: RunRecord, split: str, k: int | None, progress: Progress,
                 out: Path | None = None) -> Evaluation:
    """Seed (the run's first anchor) vs the run's final main on ``split``; stored as evaluation-<split>.json."""
    check_split(split)
    measurer = run_measurer(record, progress)
    try:
        ev = compare(measurer, "seed", "evolved", split, k or record.settings.run.rollouts,
                     record.settings.run.seed, tasks=run_tasks(record, measurer, split),
                     z=record.settings.verification.z, sigma_floor=record.settings.verification.sigma_floor,
                     baseline_commit=seed_of(record), candidate_commit=record.summary["main"])
    finally:
        measurer.close()
    save_result(out or record.evaluation_path(split), ev)
    return ev


def ablate_run(record: RunRecord, k: int | None, splits: list[str], progress: Progress,
               out: Path | None = None) -> Ablation:
    """Leave-one-out over the run's merged edits; stored as ablation.json in the run directory."""
    for s in splits:
        check_split(s)
    measurer = run_measurer(record, progress)
    try:
        merged = record.summary.get("merged") or []
        progress.note(f"ablating {len(merged)} merged edit(s) of {record.run_id} from main "
                      f"{str(record.summary['main'])[:10]}")
        tasks = {s: run_tasks(record, measurer, s) for s in splits}
        result = ablate(measurer, record.run_id, record.summary["main"], merged, splits,
                        k or record.settings.run.rollouts, record.settings.run.seed, tasks,
                        record.settings.verification.z, record.settings.verification.sigma_floor)
    finally:
        measurer.close()
    save_result(out or record.ablation_path, result)
    return result


def save_result(path: Path, result: Evaluation | Ablation) -> None:
    """Write a measured result whole or not at all (``replacing``): written in place, a full disk left a cut
    ablation.json that `report` refused as unreadable and a later `ablate` kept as "the ablation of this run"."""
    with replacing(path, "w") as fh:
        fh.write(result.model_dump_json(indent=2))
