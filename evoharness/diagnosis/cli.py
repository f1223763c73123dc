"""`evoharness diagnose` and `evoharness label`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import settings_of
from evoharness.errors import InputError
from evoharness.traces.importers import FORMAT_NAMES, load_paths

PathsArg = Annotated[list[Path], typer.Argument(help="trace files or directories", show_default=False)]
FormatOpt = Annotated[str | None, typer.Option("--format", "-f",
                                                help=f"input format ({' | '.join(FORMAT_NAMES)}); auto by default")]
SkipOpt = Annotated[bool, typer.Option("--skip-invalid", help="report bad records on stderr and label the rest")]


def _load(paths: list[Path], fmt: str | None, skip_invalid: bool):
    skipped: list[InputError] = []

    def report(e: InputError) -> None:
        skipped.append(e)
        typer.echo(f"skipped: {e}", err=True)

    trajs = list(load_paths(paths, fmt, skip_invalid=skip_invalid, on_invalid=report))
    if skipped:
        typer.echo(f"skipped {len(skipped)} invalid file(s)/record(s)", err=True)
    if not trajs:
        raise InputError(", ".join(map(str, paths)), "no trajectories found")
    return trajs


def diagnose(
    ctx: typer.Context,
    paths: PathsArg,
    fmt: FormatOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
    skip_invalid: SkipOpt = False,
) -> None:
    """Label every trajectory by its first failure signal; print the composition and the lever."""
    from evoharness.diagnosis.labeller import label_all
    from evoharness.diagnosis.report import diagnosis_dict, diagnosis_text

    cfg = settings_of(ctx).diagnosis
    labels = label_all(_load(paths, fmt, skip_invalid), cfg)
    if as_json:
        typer.echo(json.dumps(diagnosis_dict(labels, cfg), indent=2))
    else:
        typer.echo(diagnosis_text(labels, cfg))


def label(
    ctx: typer.Context,
    paths: PathsArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="labels JSONL to write")],
    fmt: FormatOpt = None,
    skip_invalid: SkipOpt = False,
) -> None:
    """Write one label (class, first signal, all signals, lever) per trajectory as JSONL."""
    from evoharness.diagnosis.labeller import Labeller

    labeller = Labeller(settings_of(ctx).diagnosis)
    trajs = _load(paths, fmt, skip_invalid)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for t in trajs:
            fh.write(labeller.label(t).model_dump_json() + "\n")
    typer.echo(f"wrote {len(trajs)} labels to {out}")


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose)
    app.command("label")(label)
