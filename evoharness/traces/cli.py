"""`evoharness import`: convert trace files to canonical JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoharness.errors import InputError
from evoharness.traces.importers import FORMAT_NAMES, load_paths
from evoharness.traces.models import Split
from evoharness.traces.store import write_trajectories


def import_traces(
    paths: Annotated[list[Path], typer.Argument(help="trace files or directories", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="canonical JSONL to write")],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help=f"{' | '.join(FORMAT_NAMES)}")] = None,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="skip bad records")] = False,
    split: Annotated[str | None, typer.Option(help="set the split of every trajectory (dev | heldout)")] = None,
) -> None:
    """Import traces (tau-bench, mini-swe-agent, Who&When, OpenAI records) as canonical JSONL."""

    def report(e: InputError) -> None:
        typer.echo(f"skipped: {e}", err=True)

    def stream():
        for t in load_paths(paths, fmt, skip_invalid=skip_invalid, on_invalid=report):
            yield t.model_copy(update={"split": Split(split)}) if split else t

    if split and split not in ("dev", "heldout", "unknown"):
        raise InputError("--split", f"unknown split {split!r} (dev | heldout | unknown)")
    n = write_trajectories(out, stream())
    typer.echo(f"wrote {n} trajectories to {out}")


def register(app: typer.Typer) -> None:
    app.command("import")(import_traces)
