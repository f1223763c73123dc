"""The `evoharness` command line.

Each area of the package contributes its commands through ``evoharness.<area>.cli``,
a module with ``register(app: typer.Typer) -> None``. Errors reach the user as one
line on stderr and exit code 2; never a traceback for bad input.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from evoharness import __version__
from evoharness.errors import EvoharnessError

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


class AppState:
    """What the root callback hands to every command (``ctx.obj``)."""

    def __init__(self, config: Path | None, overrides: list[str]) -> None:
        self.config_path = config
        self.overrides = overrides
        self._settings = None

    @property
    def settings(self):
        if self._settings is None:
            from evoharness.config import load_settings
            from evoharness.logging import configure_logging

            self._settings = load_settings(self.config_path, self.overrides)
            configure_logging(self._settings.log_level, self._settings.log_format)
        return self._settings


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evoharness {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="evoharness.toml to read")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a setting: key.sub=value")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True)] = False,
) -> None:
    ctx.obj = AppState(config, list(set_ or []))


def settings_of(ctx: typer.Context):
    """The loaded Settings for a command (loads config on first use)."""
    root_ctx = ctx.find_root()
    if not isinstance(root_ctx.obj, AppState):
        root_ctx.obj = AppState(None, [])
    return root_ctx.obj.settings


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


def fail(message: str, code: int = 2) -> None:
    """Print one error line and exit."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def main(argv: list[str] | None = None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except EvoharnessError as e:
        typer.echo(f"error: {e}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        typer.echo("aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return 2
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130


def entrypoint() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entrypoint()
