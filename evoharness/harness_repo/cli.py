"""CLI: `init`, `candidate new`, `review`, `show`, `pr`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from evoharness.cli_support import settings_of
from evoharness.errors import InputError, missing_reason

HarnessOpt = Annotated[Path, typer.Option("--harness", help="the harness repo directory")]

candidate_app = typer.Typer(help="Create harness candidates.", no_args_is_help=True)


def _open(ctx: typer.Context, harness: Path):
    from evoharness.harness_repo.repo import HarnessRepo

    return HarnessRepo(harness, settings_of(ctx).harness_repo)


MAX_EDIT_BYTES = 64 << 20  # an edit's files are prompts, lessons, policies and middleware


def load_edit(path: Path):
    """Read EDIT.json into an `Edit` (InputError with the first problem otherwise)."""
    from evoharness.harness_repo.models import Edit
    from evoharness.untrusted import read_limited

    if not path.exists():
        raise InputError(str(path), missing_reason(path))
    try:  # a regular file only: a FIFO hung the read, /dev/zero grew memory without end
        text = read_limited(path, MAX_EDIT_BYTES, what="JSON edit file (EDIT.json)").decode("utf-8-sig")  # BOM skipped
        if not text.strip():
            raise InputError(str(path), "empty file (EDIT.json is a JSON object)")
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"invalid JSON: {e}") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "not UTF-8 text (EDIT.json is JSON)") from None
    except RecursionError:
        raise InputError(str(path), "JSON nested too deeply") from None
    except ValueError as e:  # an integer of over 4,300 digits
        raise InputError(str(path), f"unreadable JSON: {str(e).split(':')[0]}") from None
    try:
        edit = Edit.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "EDIT.json"
        if first["type"] == "extra_forbidden":
            raise InputError(str(path), f"{loc}: {_unknown_key(first['loc'])}") from None
        if first["type"] == "bool_type":  # "delete": "yes" was read as true
            raise InputError(str(path), f"{loc}: {first['msg']} (true or false, got {first['input']!r})") from None
        raise InputError(str(path), f"{loc}: {first['msg']}") from None
    _check_target(path, edit.targets)
    _check_class(path, edit.failure_class)
    return edit


def _unknown_key(loc: tuple) -> str:
    """What is wrong with the key at ``loc`` that the edit (or one of its changes) does not have."""
    import difflib

    from evoharness.harness_repo.models import Edit, FileChange

    in_change = len(loc) > 1 and loc[0] == "changes"
    keys = list((FileChange if in_change else Edit).model_fields)
    near = difflib.get_close_matches(str(loc[-1]), keys, n=1, cutoff=0.75)
    hint = f"; did you mean {near[0]}?" if near else ""
    return f"unknown key{hint} ({'a change' if in_change else 'an edit'} has: {', '.join(keys)})"


# the classes an edit may target: the failures (neither healthy nor unknown)
EDIT_CLASSES = ("F1", "F2", "F3", "F4", "E")


def _check_class(path: Path, failure_class: str | None) -> None:
    """``failure_class``, when given, names a failure class (``F9`` was committed as ``Failure-Class: F9``)."""
    if failure_class is not None and failure_class not in EDIT_CLASSES:
        raise InputError(str(path), f"failure_class: unknown class {failure_class!r} (classes: "
                                    f"{', '.join(EDIT_CLASSES)})")


def _check_target(path: Path, target: str) -> None:
    """``targets`` names a signal of the diagnosis catalogue (a typo would verify nothing)."""
    import difflib

    from evoharness.diagnosis.catalogue import catalogue_ids

    known = catalogue_ids()
    if target in known:
        return
    near = difflib.get_close_matches(target, known, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else f"valid: {', '.join(known)}"
    raise InputError(str(path), f"targets: unknown signal {target!r}; {hint}")


def init(ctx: typer.Context, dir: Annotated[Path, typer.Argument(help="directory to create")]) -> None:
    """Create a seed harness repo (prompts, lessons, policies, middleware, tools, harness.toml)."""
    from evoharness.cli_support import INSIDE_GIT, inside_git
    from evoharness.harness_repo.init import init_harness

    if inside_git(dir):
        raise InputError(str(dir), INSIDE_GIT)
    hr = init_harness(dir, config=settings_of(ctx).harness_repo)
    typer.echo(f"initialised harness at {hr.path} (main {hr.main_head()[:10]})")


@candidate_app.command("new")
def candidate_new(
    ctx: typer.Context,
    harness: HarnessOpt,
    edit: Annotated[Path, typer.Option("--edit", help="EDIT.json: message, targets, changes[]")],
    round: Annotated[int, typer.Option("--round", help="round number used in the branch name (0 to 10,000)")] = 0,
    env: Annotated[str | None, typer.Option("--env", help="environment spec: refuse an edit that copies its "
                                            "task text, expected answers or scorer code (default: none, no such "
                                            "check)")] = None,
) -> None:
    """Validate an edit and commit it on a new candidate branch; prints the branch."""
    from evoharness.cli_support import MAX_ROUNDS, check_range

    check_range(round, "--round", 0, MAX_ROUNDS)
    the_edit = load_edit(edit)
    if env is not None:
        from evoharness.envs import get_environment
        from evoharness.harness_repo.leaks import LeakGuard

        LeakGuard(get_environment(env)).check(the_edit)
    cand = _open(ctx, harness).create_candidate(the_edit, round)
    typer.echo(cand.branch)


def review(
    ctx: typer.Context,
    harness: HarnessOpt,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list")] = False,
) -> None:
    """List candidates: branch, target, status, verdict summary, diffstat."""
    infos = _open(ctx, harness).candidates()
    if as_json:
        typer.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
        return
    if not infos:
        typer.echo("no candidates")
        return
    for i in infos:
        stat = i.diffstat
        flag = " (re-verify: main moved)" if i.needs_reverify else ""
        typer.echo(f"{i.branch}  {i.commit[:10]}  {i.targets}  {i.status}{flag}  "
                   f"{len(stat.get('files', []))} file(s) +{stat.get('insertions', 0)} -{stat.get('deletions', 0)}")
        if i.verdict:
            typer.echo(f"    {i.verdict}")


def show(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="branch (with or without candidate/) or commit")],
    harness: HarnessOpt,
) -> None:
    """Show one candidate: its evidence, verdict and diff."""
    from evoharness.harness_repo.review import show_text

    hr = _open(ctx, harness)
    typer.echo(show_text(hr, hr.resolve(candidate)), nl=False)


def pr(
    ctx: typer.Context,
    candidate: Annotated[str, typer.Argument(help="branch (with or without candidate/) or commit")],
    harness: HarnessOpt,
    remote: Annotated[str, typer.Option("--remote", help="git remote name (or URL) to push to")],
    body_out: Annotated[Path | None, typer.Option("--body-out", help="write the PR body here (default: "
                                                                              "printed after the push line)")] = None,
    allow_unverified: Annotated[bool, typer.Option(
        "--allow-unverified", help="push a candidate that is not verified against main's head (rejected, "
        "unverified, stale or merged) as do-not-merge/BRANCH, with DO NOT MERGE atop its PR body")] = False,
) -> None:
    """Push a verified candidate branch and write a markdown PR body with its evidence and verdict."""
    from evoharness.harness_repo.review import DO_NOT_MERGE, candidate_info, pr_body, push_candidate, unmergeable

    if body_out is not None:
        from evoharness.cli_support import INSIDE_GIT, inside_git

        if inside_git(body_out):
            raise InputError(f"--body-out {body_out}", INSIDE_GIT)
    hr = _open(ctx, harness)
    branch = hr.resolve(candidate)
    refused = unmergeable(candidate_info(hr, branch))
    if refused and not allow_unverified:
        raise InputError(branch, f"{refused}; `pr` pushes only a candidate verified against main's head "
                         "(--allow-unverified pushes it as do-not-merge/" + branch + ")")
    target = DO_NOT_MERGE + branch if refused else branch
    body = pr_body(hr, hr.candidate(branch), refused)
    pushed = f"pushed {branch} to {remote}" + (f" as {target}: DO NOT MERGE, {refused}" if refused else "")
    if body_out is None:
        push_candidate(hr, branch, remote, target)
        typer.echo(f"{pushed}\n")
        typer.echo(body, nl=False)
        return
    from evoharness.traces.store import replacing

    # the body is staged beside --body-out before the push (a path that cannot be written fails here, with
    # nothing pushed) and takes its place only once the push went through (a failed push keeps an earlier body)
    with replacing(body_out, "w") as fh:
        fh.write(body)
        push_candidate(hr, branch, remote, target)
    typer.echo(f"{pushed}; PR body in {body_out}")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.add_typer(candidate_app, name="candidate")
    app.command("review")(review)
    app.command("show")(show)
    app.command("pr")(pr)
