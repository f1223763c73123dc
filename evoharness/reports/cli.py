"""`evoharness report | evaluate | ablate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import (
    MAX_ROLLOUTS,
    TEMPERATURE_HELP,
    agent_spec,
    check_range,
    check_rollouts,
    output_dir,
    output_file,
    settings_of,
)
from evoharness.errors import InputError


def _progress(quiet: bool = False):
    from evoharness.graph.progress import Progress

    return Progress(quiet=quiet)


def _splits(raw: str) -> list[str]:
    from evoharness.reports.jobs import check_split

    return ["dev", "heldout"] if raw == "both" else [check_split(raw)]


def _positive(k: int | None) -> int | None:
    return check_rollouts(k)


def _keep_earlier(path: Path, what: str) -> None:
    """Without --out, a run's stored result is never replaced silently (it was: a second `ablate RUN` lost the
    first, perhaps a costlier one with more rollouts or both splits): one error line before any rollout, saying
    how to replace it or write beside it -- the rule `--out DIR` follows for the file it implies."""
    if path.exists():
        raise InputError(str(path), f"already holds {what} of this run, kept; pass --out {path} to replace it, "
                                    "or --out OTHER.json to keep both")


def _not_the_runs_own(record, out: Path | None, results: tuple[Path, ...] | None = None) -> None:
    """An --out never replaces what the run recorded or its harness: `ablate RUN --out RUN_DIR/summary.json` (or
    settings.json, the checkpoints, a demo's summary.json) destroyed the run, and a report written into the
    harness repository left untracked files in the tree the run evolves. ``results``: the run's own result files
    (ablation.json, evaluation-<split>.json), which an explicit --out may replace; None: ``out`` is a directory
    that gets new files (`report`), checked against the harness only."""
    from evoharness.reports.jobs import run_harness

    if out is None:
        return
    target = out.resolve()
    home = record.run_dir.parent.parent  # <home>/runs/<run-id>; a demo's home is DEMO/state
    for harness in (run_harness(record).resolve(), home.parent / "harness" if home.name == "state" else None):
        if harness is not None and target.is_relative_to(harness):
            raise InputError(str(out), f"is inside the run's harness repository ({harness}); write it elsewhere")
    if results is None:
        return
    recorded = target.is_relative_to(home) or (home.name == "state" and target == home.parent / "summary.json")
    if recorded and target.exists() and target not in {r.resolve() for r in results}:
        raise InputError(str(out), "is a file the run recorded (its state, settings or summary), never replaced; "
                                   "name another file")


def report(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="run id under <home>/runs, a run directory, or a demo output dir")],
    out: Annotated[Path, typer.Option("--out", "-o", parser=output_dir, metavar="<path>",
                                      help="directory for report.md, report.html and the PNGs")],
    compute: Annotated[bool, typer.Option("--compute", help="first evaluate seed vs evolved (dev, held-out) and "
                                          "ablate the merged edits where the run directory has no results yet")]
    = False,
    rollouts: Annotated[int | None, typer.Option("--rollouts", "-k", help="k for --compute (default: the run's)")]
    = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace files of the report's names in DIR that no "
                                            "earlier report wrote (default: refused, naming the file)")] = False,
) -> None:
    """Write a markdown + HTML report of a run with its plots (anchors, composition, seed vs evolved, ablation)."""
    from evoharness.reports.jobs import ablate_run, evaluate_run
    from evoharness.reports.report import build, read_written, refuse_foreign
    from evoharness.reports.runs import load_run

    _positive(rollouts)  # the options first, then the run
    record = load_run(settings_of(ctx), run)
    _not_the_runs_own(record, out)
    if compute and not overwrite:  # the files every report writes, before the rollouts; build checks each it writes
        refuse_foreign(out, ["report.md", "report.html", "anchors.png"], read_written(out))
    if record.note:
        typer.echo(f"note: {record.note}", err=True)
    if compute:
        progress = _progress()
        for split in ("dev", "heldout"):
            if not record.evaluation_path(split).is_file():
                evaluate_run(record, split, _positive(rollouts), progress)
        if not record.ablation_path.is_file():
            ablate_run(record, _positive(rollouts), ["dev", "heldout"], progress)
    written = build(record, out, overwrite)
    typer.echo(f"wrote {written['md']} and {written['html']} with "
               + ", ".join(p.name for name, p in written.items() if name not in ("md", "html")))


def evaluate(
    ctx: typer.Context,
    harness: Annotated[Path | None, typer.Option(
        "--harness", help="the harness repo (this or --run is required)")] = None,
    run: Annotated[str | None, typer.Option("--run", help="evaluate a run instead: its harness, env, model, "
                                            "seed commit vs final main; stored in the run directory (this or "
                                            "--harness is required)")] = None,
    env: Annotated[str | None, typer.Option("--env", help="environment (default: run.env)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="model spec (default: run.model)")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help=TEMPERATURE_HELP)] = None,
    rollouts: Annotated[int | None, typer.Option("--rollouts", "-k", help="k per task (default: run.rollouts)")]
    = None,
    split: Annotated[str, typer.Option("--split", help="heldout | dev")] = "heldout",
    baseline: Annotated[str | None, typer.Option("--baseline", help="revision (default: the first commit on "
                                                 "main, 'seed')")] = None,
    candidate: Annotated[str | None, typer.Option("--candidate", help="revision (default: main's head)")] = None,
    tasks: Annotated[int, typer.Option("--tasks", help=f"first N tasks of the split (0 = all; at most "
                                       f"{MAX_ROLLOUTS:,})")] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", parser=output_file("evaluation.json"), metavar="<path>",
                                             help="JSON result file (a directory: DIR/evaluation.json); required with "
                                                  "--harness; default with --run: <run dir>/evaluation-<split>.json, "
                                                  "never replaced")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Seed vs evolved: k rollouts of two revisions on a split, and their difference against noise.

    Prints each revision's composition and mean, the difference, and the noise model's resolvable
    threshold z*sigma/sqrt(k).
    """
    from evoharness.reports.jobs import check_split, evaluate_run, save_result
    from evoharness.reports.measure import Measurer, compare

    check_split(split)
    _positive(rollouts)
    check_range(tasks, "--tasks", 0, MAX_ROLLOUTS, " (0 = all)")  # a typo past it meant every task, silently
    if (harness is None) == (run is None):
        raise InputError("evaluate", "give --harness DIR or --run RUN (one of them)")
    if run is not None:
        if env or model or baseline or candidate or tasks or temperature is not None:
            raise InputError("--run", "evaluates the run's own env, model, tasks, seed and final main; "
                             "use --harness to choose them")
        from evoharness.reports.runs import load_run

        record = load_run(settings_of(ctx), run)
        if out is None:
            _keep_earlier(record.evaluation_path(split), f"the {split} evaluation")
        _not_the_runs_own(record, out, tuple(record.evaluation_path(x) for x in ("dev", "heldout")))
        ev = evaluate_run(record, split, rollouts, _progress(as_json), out)
        out = out or record.evaluation_path(split)
    else:
        if out is None:
            raise InputError("--out", "name the JSON result file")
        settings = settings_of(ctx)
        measurer = Measurer.of(settings, harness, env or settings.run.env, agent_spec(settings, model, temperature),
                               _progress(as_json))
        try:
            ev = compare(measurer, baseline or "seed", candidate or "main", split, rollouts or settings.run.rollouts,
                         settings.run.seed, tasks=measurer.tasks(split, tasks), z=settings.verification.z,
                         sigma_floor=settings.verification.sigma_floor)
        finally:
            measurer.close()
        save_result(out, ev)
    if as_json:
        typer.echo(ev.model_dump_json(indent=2))
        return
    typer.echo(_evaluation_text(ev))
    typer.echo(f"\nwrote {out}")


def _evaluation_text(ev) -> str:
    from evoharness.reports.report import comp_cells, comp_head, has_unknown, num

    unknown = has_unknown([ev.baseline.composition, ev.candidate.composition])
    head = ["", *comp_head(unknown)]
    rows = [[f"{arm.rev} {arm.commit[:10]}", *comp_cells(arm.composition, arm.mean, unknown)]
            for arm in (ev.baseline, ev.candidate)]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = [f"{ev.env}, {ev.model}, {ev.split}: {len(ev.tasks)} tasks x k={ev.k} (seeds {ev.seeds[0]}.."
             f"{ev.seeds[-1]})"]
    lines += ["  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    lines.append(f"difference {num(ev.difference, signed=True)}; sigma {ev.sigma:.4f}; resolvable "
                 f"{ev.z:g}*sigma/sqrt({ev.k}) = {ev.resolvable:.3f} (table {ev.resolvable_table:g}): "
                 f"{ev.verdict}")
    return "\n".join(lines)


def ablate(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="run id under <home>/runs, a run directory, or a demo output dir")],
    rollouts: Annotated[int | None, typer.Option("--rollouts", "-k", help="k per task (default: the run's)")]
    = None,
    split: Annotated[str, typer.Option("--split", help="dev | heldout | both")] = "both",
    out: Annotated[Path | None, typer.Option("--out", "-o", parser=output_file("ablation.json"), metavar="<path>",
                                             help="JSON result (default: <run dir>/ablation.json, never "
                                                  "replaced: give --out to redo; a directory: DIR/ablation.json)")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Leave-one-out over the run's merged edits: the score drop without each one.

    Main with each merge reverted, in a throwaway worktree (main never moves), rolled out.
    """
    from evoharness.reports.ablate import HELPS
    from evoharness.reports.jobs import ablate_run
    from evoharness.reports.runs import load_run

    splits = _splits(split)
    _positive(rollouts)  # the options first, then the run
    record = load_run(settings_of(ctx), run)
    if record.note:
        typer.echo(f"note: {record.note}", err=True)
    if out is None:
        _keep_earlier(record.ablation_path, "the ablation")
    _not_the_runs_own(record, out, (record.ablation_path,))
    result = ablate_run(record, rollouts, splits, _progress(as_json), out)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    if not result.edits:
        typer.echo(f"run {record.run_id} merged no edits: nothing to ablate")
    for e in result.edits:
        if not e.applies:
            typer.echo(f"{e.branch}: {e.reason}")
            continue
        for s, ev in e.results.items():
            typer.echo(f"{e.branch} [{s}]: with {ev.candidate.mean:.3f}, without {ev.baseline.mean:.3f}, "
                       f"drop {ev.difference:+.3f} (resolvable {ev.resolvable:.3f}, k={ev.k}): {HELPS[ev.verdict]}")
    typer.echo(f"\nwrote {out or record.ablation_path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("evaluate")(evaluate)
    app.command("ablate")(ablate)

