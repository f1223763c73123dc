"""The `evoharness` command line.

Each area of the package contributes its commands through ``evoharness.<area>.cli``,
a module with ``register(app: typer.Typer) -> None``. Errors reach the user as one
line on stderr and exit code 2; never a traceback for bad input.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
import importlib
import inspect
import os
import resource
import sys
from pathlib import Path
from typing import Annotated

import pydantic
import pydantic_core
import typer

from evoharness import __version__, cli_usage
from evoharness.cli_support import AppState, fail, one_line, settings_of  # noqa: F401 (re-exported)
from evoharness.errors import SYMLINK_LOOP, EvoharnessError, InputError
from evoharness.threads import guard_thread_starts

# Areas whose cli modules register commands, in help order.
AREAS = [
    "traces", "diagnosis", "harness_repo", "sandbox", "verification",
    "graph", "datasets", "service", "reports",
]

app = typer.Typer(
    name="evoharness",
    help="Evolve an LLM agent's harness from its own failure traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evoharness {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="evoharness.toml to read")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a setting: key.sub=value")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    ctx.obj = AppState(config, list(set_ or []))


# Records evoharness reads or writes whose JSON Schema `evoharness schema NAME` prints.
SCHEMAS = {
    "trajectory": ("evoharness.traces.models", "Trajectory"),  # import, POST /trajectories, rollouts
    "edit": ("evoharness.harness_repo.models", "Edit"),  # EDIT.json for `candidate new`
    "label": ("evoharness.diagnosis.models", "LabelLine"),  # `label --out` lines
}


@app.command("schema")
def schema(name: Annotated[str, typer.Argument(help=f"one of: {', '.join(SCHEMAS)}")]) -> None:
    """Print a record's JSON Schema: trajectory (the canonical format), edit (EDIT.json), label."""
    import json

    from evoharness.cli_usage import suggestion
    from evoharness.errors import InputError

    if name not in SCHEMAS:  # the helper the unknown commands and options use
        raise InputError("schema", f"unknown record {name!r}; {suggestion(name, list(SCHEMAS), 'records')}")
    module, attr = SCHEMAS[name]
    model = getattr(importlib.import_module(module), attr)
    typer.echo(json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema",
                           **model.model_json_schema()}, indent=2))


def _register_areas() -> None:
    for area in AREAS:
        name = f"evoharness.{area}.cli"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        module.register(app)


_register_areas()


# The root's options that take a value (``root`` above): the words ``_invoked`` passes over to find the command.
ROOT_VALUE_OPTIONS = ("--config", "-c", "--set")


def _invoked(argv: list[str]) -> str | None:
    """The top-level command or group ``argv`` runs: its first word, after nothing but the root's ``--config`` /
    ``--set`` and their values; None where anything else comes first (``--help``, ``--version``, ``--``, an unknown
    option) or no word does."""
    words = iter(argv)
    for word in words:
        if word in ROOT_VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith(("--config=", "--set=")):
            return None if word.startswith("-") else word
    return None


def _only(name: str | None) -> typer.Typer:
    """``app`` with only the top-level command or group ``name`` registered (``app`` itself where none is so named):
    typer builds every command's options from its annotations, ~60 ms of CPU for the whole tree in a fresh process,
    which one command's run does not need. The command named is built whole (the same parsing, help and errors)."""
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def command(argv: list[str] | None = None) -> typer.core.TyperGroup:
    """The click command tree of ``app``, every leaf also taking the root's ``--config``/``--set``; with ``argv``
    (a command line to run), the tree of the one top-level command or group it names (``_only``), where it names
    one."""
    name = None if argv is None else _invoked(argv)
    known = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    return _tree(name if name in known else None)


@functools.cache
def _tree(name: str | None) -> typer.core.TyperGroup:
    """``command``'s tree for the top-level command or group ``name`` (None: the whole tree), built once per process:
    typer builds it afresh from the commands' signatures on every call (~40 ms of CPU at load ~13 for the whole tree,
    94% of a `main(argv)` that stops at a usage error), which a program calling ``main`` many times (the test suite:
    ~700 call sites) paid each time. A tree holds no state of an invocation: each ``main`` call parses into a fresh
    click context, and the root options' values go to that context's ``AppState``."""
    root = typer.main.get_command(app if name is None else _only(name))
    cli_usage.add_root_options(root)
    _unwrap_help(root)
    _flags_take_no_value(root)
    return root


def _flags_take_no_value(cmd) -> None:
    """A flag's help row shows no value type: typer showed `--json <bool>`, which reads as `--json true` (and
    `diagnose F --json true` took `true` for a second path)."""
    for param in cmd.params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    made = cmd.get_help_option  # --help is made when the help is rendered, not kept in cmd.params

    def get_help_option(ctx):
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option

    cmd.get_help_option = get_help_option
    for sub in (getattr(cmd, "commands", None) or {}).values():
        _flags_take_no_value(sub)


def _unwrap_help(cmd) -> None:
    """Each paragraph of a command's docstring as one line, which the help then wraps to the terminal: rich help
    keeps a paragraph's own line breaks, so `serve --help` read 'refuses to start' / 'unless --insecure-no-auth
    is given' on two short lines, and the command list broke `label`'s summary after 'a one-line'."""
    if cmd.help:
        cmd.help = "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(cmd.help).split("\n\n"))
    for sub in (getattr(cmd, "commands", None) or {}).values():
        _unwrap_help(sub)


def main(argv: list[str] | None = None) -> int:
    guard_thread_starts()  # a thread that dies of MemoryError as it starts: an error, not a wait forever
    try:
        _no_nul(sys.argv[1:] if argv is None else argv)
        rv = command(sys.argv[1:] if argv is None else argv).main(args=argv, prog_name="evoharness",
                                                                  standalone_mode=False)
        if rv == 130:  # typer's answer to Ctrl-C (its Exit(130), returned as is): no command exits 130 itself
            typer.echo("interrupted", err=True)
        return rv if isinstance(rv, int) else 0
    except EvoharnessError as e:
        typer.echo(f"error: {one_line(as_typed(e, sys.argv[1:] if argv is None else argv))}", err=True)
        return 2
    except pydantic.ValidationError as e:  # a value given on the command line that a model refuses
        typer.echo(f"error: {one_line(cli_usage.validation_line(e))}", err=True)
        return 2
    except pydantic_core.PydanticSerializationError as e:
        if "KeyboardInterrupt" not in str(e):  # Ctrl-C while a record was written, which pydantic wraps
            raise
        typer.echo("interrupted", err=True)
        return 130
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 130
    except typer.TyperException as e:
        if cli_usage.is_help_request(e):
            if e.message:  # rich help is printed as the error is built and leaves its message empty
                typer.echo(e.message)
            return 0
        typer.echo(f"error: {one_line(cli_usage.usage_line(e))}", err=True)
        return 2
    except BrokenPipeError:  # `evoharness ... | head`: the reader left; nothing to report
        return 141
    except OSError as e:  # a path the user gave that cannot be read or written
        where = f"{typed(str(e.filename), sys.argv[1:] if argv is None else argv)}: " if e.filename else ""
        if not where and (stream := standard_stream(e)):
            where = f"{stream}: "
        reason = SYMLINK_LOOP if e.errno == errno.ELOOP else (e.strerror or str(e)).lower()
        typer.echo(f"error: {one_line(where + reason)}", err=True)
        return 2
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except MemoryError:
        return _out_of_memory()
    except RuntimeError as e:  # Path.resolve on a symlink loop, wherever a command resolves a path
        if str(e) == "can't start new thread":  # no memory for the new thread's stack (or no process left)
            return _out_of_memory("a new thread could not start")
        # Python 3.11 raises RuntimeError('Symlink loop from ...') while it handles the OSError ELOOP; 3.13 raises
        # that OSError itself (above). Read the errno the error was raised from, never the wording of its text.
        loop = e.__cause__ or e.__context__
        if not (isinstance(loop, OSError) and loop.errno == errno.ELOOP):
            raise
        where = f"{typed(str(loop.filename), sys.argv[1:] if argv is None else argv)}: " if loop.filename else ""
        typer.echo(f"error: {one_line(where + SYMLINK_LOOP)}", err=True)
        return 2


def _out_of_memory(what: str = "out of memory") -> int:
    """One `error:` line for a command that ran out of memory (the frames that held the memory are gone by now;
    where even the line cannot be built, a fixed one is written straight to fd 2)."""
    try:
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        held = "" if limit == resource.RLIM_INFINITY else (
            f": this process may map {limit >> 20:,} MiB (its address-space limit, `ulimit -v`); raise the limit "
            "or give the command less to hold")
        typer.echo(f"error: {what}{held}", err=True)
    except Exception:  # noqa: BLE001 -- still out of memory: the line without its detail
        with contextlib.suppress(OSError):
            os.write(2, b"error: out of memory\n")
    return 2


def standard_stream(e: OSError) -> str | None:
    """"standard output" when ``e`` was raised by a write to it, else None: a write on an open stream carries no file
    name, and `diagnose t.jsonl > /dev/full` (or a full disk under `> out.txt`) said only `error: no space left on
    device`, which read as the command's own output. The write is the innermost frame of the traceback, and the
    stream one of its locals (typer's ``echo``'s ``file``; ``shutil.copyfileobj``'s ``fdst``; rich's console, which
    writes the help, its ``self.file``; a command that writes ``sys.stdout`` itself holds it in a local)."""
    tb = e.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    streams = {id(s) for s in (sys.stdout, sys.__stdout__) if s is not None}
    local = tb.tb_frame.f_locals
    held = [*local.values(), getattr(local.get("self"), "file", None)]  # rich's Console (help) writes self.file
    return "standard output" if any(id(value) in streams for value in held) else None


def _no_nul(argv: list[str]) -> None:
    """InputError for an argument holding a NUL or half a UTF-16 surrogate pair: no shell passes either (argv is C
    strings, and bytes that are not UTF-8 arrive as ``\\udc80``-``\\udcff``, which encode back to those bytes), but a
    program calling ``main(argv)`` can, and every path it reached was a traceback (ValueError: embedded null byte;
    UnicodeEncodeError). The line names the option the argument follows, where it follows one
    (``argument 8 (after --reason)``)."""
    for i, arg in enumerate(argv, 1):
        before = argv[i - 2] if i > 1 else ""
        after = f" (after {before})" if before.startswith("-") and "=" not in before else ""
        if "\x00" in arg:
            raise InputError(f"argument {i}{after}", f"{arg!r} holds a NUL character, which no argument can hold")
        try:
            os.fsencode(arg)
        except UnicodeEncodeError:
            raise InputError(f"argument {i}{after}", f"{arg!r} holds half a UTF-16 surrogate pair, which no "
                             "argument can hold") from None


def typed(name: str, argv: list[str]) -> str:
    """``name`` as the command line wrote it: a path read through ``Path`` loses what ``Path`` normalises away
    (``./missing.json`` is ``missing.json``, ``dir/`` is ``dir``), and an error naming it must name what the user
    typed. ``name`` itself when no argument (nor ``--opt=VALUE``'s value) is that path in another spelling."""
    for arg in argv:
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if value and value != name and str(Path(value)) == name:
            return value
    return name


def as_typed(e: EvoharnessError, argv: list[str]) -> str:
    """The error's line, its input named as typed (``typed``)."""
    if isinstance(e, InputError) and (shown := typed(e.source, argv)) != e.source:
        return str(InputError(shown, e.reason, e.where))
    return str(e)


def entrypoint() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
