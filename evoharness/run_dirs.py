"""Which run a command's RUN names: a run id under ``<home>/runs``, a run directory or a demo output directory.

`report`, `evaluate`, `ablate` (``reports.runs.load_run``) resolve a run id with ``run_dir_of``; `diagnose`,
`label` and `export-otel` with ``run_or_path``; the service's URLs with ``home_only``. One rule for all:
a bare name that is both a run under the home and something here the command reads is ambiguous (one error asks
for a path), never read as either silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoharness.errors import InputError, missing_reason


def is_path(spec: str) -> bool:
    """Whether ``spec`` is written as a path (a ``/`` in it, or a leading ``.``), never a run id."""
    return "/" in spec or spec.startswith(".")


def home_run_of(home: Path, spec: str, rival: Callable[[Path], bool], rival_is: str) -> Path | None:
    """The run under ``<home>/runs`` the bare name ``spec`` names (None when there is none). When ``./spec`` is
    also something the command reads (``rival``: ``rival_is`` says what), one ``InputError`` asks for a path:
    which was read must not hang on a rule the user cannot see."""
    home_run, here = Path(home) / "runs" / spec, Path(spec)
    if not (home_run / "settings.json").is_file():
        return None
    if rival(here) and here.resolve() != home_run.resolve():
        raise InputError(spec, f"ambiguous: both {home_run} (a run under the home) and ./{spec} ({rival_is} "
                         f"here); name one by its path ({home_run} or ./{spec})")
    return home_run.resolve()


def run_dir_of(home: Path, spec: str, *, home_only: bool = False) -> Path:
    """The run ``spec`` names. A path (``/`` in it, or a leading ``.``) is a run or demo output directory. A bare
    name is the run of that id under ``<home>/runs``, else the run or demo output directory of that name in the
    working directory; when it is both (a copied run beside a home that holds it), an error asks for a path. A
    directory of that name here that holds no run (notes kept by run id) is no rival to the run under home."""
    base = Path(home) / "runs"
    if is_path(spec):
        if not Path(spec).is_dir():  # said 'no such run directory' of a missing path and of a file alike
            raise InputError(spec, "not a directory (a run directory is one)" if Path(spec).exists() else
                             missing_reason(spec))
        return dir_run(Path(spec), spec)
    here = Path(spec)
    found = home_run_of(home, spec, (lambda p: False) if home_only else holds_run, "a run directory")
    if found is not None:
        return found
    if not home_only and holds_run(here):
        return dir_run(here, spec)
    where = f"no such run under {base}{known_runs(base)}"
    if not home_only:
        where += (f", and ./{spec} here is not a run directory (no settings.json, summary.json or state/runs/run-*)"
                  if here.is_dir() else ", nor a directory of that name here")
    raise InputError(spec, where)


def run_or_path(home: Path, text: str) -> Path:
    """What a trace-reading command's PATH names: itself when it is ``-`` or written as a path; a bare name is the
    directory of the run of that id under ``<home>/runs``, else the trace file or directory of that name here. Both
    is one ``InputError`` asking for a path, as `report` says of a run directory here; so is neither."""
    path = Path(text)  # from the text as typed: Path("./NAME") is "NAME", no longer written as a path
    if text == "-" or is_path(text):
        return path
    found = home_run_of(home, text, lambda p: p.exists() or p.is_symlink(),
                        "a directory" if path.is_dir() else "a file")
    if found is not None:
        return found
    if path.exists() or path.is_symlink():
        return path
    base = Path(home) / "runs"
    raise InputError(text, f"no such file or directory, nor a run of that id under {base}{known_runs(base)}")


def known_runs(base: Path) -> str:
    """The last few run ids under ``base``, for an error naming none of them."""
    known = sorted(p.name for p in base.glob("run-*")) if base.is_dir() else []
    return f" (known: {', '.join(known[-5:])})" if known else ""


def holds_run(path: Path) -> bool:
    """Whether ``path`` is a directory ``dir_run`` reads a run from (or says why it cannot)."""
    return path.is_dir() and ((path / "settings.json").is_file() or (path / "summary.json").is_file()
                              or any((path / "state" / "runs").glob("run-*")))


def dir_run(path: Path, spec: str) -> Path:
    """The run of a run directory (holds settings.json) or a demo output directory (``demo_run``), resolved."""
    if (path / "settings.json").is_file():
        return path.resolve()
    return demo_run(path, spec).resolve()


def demo_run(path: Path, spec: str) -> Path:
    """The run a demo output directory ``path`` holds (``spec``: how the user named it, for errors): the run its
    summary.json's ``run_id`` names under ``path/state/runs`` (the latest: `demo --resume` adds a run and rewrites
    summary.json), or, before summary.json is written (a demo still running), its one run there. Always under
    ``path``: a copied or moved demo directory is the copy's run, never the absolute ``files.run_dir`` summary.json
    recorded (the original's: gone, or another machine's; `ablate COPY` wrote into the original's run). `import`,
    `diagnose`, `label`, `report`, `evaluate`, `ablate` and `export-otel` read a demo directory through this. An
    unreadable summary.json, one naming no run or a run not there, several runs and no summary, or none: one
    ``InputError``."""
    runs = path / "state" / "runs"
    if (path / "summary.json").is_file():
        named = read_json(path / "summary.json").get("run_id")
        if not isinstance(named, str) or not named or named != Path(named).name or named.startswith("."):
            raise InputError(str(path / "summary.json"), f"names no run of {runs} (run_id {named!r})")
        if not (runs / named).is_dir():
            raise InputError(spec, f"summary.json names run {named!r} but its run directory is gone "
                             f"(no {runs / named})")
        return runs / named
    found = sorted(p for p in runs.glob("*") if not p.name.startswith(".")
                   and ((p / "settings.json").is_file() or (p / "trajectories.jsonl").is_file()))
    if len(found) == 1:  # a demo still running: no summary.json yet
        return found[0]
    if len(found) > 1:
        raise InputError(spec, "holds several runs (" + ", ".join(p.name for p in found) + "); name one: "
                         f"{found[-1]}")
    raise InputError(spec, "not a run directory (no settings.json, summary.json or state/runs/run-*)")


def run_trajectories(path: Path, spec: str) -> Path:
    """The ``trajectories.jsonl`` of the run a run directory or demo output directory ``path`` holds (``spec``: how
    the user named it, for errors): its own, else (a demo directory) that of the run ``demo_run`` finds. A run that
    has written none yet is one ``InputError``. The one place this is decided: `export-otel`, `dataset export -t`,
    ``JsonlSource`` and the trace scan of `import` / `diagnose` / `label` read a run's trajectories through it."""
    if (path / "trajectories.jsonl").is_file():
        return path / "trajectories.jsonl"
    run = path if (path / "settings.json").is_file() else demo_run(path, spec)
    if not (run / "trajectories.jsonl").is_file():
        raise InputError(str(run) if run != path else spec, "a run that has written no trajectories yet (no "
                         "trajectories.jsonl): try again once its first rollouts are done")
    return run / "trajectories.jsonl"


def trajectory_file(path: Path, spec: str) -> Path:
    """What a dataset command reads as the trajectory file ``path``: a run or demo directory's run's
    ``trajectories.jsonl`` (``run_trajectories``; a directory that holds a ``trajectories.jsonl`` is read as a run's,
    as `import --out DIR` writes one), anything else ``path`` itself, for the reader to take or refuse."""
    if path.is_dir() and ((path / "trajectories.jsonl").is_file() or (path / "settings.json").is_file()
                          or (path / "state" / "runs").is_dir()):
        return run_trajectories(path, spec)
    return path


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(str(path), f"unreadable: {e}") from None
    except RecursionError:  # was a traceback for `report`, `ablate` and `evaluate --run`
        raise InputError(str(path), "unreadable: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "not a JSON object")
    return data
