"""`evoharness rollout`: run a harness on an environment's tasks, write trajectories, show the composition."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import (
    MAX_ROLLOUTS,
    MAX_SEED,
    MAX_WORKERS,
    check_range,
    check_rollouts,
    counted,
    fail,
    one_line,
    output_file,
    settings_of,
)
from evoharness.errors import InputError


def _default_commit(harness: Path) -> str | None:
    """main's head for a harness repo, HEAD for another git repo, None for a plain directory."""
    try:
        from evoharness.harness_repo.repo import HarnessRepo

        return HarnessRepo(harness).main_head()
    except Exception:  # noqa: BLE001 -- not a harness repo: fall back to HEAD / the directory
        return None


def _tasks(env_spec: str, split: str, n: int) -> list[str]:
    from evoharness.envs import get_environment

    tasks = [getattr(t, "id", t) for t in get_environment(env_spec).list_tasks(split)]
    if not tasks:
        raise InputError(env_spec, f"no tasks in split {split!r}")
    return tasks[:n] if n > 0 else tasks


def _check_model(model_spec: str) -> None:
    """Unknown model specs are bad input (InputError), not N failed rollouts."""
    from evoharness.agent.runner import make_model

    make_model(model_spec, 0)  # builds the client only; no request is made


def _write(path: Path, trajs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        from evoharness.traces.store import write_trajectories
    except ImportError:
        with path.open("w") as fh:
            fh.writelines(t.model_dump_json() + "\n" for t in trajs)
        return
    write_trajectories(path, trajs)


SHOWN_FAILURES = 3  # rollouts whose failure reason `rollout` prints; the rest are counted (all are in the file)


def _failure_lines(failed) -> list[str]:
    """Why rollouts failed in the sandbox: the first few, one line each (task, rollout, reason), so a user
    told "1 rollout failed" learns why (a wall-time limit, a crash, a missing interpreter) without opening
    the trajectories (a harness's stderr in a reason is escaped: ``one_line``); each one's full record is its
    ``meta.rollout_failure``."""
    lines = [f"  {one_line(t.task_id)} (rollout {t.rollout}): {one_line(_reason(t.meta['rollout_failure'])[:300])}"
             for t in failed[:SHOWN_FAILURES]]
    if len(failed) > SHOWN_FAILURES:
        lines.append(f"  ... and {counted(len(failed) - SHOWN_FAILURES, 'more failed rollout')} "
                     "(each one's reason is its meta.rollout_failure)")
    return lines


def _reason(failure: object) -> str:
    """A failure record's reason: the sandbox writes ``{"reason": ...}``, but a harness's own trajectory may carry any
    ``meta.rollout_failure`` (a string, a list): that is its reason as written, not a crash of `rollout`."""
    return str(failure.get("reason", "?") if isinstance(failure, dict) else failure)


def _composition(ctx: typer.Context, trajs) -> str:
    from evoharness.diagnosis.labeller import label_all
    from evoharness.diagnosis.report import diagnosis_text

    cfg = settings_of(ctx).diagnosis
    return diagnosis_text(label_all(trajs, cfg), cfg)


def rollout(
    ctx: typer.Context,
    harness: Annotated[Path, typer.Option("--harness", help="harness repo (or plain directory)")],
    env: Annotated[str, typer.Option("--env", help="environment spec, e.g. agentdojo:workspace")],
    out: Annotated[Path, typer.Option("--out", "-o", parser=output_file("trajectories.jsonl"), metavar="<path>",
                                      help="trajectories JSONL to write (a directory: DIR/trajectories.jsonl)")],
    model: Annotated[str, typer.Option(
        "--model", help="standin:weak | standin:strong | scripted:weak | scripted:oracle | openai:URL[#model]",
    )] = "standin:weak",
    temperature: Annotated[float | None, typer.Option("--temperature", help="sampling temperature of an "
                                                      "openai:URL#model agent model, 0 to 2 (default 0)")] = None,
    split: Annotated[str, typer.Option("--split", help="task split: dev | heldout")] = "dev",
    tasks: Annotated[int, typer.Option("--tasks", help=f"first N tasks of the split (0 = all; at most "
                                       f"{MAX_ROLLOUTS:,})")] = 10,
    rollouts: Annotated[int, typer.Option("--rollouts", "-k", help="rollouts per task")] = 1,
    seed: Annotated[int, typer.Option("--seed", help=f"seed of rollout 0; rollout k uses seed+k (0 to "
                                      f"{MAX_SEED:,}, the last seed included)")] = 0,
    commit: Annotated[str | None, typer.Option("--commit", help="harness commit (default: main)")] = None,
    sandbox: Annotated[str | None, typer.Option(
        "--sandbox", help="bwrap | docker | none | inprocess (default: sandbox.backend)")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-w", help="rollouts at once (default: sandbox.workers)")] = None,
    batch: Annotated[int | None, typer.Option(
        "--batch", help="rollouts of one commit that share one sandboxed worker (default: sandbox.batch_size; "
        "1: a fresh sandbox per rollout)")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="local | ray (default: sandbox.executor)")] = None,
) -> None:
    """Run K rollouts of the harness on N tasks; write trajectories and print their composition."""
    from rich.console import Console
    from rich.progress import Progress

    from evoharness.agent.models import resolve_model_spec
    from evoharness.model_specs import with_temperature
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.factory import make_executor, make_sandbox

    cfg = settings_of(ctx).sandbox
    check_rollouts(rollouts)
    check_range(tasks, "--tasks", 0, MAX_ROLLOUTS, " (0 = all)")
    check_range(seed, "--seed", 0, MAX_SEED - rollouts + 1,
                f" with {rollouts} rollouts (rollout k uses seed+k, up to {MAX_SEED:,})" if rollouts > 1 else "")
    n_workers = workers if workers is not None else cfg.workers
    check_range(n_workers, "--workers", 1, MAX_WORKERS)
    n_batch = batch if batch is not None else cfg.batch_size
    if n_batch < 1:
        fail("--batch must be >= 1")
    if executor not in (None, "local", "ray"):
        fail(f"--executor must be local or ray, not {executor!r}")
    box = make_sandbox(sandbox or cfg.backend, cfg)
    task_ids = _tasks(env, split, tasks)
    if len(task_ids) * rollouts > MAX_ROLLOUTS:
        fail(f"{len(task_ids):,} tasks x {rollouts:,} rollouts is more than one command makes "
             f"({MAX_ROLLOUTS:,}); give fewer --tasks or --rollouts")
    model = with_temperature(resolve_model_spec(model), temperature)  # openai:URL: the server's one model
    _check_model(model)
    ref = commit or _default_commit(harness)
    requests = [RolloutRequest(task_id=t, harness_commit=ref or "HEAD", seed=seed + k, rollout=k, split=split)
                for t in task_ids for k in range(rollouts)]
    console = Console(stderr=True)  # the bar on a terminal's stderr only: off one, rich left a blank stdout line
    with Progress(transient=True, console=console, disable=not console.is_terminal) as progress:
        where = f"{box.name if box else 'inprocess'}, {executor or cfg.executor}"
        bar = progress.add_task(f"rollouts ({where})", total=len(requests))
        with make_executor(cfg, harness, env, model, executor=executor, backend=sandbox,
                           workers=n_workers, batch_size=n_batch, on_result=lambda _i, _t: progress.advance(bar)) as ex:
            trajs = ex.run(requests)
    _write(out, trajs)
    failed = [t for t in trajs if t.meta.get("rollout_failure")]
    typer.echo(f"wrote {counted(len(trajs), 'trajectory', 'trajectories')} to {out} "
               f"({counted(len(task_ids), 'task')} x {counted(rollouts, 'rollout')}; "
               f"{counted(len(failed), 'rollout')} failed in the sandbox)")
    for line in _failure_lines(failed):
        typer.echo(line)
    typer.echo(_composition(ctx, trajs))


def register(app: typer.Typer) -> None:
    app.command("rollout")(rollout)
