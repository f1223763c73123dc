"""CLI: `noise` (the resolvable-difference table) and `verify` (one candidate against the anchor)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from evoharness.cli_support import TEMPERATURE_HELP, agent_spec, check_rollouts, fail, settings_of
from evoharness.errors import InputError, missing_reason
from evoharness.verification.config import VerificationConfig, check_seed_room


def _ints(raw: str) -> list[int]:
    try:
        ks = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise InputError("--rollouts", f"not a comma-separated list of integers: {raw!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise InputError("--rollouts", "give one or more positive integers, e.g. 1,2,4,8,16")
    return ks


def noise(
    sigma: Annotated[float, typer.Option("--sigma", help="per-rollout SD of the composite score")] = 0.023,
    rollouts: Annotated[str, typer.Option("--rollouts", help="k values, comma-separated")] = "1,2,4,8,16",
    z: Annotated[float, typer.Option("--z", help="multiplier in z*sigma/sqrt(k)")] = 3.0,
    effect: Annotated[float | None, typer.Option("--effect", help="also print the k needed to resolve "
                                                                   "this effect (default: none)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print the smallest difference two k-rollout cells can resolve: z*sigma/sqrt(k)."""
    from evoharness.verification.noise import noise_table, rollouts_needed

    for name, value in (("--sigma", sigma), ("--z", z), ("--effect", effect)):
        if value is not None and not (math.isfinite(value) and value > 0):  # nan and inf are not sizes either
            fail(f"{name} must be positive" + ("" if math.isfinite(value) else f" and finite, not {value}"))
    ks = _ints(rollouts)
    try:
        rows = noise_table(sigma, ks, z)
        needed = rollouts_needed(effect, sigma, z) if effect is not None else None
    except OverflowError:  # finite inputs whose figures are not (1e300 * 1e300, or an effect of 1e-300)
        fail(f"out of range: z*sigma = {z:g}*{sigma:g}" + (f", effect {effect:g}" if effect is not None else ""))
    if as_json:
        typer.echo(json.dumps({"sigma": sigma, "z": z, "rows": rows, "rollouts_needed": needed}))
        return
    typer.echo(f"sigma={sigma:g}  resolvable difference = {z:g}*sigma/sqrt(k)")
    typer.echo("| k | resolvable | table (rounded up to 0.005) |\n|---|---|---|")
    for r in rows:
        typer.echo(f"| {r['k']} | {r['resolvable']:.4f} | {r['table']:g} |")
    if needed is not None:
        typer.echo(f"rollouts needed to resolve {effect:g}: k >= {needed}")


def make_runner(settings, env: str, model: str, harness):
    """The sandboxed `RolloutRunner` for ``harness`` (a `HarnessRepo`) on ``env`` with ``model``.

    The executor the settings ask for (``[sandbox]`` executor, backend and ``batch_size``: rollouts of one
    commit share one sandboxed worker, as in a run).
    """
    from evoharness.sandbox.factory import make_executor

    return make_executor(settings.sandbox, harness.path, env, model)


def _tasks(raw: str) -> list[str | tuple[str, str]]:
    """``a,b,c`` or ``@FILE`` (one task id per line, optionally followed by its split)."""
    if raw.startswith("@"):
        from evoharness.untrusted import read_limited

        path = Path(raw[1:])
        if not path.exists():
            raise InputError(str(path), missing_reason(path))
        try:  # a regular file only: a FIFO hung the read, /dev/zero grew memory without end
            lines = read_limited(path, 64 << 20, what="task list file").decode("utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise InputError(str(path), f"not UTF-8 text (byte {e.start + 1}); a task list is one id a line") from None
        out: list[str | tuple[str, str]] = []
        for line in lines:
            parts = line.split()
            if parts and not parts[0].startswith("#"):
                out.append(parts[0] if len(parts) == 1 else (parts[0], parts[1]))
        items = out
    else:
        items = [t.strip() for t in raw.split(",") if t.strip()]
    if not items:
        raise InputError("--tasks", "no tasks given")
    return items


def check_task_ids(env_spec: str, tasks: list[str | tuple[str, str]]) -> None:
    """``InputError`` naming every task id the environment does not know."""
    from evoharness.envs import get_environment

    env = get_environment(env_spec)
    unknown = []
    for t in tasks:
        tid = t if isinstance(t, str) else t[0]
        try:
            env.get_task(tid)
        except InputError:
            unknown.append(tid)
    if unknown:
        shown = ", ".join(repr(t) for t in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise InputError("--tasks", f"unknown task id(s) in {env_spec}: {shown}")


def verify(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="candidate branch (with or without candidate/) or commit")],
    harness: Annotated[Path, typer.Option("--harness", help="the harness repo directory")],
    tasks: Annotated[str | None, typer.Option("--tasks", help="dev task ids, comma-separated, or @FILE (required "
                                              "unless --release-reservation)")] = None,
    env: Annotated[str | None, typer.Option("--env", help="environment spec (default: run.env)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="agent model spec (default: run.model)")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help=TEMPERATURE_HELP)] = None,
    rollouts: Annotated[int, typer.Option("--rollouts", help="k per task for the candidate and its baseline")] = 4,
    anchor_rollouts: Annotated[int, typer.Option("--anchor-rollouts", help="rollouts per task of main's anchor")] = 4,
    strategy: Annotated[str | None, typer.Option(
        "--strategy", help="behaviour_aware | fixed_split | random_split | coreset (default: verification.strategy)")]
    = None,
    budget: Annotated[float, typer.Option("--budget", help="budget units for this verification")] = 5000.0,
    record: Annotated[bool, typer.Option("--record", help="store the verdict as a git note")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
    release: Annotated[bool, typer.Option(
        "--release-reservation", help="remove the reservation a verification of CANDIDATE against main's head "
        "left when it was killed on another host (one running on this host is refused), then exit")] = False,
) -> None:
    """Verify CANDIDATE against a fresh anchor of main; print the gate table (exit 1 if rejected or undecided).

    UNDECIDED: the targeted gain is positive but did not cross its boundary; the verdict says how many more
    rollouts would decide it and the --rollouts to re-run with. One re-verification is allowed: every test of a
    commit against main's head is recorded in the harness repo (refs/notes/<notes_ref>-tests, with or without
    --record), and a further test after an undecided verdict and its re-verification is refused (exit 2).
    """
    from evoharness.envs import get_environment
    from evoharness.harness_repo.repo import HarnessRepo
    from evoharness.verification.budget import BudgetLedger
    from evoharness.verification.chain import build_chain
    from evoharness.verification.hunks import GitParts
    from evoharness.verification.retests import RetestLog
    from evoharness.verification.verifier import Verifier

    settings = settings_of(ctx)
    if release:
        repo = HarnessRepo(harness, settings.harness_repo)
        commit = repo.candidate(repo.resolve(candidate)).commit
        gone = RetestLog(repo).release(commit, repo.main_head())
        for t in gone:
            typer.echo(f"released the reservation of pid {t.get('pid')} on {t.get('host')} (since {t.get('at')})")
        typer.echo(f"{len(gone)} reservation(s) of {commit[:10]} against main {repo.main_head()[:10]} removed"
                   + ("; verify it again to test it" if gone else ": none was held"))
        return
    if tasks is None:
        fail("evoharness verify: missing option --tasks (see evoharness verify --help)")
    env = env or settings.run.env
    model = agent_spec(settings, model, temperature)
    check_rollouts(rollouts)
    check_rollouts(anchor_rollouts, "--anchor-rollouts", least=2)
    if not 0 <= budget < math.inf:  # (NaN too; inf ended the plan in a traceback)
        raise InputError("--budget", f"--budget must be >= 0 and finite, not {budget}")
    cfg = VerificationConfig.of(settings.verification, rollouts=rollouts, anchor_rollouts=anchor_rollouts)
    check_seed_room(cfg, rollouts, "--rollouts")
    if strategy is not None:
        cfg = cfg.model_copy(update={"strategy": strategy})
    from evoharness.verification.selection import STRATEGIES

    STRATEGIES.get(cfg.strategy)  # an unknown name: one line before any rollout (it was said after main's anchor)
    repo = HarnessRepo(harness, settings.harness_repo)
    cand = repo.candidate(repo.resolve(candidate))
    task_list = _tasks(tasks)
    check_task_ids(env, task_list)  # before any rollout spends budget
    # the chain runs build: same cache file and rollout identity, so rollouts a run cached are reused
    runner = build_chain(make_runner(settings, env, model, repo), cfg, settings.home, env_spec=env,
                         env=get_environment(env), model=model, tree_of=repo.tree_hash)
    ledger = BudgetLedger(total=budget, units_per_rollout=cfg.units_per_rollout)
    from evoharness.harness_repo.signing import VerdictSigner

    verifier = Verifier(runner, cfg, signer=VerdictSigner(repo.repo), hunks=GitParts(repo))
    main_head = repo.main_head()
    try:
        # every test of this commit against main's head is recorded; after an undecided verdict one more is
        # allowed, then none (retests.py): refused here, before a rollout is paid
        with RetestLog(repo).test(cand.commit, main_head, rollouts) as slot:
            # main's anchor on round-0 seeds: every candidate verified from the CLI shares it (cached)
            anchor = verifier.measure_anchor(main_head, task_list, cfg.anchor_rollouts, ledger=ledger)
            plan = verifier.plan(cand, anchor, cfg.strategy, ledger)
            if not as_json:
                if slot["reverification"]:
                    typer.echo(f"re-verification of {cand.commit[:10]} after an undecided verdict (test "
                               f"{slot['number']} against main {main_head[:10]}): the last one allowed")
                typer.echo(f"anchor {anchor.commit[:10]}: mean {anchor.mean:.4f}, sigma {anchor.sigma:.4f}, "
                           f"k={anchor.k}")
                typer.echo(plan.summary())
            verdict = slot["verdict"] = verifier.evaluate(cand, anchor, ledger=ledger, plan=plan).verdict
            slot["noted"] = record
            if record:
                repo.record_verdict(verdict)
    finally:
        runner.close()
    if as_json:
        typer.echo(verdict.model_dump_json(indent=2))
    else:
        m = verdict.measurements
        word = "ACCEPTED" if verdict.accepted else "UNDECIDED" if m.get("needs_rollouts") else "REJECTED"
        typer.echo(f"\n{verdict.candidate} @ {verdict.commit[:10]} vs main {verdict.base[:10]}: "
                   f"{word} ({verdict.reason})")
        typer.echo(verdict.table())
        if m.get("needs_rollouts") and slot["reverification"]:
            typer.echo("undecided again after its one re-verification: not accepted, and a further test of this "
                       "commit against this main is refused (each would be another chance for an edit that "
                       "changes nothing to pass)")
        elif m.get("needs_rollouts"):
            typer.echo(f"undecided: about {m['needs_rollouts']} more rollouts needed; re-run with "
                       f"--rollouts {m['suggested_k']} (the rollouts already paid are reused from the cache); "
                       "one re-verification is allowed: a further one is refused, as each would be another "
                       "chance for an edit that changes nothing to pass")
        typer.echo(f"reading {m['reading']:.4f}; rollouts paid {ledger.rollouts} "
                   f"({runner.hits} from cache); budget left {ledger.left:g}")
    if not verdict.accepted:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("noise")(noise)
    app.command("verify")(verify)
