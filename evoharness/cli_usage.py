"""Usage errors as one line, and the root options accepted after any command.

typer (pinned in pyproject.toml) carries its own copy of click; its exceptions are reached through
``typer.TyperException`` and the attributes click documents (``ctx``, ``param``, ``option_name``,
``possibilities``). Everything here works on the built command tree, so a command added later gets
the same errors and the same ``--config``/``--set`` handling without any work of its own.
"""

from __future__ import annotations

import copy
import difflib
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_NO_SUCH_COMMAND = re.compile(r"No such command '(?P<name>[^']*)'")


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the tree, groups first, as (path below the root, command)."""
    yield path, command
    for name in sorted(getattr(command, "commands", {}) or {}):
        yield from walk(command.commands[name], (*path, name))


def is_group(command: Any) -> bool:
    return hasattr(command, "commands")


def add_root_options(root: Any) -> None:
    """Let every leaf command take the root's ``--config``/``--set`` too (``evoharness run --config X``).

    A leaf that already defines one of those flags keeps its own. Values given after the command
    land in the same ``AppState`` the root callback built (a later ``--config`` wins; ``--set``
    values add up, root ones first). A ``--config`` or ``--set`` given is read before the command
    runs, so a bad one is an error even for a command that reads no settings (``noise``, ``schema``).
    """
    shared = [p for p in root.params if p.name in ("config", "set_")]
    for _, command in walk(root):
        if is_group(command):
            continue
        command.invoke = _settings_checked(command.invoke)
        for param in command.params:
            if takes_path(param):
                param.process_value = _no_empty(param, param.process_value, "an empty path")
            elif takes_text(param) and param.name not in FREE_TEXT:
                param.process_value = _no_empty(param, param.process_value, "an empty value")
        taken = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        for param in shared:
            if taken & set(param.opts):
                continue
            clone = copy.copy(param)
            clone.expose_value = False
            clone.callback = _store_root_option
            clone.rich_help_panel = "Global options"
            command.params.append(clone)


def takes_path(param: Any) -> bool:
    """Whether ``param`` is a path (``Path``, ``Path | None``, ``list[Path]``)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is Path or Path in typing.get_args(annotation)


# Text parameters where an empty value is meaningful: the free-text reason of approve/reject.
FREE_TEXT = frozenset({"reason"})


def takes_text(param: Any) -> bool:
    """Whether ``param`` is text (``str``, ``str | None``, ``list[str]``)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is str or str in typing.get_args(annotation)


def _no_empty(param: Any, process_value: Any, what: str) -> Any:
    """``process_value`` that refuses an empty (or blank) value, as a variable that is unset gives it.

    A path: ``Path("")`` is the current directory, so ``diagnose "$TRACES"`` read every file under it and
    ``init ""`` wrote there. Text: an empty value read as "not given", so ``run --resume "$RUN"`` started a
    fresh run, ``dataset status --url "$URL"`` read the default queue and ``show ""`` showed main."""
    def process(ctx: Any, value: Any) -> Any:
        if any(isinstance(v, str) and not v.strip() for v in (value if isinstance(value, list | tuple) else [value])):
            import typer

            raise typer.BadParameter(what, ctx=ctx, param=param)
        return process_value(ctx, value)

    return process


def _settings_checked(invoke: Any) -> Any:
    """``invoke(ctx)``, after loading the settings when ``--config`` or ``--set`` was given (the loaded settings are
    kept for the command; loading them also sets up its logging), or after checking the settings the environment
    gives (``EVOHARNESS_*``) when it gives one: a bad one is one error line even for a command that reads no
    settings, while ``./evoharness.toml`` is read only by the commands that use settings."""
    def run(ctx: Any) -> Any:
        from evoharness.config import check_environment_settings, settings_in_environment

        state = ctx.find_root().obj
        if state is not None and (state.config_path is not None or state.overrides):
            _ = state.settings
        elif state is not None and settings_in_environment():
            check_environment_settings()
        return invoke(ctx)

    return run


def _store_root_option(ctx: Any, param: Any, value: Any) -> Any:
    state = ctx.find_root().obj
    if state is None or value in (None, [], ()):
        return value
    if param.name == "config":
        state.config_path = value
    else:
        state.overrides.extend(value)
    return value


def closest(word: str, choices: list[str]) -> str | None:
    """The choice ``word`` most likely meant: the one choice it begins (3 characters or more past any dashes:
    'traj' -> trajectory, which difflib's ratio of 0.57 misses), else difflib's closest at 0.7, else None."""
    starts = [c for c in choices if c.startswith(word)] if len(word.lstrip("-")) >= 3 else []
    if len(starts) == 1:
        return starts[0]
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.7)
    return found[0] if found else None


def suggestion(word: str, choices: list[str], kind: str) -> str:
    """'did you mean X?' or, with nothing close, the list of valid choices."""
    near = closest(word, choices)
    if near:
        return f"did you mean {near}?"
    return f"valid {kind}: {', '.join(choices)}" if choices else f"this command takes no {kind}"


def _options_of(command: Any) -> list[str]:
    opts: list[str] = []
    for p in command.params:
        if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False):
            opts += [o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    return sorted(set(opts + ["--help"]))


def _param_label(param: Any) -> str:
    if getattr(param, "param_type_name", "") == "argument":
        return f"argument {(param.metavar or param.name).upper()}"
    longs = [o for o in param.opts if o.startswith("--")]
    return f"option {(longs or param.opts)[0]}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def is_help_request(error: Exception) -> bool:
    """A bare group (``evoharness``, ``evoharness dataset``): its help, exit 0."""
    return type(error).__name__ == "NoArgsIsHelpError"


def usage_line(error: Exception) -> str:
    """The one line (without the ``error:`` prefix) for a usage error raised while parsing."""
    ctx = getattr(error, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    message = getattr(error, "message", str(error))
    option = getattr(error, "option_name", None)
    if option is not None and ctx is not None and type(error).__name__ == "NoSuchOption":
        return f"{where}no such option {option}; {suggestion(option, _options_of(ctx.command), 'options')}"
    unknown = _NO_SUCH_COMMAND.search(message)
    if unknown and ctx is not None and is_group(ctx.command):
        name = unknown["name"]
        commands = sorted(c for c, cmd in ctx.command.commands.items() if not getattr(cmd, "hidden", False))
        return f"{where}no such command {name!r}; {suggestion(name, commands, 'commands')}"
    param = getattr(error, "param", None)
    if type(error).__name__ == "MissingParameter" and param is not None:
        return f"{where}missing {_param_label(param)} (see {ctx.command_path} --help)" if ctx else \
            f"missing {_param_label(param)}"
    if param is not None:
        return f"{where}invalid value for {_param_label(param)}: {_one_line(message)}"
    formatted = error.format_message() if hasattr(error, "format_message") else message
    return f"{where}{_one_line(formatted)}"



def validation_line(error: Any) -> str:
    """A pydantic ``ValidationError`` as one line: where, what, the value given, and how many more."""
    errors = error.errors()
    first = errors[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or error.title
    given = first.get("input")
    shown = f" (got {given!r})" if isinstance(given, str | int | float | bool) else ""
    more = f"; {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{error.title}: {loc}: {first.get('msg', 'invalid')}{shown}{more}"
