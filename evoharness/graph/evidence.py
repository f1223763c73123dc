"""A run's extra analyst evidence: traces from outside the run (production, ingested by the service).

When a run starts, the trajectories it is given -- the files in ``run.evidence`` (any format
`evoharness import` reads) and, for a run the service starts, the ingested process failures that
triggered it -- are written once to ``<run dir>/evidence.jsonl``. The file is never rewritten: a
resumed run (on any checkpointer) reads the same snapshot, whatever happened to the source files or
the ingestion store since. The analyst and critic see these trajectories' process failures beside
the anchor's; verification never uses them (it needs rollouts of the environment's tasks).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable
from pathlib import Path

from evoharness.diagnosis.models import Label
from evoharness.errors import InfraError, InputError
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Split, Trajectory
from evoharness.traces.store import read_trajectories

EVIDENCE_FILE = "evidence.jsonl"


def evidence_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVIDENCE_FILE


def import_evidence(paths: Iterable[Path | str]) -> list[Trajectory]:
    """Every trajectory in the files/directories (format auto-detected; the first copy of an id wins).

    Raises `InputError` naming the file and record for anything unreadable, and naming a path that holds
    no trajectory at all (an empty directory, a directory of other files: most likely a wrong path), so a
    bad path stops the run before it spends any budget.
    """

    found: list[Trajectory] = []
    for path in paths:
        n = len(found)
        found.extend(load_paths([path]))
        if len(found) == n:
            raise InputError(str(path), "no trajectories found (an evidence path must hold trace files)")
    return dedupe(found)


def dedupe(trajectories: Iterable[Trajectory]) -> list[Trajectory]:
    seen: set[str] = set()
    out = []
    for t in trajectories:
        if t.id not in seen:
            seen.add(t.id)
            out.append(t)
    return out


def write_evidence(run_dir: Path, trajectories: Iterable[Trajectory]) -> int:
    """Write the run's snapshot once (atomically, fsync'd); returns how many trajectories it holds.

    When the snapshot exists already it is kept as it is (the evidence of a run never changes).
    """
    path = evidence_path(run_dir)
    if path.exists():
        return count_evidence(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{EVIDENCE_FILE}.{os.getpid()}.tmp")
    n = 0
    try:
        with open(tmp, "wb") as fh:
            for t in dedupe(trajectories):
                fh.write(t.model_dump_json().encode() + b"\n")
                n += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InfraError(f"cannot write the run's evidence {path}: {e.strerror or e}") from None
    return n


def read_evidence(run_dir: Path) -> list[Trajectory]:
    """The snapshot's trajectories ([] when the run has none); `InputError` (file and line) when it is corrupt."""

    path = evidence_path(run_dir)
    if not path.exists():
        return []
    return list(read_trajectories(path))


def count_evidence(run_dir: Path) -> int:
    path = evidence_path(run_dir)
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def ensure_evidence(run_dir: Path, paths: list[Path]) -> list[Trajectory]:
    """The run's snapshot; taken now from ``paths`` (``run.evidence``) if the run started without one
    (a crash between saving the run's settings and writing the snapshot)."""
    if not evidence_path(run_dir).exists() and paths:
        write_evidence(run_dir, import_evidence(paths))
    return read_evidence(run_dir)


def usable(evidence: list[Trajectory], heldout_tasks: Container[str],
           known: Container[str]) -> tuple[list[Trajectory], int]:
    """The evidence the analyst may read, and how many were left out.

    Left out: held-out trajectories (``split = heldout`` or a task in ``heldout_tasks``: a harness
    edit informed by them would leak into the held-out measurement) and ids the run already has
    (``known``: the anchor's own rollouts, e.g. a previous run's trajectories.jsonl given as evidence).
    """
    keep = [t for t in evidence
            if t.split != Split.heldout and t.task_id not in heldout_tasks and t.id not in known]
    return keep, len(evidence) - len(keep)


def balanced(sources: list[list[Trajectory]], label: Callable[[list[Trajectory]], list[Label]]) -> list[Trajectory]:
    """All trajectories of ``sources``, ordered so each first signal's members alternate between sources.

    The roles keep the first few members of each signal group as a pattern's evidence; in this order a
    pattern seen both in the anchor and in production traces cites both.
    """
    keyed = []
    for s, trajs in enumerate(sources):
        rank: dict[str | None, int] = {}
        for i, (t, lab) in enumerate(zip(trajs, label(trajs), strict=True)):
            sig = lab.first_signal.id if lab.first_signal else None
            r = rank[sig] = rank.get(sig, -1) + 1
            keyed.append(((r, s, i), t))
    keyed.sort(key=lambda kv: kv[0])
    return [t for _, t in keyed]
