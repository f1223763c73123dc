"""`evoharness run | approve | reject | demo`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import command_name, output_dir, settings_of


def _report(outcome, ctx: typer.Context | None = None) -> None:
    from evoharness.graph.summary import summary_text

    if outcome.interrupted:
        cmd = command_name() + _given_settings(ctx)  # the same home and settings, or the run is not found
        typer.echo(f"\nRun {outcome.run_id} is waiting for review:")
        for item in outcome.interrupted:
            for c in item.get("candidates", []):
                typer.echo(f"  {c['branch']}  {c['commit'][:10]}  {c['reason']}")
                if c.get("static_review"):  # process-level tricks: it merges only if you approve it
                    typer.echo(f"    {c['static_review']}: merged only if approved")
                typer.echo(f"    {cmd} approve {c['branch']} --run {outcome.run_id}   "
                           f"(or: {cmd} reject {c['branch']} --run {outcome.run_id} --reason ..)")
        return
    if outcome.done:
        data = json.loads((outcome.run_dir / "summary.json").read_text())
        typer.echo("\n" + summary_text(data, outcome.run_dir, outcome.harness))


def _given_settings(ctx: typer.Context | None) -> str:
    """`` --config FILE --set K=V ...`` as given to this command (shell-quoted), for a printed next command: a run
    started with ``--set home=DIR`` was told to `approve ... --run ID`, which looked under the default home."""
    import shlex

    state = ctx.find_root().obj if ctx is not None else None
    args = [*(["--config", str(state.config_path)] if getattr(state, "config_path", None) else []),
            *(x for o in getattr(state, "overrides", []) for x in ("--set", o))]
    return "".join(" " + shlex.quote(a) for a in args)


def run(
    ctx: typer.Context,
    resume: Annotated[str | None, typer.Option(
        "--resume", help="continue the run with this id (default: start a new run)")] = None,
    review: Annotated[bool, typer.Option("--review", help="interrupt before each merge for approve/reject")] = False,
    run_id: Annotated[str | None, typer.Option("--run-id", help="id for a new run (default: generated)")] = None,
    evidence: Annotated[list[Path] | None, typer.Option(
        "--evidence", help="trace file or directory (any `evoharness import` format) whose process failures the "
        "analyst uses as evidence, e.g. production traces; repeatable; added to run.evidence (default: run.evidence "
        "alone)")] = None,
) -> None:
    """Run self-improvement rounds until the budget, the round limit or a ceiling (see the run settings)."""
    from evoharness.errors import InputError
    from evoharness.graph.runner import resume_run, start_run

    settings = settings_of(ctx)
    if resume:
        if evidence:
            raise InputError("--evidence", "a run's evidence is fixed when it starts; a resumed run reads its "
                             "snapshot (start a new run to add evidence)")
        outcome = resume_run(settings, resume, command=command_name() + _given_settings(ctx))
    else:
        update: dict = {"review": True} if review else {}
        if evidence:
            update["evidence"] = [*settings.run.evidence, *evidence]
        if update:
            settings = settings.model_copy(update={"run": settings.run.model_copy(update=update)})
        outcome = start_run(settings, run_id, command=command_name() + _given_settings(ctx))
    _report(outcome, ctx)


def _decide(ctx: typer.Context, candidate: str, run_id: str, decision: str, reason: str | None) -> None:
    from evoharness.errors import InputError
    from evoharness.untrusted import control_character

    if reason is not None and (ch := control_character(reason)) is not None:
        raise InputError("--reason", f"a control character ({ch}) in it: a reason is one line of text")
    from evoharness.graph.runner import decide

    _report(decide(settings_of(ctx), run_id, candidate, decision, reason,
                   command=command_name() + _given_settings(ctx)), ctx)


REASON_HELP = "why, recorded with the decision: one line of text (default: none)"


def approve(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="candidate branch awaiting review")],
    run_id: Annotated[str, typer.Option("--run", help="the run waiting for review")],
    reason: Annotated[str | None, typer.Option("--reason", help=REASON_HELP)] = None,
) -> None:
    """Approve a verified candidate: the run merges it and continues."""
    _decide(ctx, candidate, run_id, "approve", reason)


def reject(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="candidate branch awaiting review")],
    run_id: Annotated[str, typer.Option("--run", help="the run waiting for review")],
    reason: Annotated[str | None, typer.Option("--reason", help=REASON_HELP)] = None,
) -> None:
    """Reject a verified candidate: its branch stays with the verdict and your reason; the run continues."""
    _decide(ctx, candidate, run_id, "reject", reason)


DEMO_ROOT = Path("demo-out")


def _latest_demo(root: Path) -> Path | None:
    found = [d for d in [root, *(root.iterdir() if root.is_dir() else [])] if (d / "harness" / ".git").is_dir()]
    return max(found, key=lambda d: d.stat().st_mtime) if found else None


def _demo_dir(out: Path | None, resume: bool) -> tuple[Path, str]:
    """Where this demo writes, and the line that says so: a fresh directory unless ``--resume``."""
    from evoharness.errors import InputError

    if resume:
        target = out or _latest_demo(DEMO_ROOT)
        if target is None or not (target / "harness" / ".git").is_dir():
            raise InputError(str(target or DEMO_ROOT), "no demo to resume here (start one with `evoharness demo`)")
        return target, (f"demo: continuing {target}: this run starts from the harness the earlier run evolved "
                        "(its summary.json is replaced by this run's)")
    if out is not None:
        if (out / "harness").exists():
            raise InputError(str(out), "already holds a demo: add --resume to continue it, or give another --out")
        if (out / ".git").exists():  # `init harness`, then `demo --out harness`: a second harness nested in the first
            raise InputError(str(out), "is a git repository (a harness repo?); the demo makes its own harness in "
                             f"{out / 'harness'} and leaves its run beside it: give an empty or new --out (to evolve "
                             f"this harness: `evoharness run --set run.harness={out}`)")
        for mine in ("summary.json", "state"):  # the demo would copy its summary over that file, run its home there
            if (out / mine).exists():
                raise InputError(str(out), f"holds {mine}, which a demo writes, and no demo: give an empty or new "
                                 "--out (or --resume for a demo's directory)")
        return out, f"demo: a fresh demo in {out}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = DEMO_ROOT / stamp, 2
    while target.exists():
        target, n = DEMO_ROOT / f"{stamp}-{n}", n + 1
    return target, f"demo: a fresh demo in {target} (each run gets its own directory; --resume continues the latest)"


def demo(
    ctx: typer.Context,
    out: Annotated[Path | None, typer.Option(
        "--out", parser=output_dir, metavar="<path>",
        help="where the demo's harness, run and summary go (default: a new demo-out/<time>)")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue the demo in --out (default: the latest under demo-out) from its evolved "
        "harness")] = False,
    env: Annotated[str, typer.Option(help="synthetic | agentdojo:workspace (~5 s a rollout); any other `rollout --env` "
                                          "spec runs too, under the seed harness's 12 steps")] = "synthetic",
    rounds: Annotated[int, typer.Option(help="round limit, 1 to 100 (the demo's budget of 6000 rollouts and "
                                            "its patience usually end it sooner)")] = 3,
    sandbox: Annotated[str, typer.Option(help="bwrap | docker (the locally built sandbox image) | none | inprocess "
                                              "(no sandbox: in this process, for tests)")] = "bwrap",
) -> None:
    """The embedded default: a fresh harness, the standin:weak model, playbook roles, bwrap, SQLite."""
    from evoharness.cli_support import MAX_DEMO_ROUNDS, activate_hint, check_range, command_name, shell_words
    from evoharness.graph import demo as demo_module
    from evoharness.sandbox.factory import check_backend

    check_range(rounds, "--rounds", 1, MAX_DEMO_ROUNDS)
    check_backend(sandbox)  # the option's name, not the sandbox.backend setting it fills
    out, note = _demo_dir(out, resume)
    from evoharness.envs import get_environment

    # bad values before any output (a bad --env once left a fresh harness behind, which --resume then took up)
    demo_module.demo_settings(settings_of(ctx), out.resolve(), env, rounds, sandbox)
    get_environment(env).list_tasks("dev")  # the environment is cached: the run reuses it
    typer.echo(note, err=True)
    outcome = demo_module.run_demo(settings_of(ctx), out, env=env, rounds=rounds, sandbox=sandbox)
    _report(outcome)
    cmd = command_name()
    typer.echo(f"\nsummary: {out / 'summary.json'}")
    typer.echo("next:")
    typer.echo(f"  {cmd} {shell_words('report', out, '--out', out / 'report')}      # the report with its plots")
    typer.echo(f"  {cmd} {shell_words('review', '--harness', out / 'harness')}      # candidates, verdicts, diffstats")
    typer.echo(f"  {cmd} {shell_words('demo', '--resume', '--out', out)}      # more rounds from the evolved harness")
    hint = activate_hint(cmd)
    if hint:
        typer.echo(f"  ({hint})")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("approve")(approve)
    app.command("reject")(reject)
    app.command("demo")(demo)
