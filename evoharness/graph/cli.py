"""`evoharness run | approve | reject | demo`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import settings_of


def _report(outcome) -> None:
    from evoharness.graph.summary import summary_text

    if outcome.interrupted:
        typer.echo(f"\nRun {outcome.run_id} is waiting for review:")
        for item in outcome.interrupted:
            for c in item.get("candidates", []):
                typer.echo(f"  {c['branch']}  {c['commit'][:10]}  {c['reason']}")
                typer.echo(f"    evoharness approve {c['branch']} --run {outcome.run_id}   "
                           f"(or: evoharness reject {c['branch']} --run {outcome.run_id} --reason ..)")
        return
    if outcome.done:
        data = json.loads((outcome.run_dir / "summary.json").read_text())
        typer.echo("\n" + summary_text(data))


def run(
    ctx: typer.Context,
    resume: Annotated[str | None, typer.Option("--resume", help="continue the run with this id")] = None,
    review: Annotated[bool, typer.Option("--review", help="interrupt before each merge for approve/reject")] = False,
    run_id: Annotated[str | None, typer.Option("--run-id", help="id for a new run (default: generated)")] = None,
    evidence: Annotated[list[Path] | None, typer.Option(
        "--evidence", help="trace file or directory (any `evoharness import` format) whose process failures the "
        "analyst uses as evidence, e.g. production traces; repeatable; added to run.evidence")] = None,
) -> None:
    """Run self-improvement rounds until the budget, the round limit or a ceiling (see the run settings)."""
    from evoharness.errors import InputError
    from evoharness.graph.runner import resume_run, start_run

    settings = settings_of(ctx)
    if resume:
        if evidence:
            raise InputError("--evidence", "a run's evidence is fixed when it starts; a resumed run reads its "
                             "snapshot (start a new run to add evidence)")
        outcome = resume_run(settings, resume)
    else:
        update: dict = {"review": True} if review else {}
        if evidence:
            update["evidence"] = [*settings.run.evidence, *evidence]
        if update:
            settings = settings.model_copy(update={"run": settings.run.model_copy(update=update)})
        outcome = start_run(settings, run_id)
    _report(outcome)


def _decide(ctx: typer.Context, candidate: str, run_id: str, decision: str, reason: str | None) -> None:
    from evoharness.graph.runner import decide

    _report(decide(settings_of(ctx), run_id, candidate, decision, reason))


def approve(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="candidate branch awaiting review")],
    run_id: Annotated[str, typer.Option("--run", help="the run waiting for review")],
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Approve a verified candidate: the run merges it and continues."""
    _decide(ctx, candidate, run_id, "approve", reason)


def reject(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="candidate branch awaiting review")],
    run_id: Annotated[str, typer.Option("--run", help="the run waiting for review")],
    reason: Annotated[str | None, typer.Option("--reason")] = None,
) -> None:
    """Reject a verified candidate: its branch stays with the verdict and your reason; the run continues."""
    _decide(ctx, candidate, run_id, "reject", reason)


def demo(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="where the demo's harness, run and summary go")] = Path("demo-out"),
    env: Annotated[str, typer.Option(help="synthetic | agentdojo:workspace (~5 s a rollout)")] = "synthetic",
    rounds: Annotated[int, typer.Option(help="round limit")] = 3,
    sandbox: Annotated[str, typer.Option(help="bwrap | none")] = "bwrap",
) -> None:
    """The embedded default: a fresh harness, the scripted weak model, playbook roles, bwrap, SQLite."""
    from evoharness.graph.demo import run_demo

    outcome = run_demo(settings_of(ctx), out, env=env, rounds=rounds, sandbox=sandbox)
    _report(outcome)
    typer.echo(f"\nsummary: {out / 'summary.json'}")
    typer.echo(f"report:  evoharness report {out} --out {out / 'report'}   (plots; --compute adds the ablation)")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("approve")(approve)
    app.command("reject")(reject)
    app.command("demo")(demo)
