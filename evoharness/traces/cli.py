"""`evoharness import`: convert trace files to canonical JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import Ticker, output_file, settings_of
from evoharness.errors import InputError
from evoharness.traces.importers import (
    FORMAT_NAMES,
    ImportWarnings,
    RepeatedIds,
    canonical_line,
    load_paths,
    output_apart,
)
from evoharness.traces.models import Split
from evoharness.traces.store import write_trajectories


def import_traces(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="trace files or directories (- reads standard input); "
                                                    "never a run id", metavar="PATHS...", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", parser=output_file("trajectories.jsonl"), metavar="<path>",
                                      help="canonical JSONL to write (a directory: DIR/trajectories.jsonl)")],
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help=f"{' | '.join(FORMAT_NAMES)}; auto by default")] = None,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="skip bad records")] = False,
    split: Annotated[str | None, typer.Option(help="set the split of every trajectory, dev | heldout | unknown "
                                                          "(default: each keeps the split its importer gives)")] = None,
) -> None:
    """Import traces in any format --format names (tau-bench, tau2, mini-swe-agent, SWE-agent, OpenHands, Who&When,
    AgentRx, ATIF, OTLP, LangSmith, AutoGen, OpenAI records) as canonical JSONL."""
    paths = [Path(name) for name in names]
    for name in names:
        _not_a_run_id(ctx, name)

    def report(e: InputError) -> None:
        typer.echo(f"skipped: {e}", err=True)

    aside = [0, None]  # trajectories left unscored because results of another run were set aside; the first why
    warnings = ImportWarnings()  # files found but not usable (a broken ground truth or results file)

    twice = RepeatedIds()

    def stream():
        n = 0
        ticker = Ticker()
        for t in load_paths(paths, fmt, skip_invalid=skip_invalid, on_invalid=report, exclude=own, warnings=warnings):
            n += 1
            ticker.tick()
            twice.add(t)
            if t.score is None and isinstance(why := t.meta.get("results_set_aside"), str):
                aside[0] += 1
                aside[1] = aside[1] or f"{t.id}: {why}"
            yield t.model_copy(update={"split": Split(split)}) if split else t
        if not n:  # an empty directory is a wrong path, as for `diagnose`; --out is left as it was
            raise InputError(", ".join(map(str, paths)), "no trajectories found")

    if split and split not in ("dev", "heldout", "unknown"):
        raise InputError("--split", f"unknown split {split!r} (dev | heldout | unknown)")
    own = output_apart(out, paths, ours=canonical_line)  # an earlier import's output may be replaced
    n = write_trajectories(out, stream())
    for line in warnings.lines():
        typer.echo(line, err=True)
    if line := twice.line(n, "all are written"):
        typer.echo(f"{line}: import them apart or rename the files", err=True)
    if aside[0]:
        typer.echo(f"note: {aside[0]} of {n} trajectories left unscored: SWE-bench results of another run set "
                   f"aside (meta.results_set_aside; e.g. {aside[1]})", err=True)
    typer.echo(f"wrote {n} trajectories to {out}")


def _not_a_run_id(ctx: typer.Context, name: str) -> None:
    """`import` takes paths only: a run's trajectories.jsonl is canonical already (an import of it is a copy), and
    `import` reads no settings while its inputs exist (a broken evoharness.toml here never stops it). A bare name
    that is nothing here but a run under the home (`diagnose run-abc` reads it) is one error naming the run's file,
    not 'no such file or directory'; the settings are read only then, to find the home."""
    from evoharness.errors import EvoharnessError
    from evoharness.run_dirs import is_path

    if name == "-" or is_path(name) or Path(name).exists() or Path(name).is_symlink():
        return
    try:
        run = Path(settings_of(ctx).home) / "runs" / name
    except EvoharnessError:  # settings that do not load: the importer's own 'no such file' says enough
        return
    if (run / "settings.json").is_file():
        raise InputError(name, f"a run id; import reads paths, never a run id (a run's trajectories are canonical "
                         f"already: {run / 'trajectories.jsonl'}; give that path to set --split or join runs)")


def export_otel(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="a run id under <home>/runs or a run directory (its "
                                                "trajectories.jsonl and summary.json), a "
                                                "demo directory (its run) or a trajectories JSONL / any "
                                                "importable trace file (- reads standard input)",
                                           show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", parser=output_file("spans.otlp.jsonl"), metavar="<path>",
        help="OTLP/JSON lines file to write (a directory: DIR/spans.otlp.jsonl; required unless --endpoint)")] = None,
    endpoint: Annotated[str | None, typer.Option(help="OTLP/HTTP receiver, e.g. http://127.0.0.1:6006 "
                                                      "(Phoenix) or http://127.0.0.1:4318 (a Collector); "
                                                      "required unless --out")] = None,
    service_name: Annotated[str, typer.Option(help="the OTLP resource's service.name")] = "evoharness",
    timeout: Annotated[float, typer.Option(
        help="--endpoint: seconds to keep trying one request (retries with back-off included) before giving "
             "up with an error")] = 10.0,
) -> None:
    """Export rollouts as OpenTelemetry GenAI spans (one trace per trajectory) to a file or an OTLP endpoint."""
    from evoharness.traces.otel_export import export

    def retrying(line: str) -> None:
        typer.echo(f"warning: {endpoint}: {line}", err=True)

    if (out is None) == (endpoint is None):
        raise InputError("export-otel", "give exactly one of --out FILE or --endpoint URL")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise InputError("--endpoint", f"{endpoint!r} is not an http(s) URL")
    from evoharness.run_dirs import run_or_path

    read = run_or_path(settings_of(ctx).home, source)  # a run id, as `report` takes one
    run_dir = _run_dir(read) if read.is_dir() else None
    path = run_dir / "trajectories.jsonl" if run_dir is not None else read
    if out is not None:  # the spans are written over --out after the input is read: never over the input itself
        output_apart(out, [path, *([run_dir / "summary.json"] if run_dir is not None else [])])
    n = export(load_paths([path]), out=out, endpoint=endpoint, run_dir=run_dir, service_name=service_name,
               timeout=timeout, on_retry=retrying)
    typer.echo(f"exported {n} trajectories as {n} traces to {out or endpoint}")


def _run_dir(source: Path) -> Path:
    """The run directory ``source`` names: itself (it holds trajectories.jsonl), or a demo directory's run
    (``run_dirs.run_trajectories``, as `diagnose` and `dataset export` read one)."""
    from evoharness.run_dirs import run_trajectories

    return run_trajectories(source, str(source)).parent


def register(app: typer.Typer) -> None:
    app.command("import")(import_traces)
    app.command("export-otel")(export_otel)
