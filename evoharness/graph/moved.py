"""Where a run's harness is when its run directory was copied or moved (a demo directory elsewhere)."""

from __future__ import annotations

from pathlib import Path

from evoharness.errors import InputError


def moved_harness(run_dir: Path, recorded_run_dir: Path | str | None, harness: Path | str) -> Path:
    """The run's harness repository, seen from where its run directory is now.

    A run records absolute paths. When ``run_dir`` is not where the run recorded it (a demo directory copied
    or moved elsewhere), the directory that moved is the part of the recorded path before the parts the two
    share at their end (``DEMO`` of ``DEMO/state/runs/<id>``). A harness that was inside it is taken from the
    same place in the copy: before, `ablate COPY` rolled out the original's harness, results for another
    repository, silently. A harness that lay outside it is the run's own, wherever the run directory went.
    When only the run directory moved (the recorded one is gone, the recorded harness is still there, the new
    place has none), the harness stayed: it is kept. InputError when it was inside and the copy lacks it while
    the original run is still there (a copy: its harness is another repository's).
    """
    harness = Path(harness)
    if recorded_run_dir is None or not harness.is_absolute() or not Path(recorded_run_dir).is_absolute():
        return harness
    old, new = Path(recorded_run_dir).resolve().parts, run_dir.resolve().parts
    if old == new:
        return harness
    shared = 0
    while shared < min(len(old), len(new)) - 1 and old[-1 - shared] == new[-1 - shared]:
        shared += 1
    old_root, new_root = Path(*old[:len(old) - shared]), Path(*new[:len(new) - shared])
    recorded = harness.resolve()
    if not recorded.is_relative_to(old_root):
        return harness
    copied = new_root / recorded.relative_to(old_root)
    if not copied.is_dir() and recorded.is_dir() and not Path(recorded_run_dir).exists():
        return harness  # only the run directory moved (e.g. ~/.evoharness): the harness stayed where it was
    if not copied.is_dir():
        raise InputError(str(run_dir), f"the run was recorded under {old_root}, with its harness repository at "
                         f"{harness}; its copy under {new_root} has no {copied} (copy the harness with the run, "
                         "or run it from where it was)")
    return copied


def recorded_harness(run_dir: Path, home: Path | str, harness: Path | str) -> Path:
    """The harness a run's settings.json names, absolute where it can be told.

    Runs record ``home`` and ``run.harness`` absolute (`runner.save_run_settings`); an older settings.json may
    hold a relative harness, meant against the cwd the run started from. With a relative ``home`` too (the
    default ``.evoharness``), that cwd is where ``<cwd>/<home>/runs/<id>`` puts it: ``run_dir`` less the
    home's parts. With an absolute home (or one that climbs with ``..``) the cwd is not known: the harness
    stays as recorded, against the cwd of the command.
    """
    harness, home = Path(harness), Path(home)
    if harness.is_absolute() or home.is_absolute() or ".." in home.parts:
        return harness
    cwd = run_dir.absolute().parent.parent
    for _ in home.parts:
        cwd = cwd.parent
    return cwd / harness
