"""Helpers for the per-area CLI modules (kept apart from cli.py to avoid import cycles)."""

from __future__ import annotations

from pathlib import Path

import typer


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


def settings_of(ctx: typer.Context):
    """The loaded ``Settings`` for a command (reads the config on first use)."""
    root_ctx = ctx.find_root()
    if not isinstance(root_ctx.obj, AppState):
        root_ctx.obj = AppState(None, [])
    return root_ctx.obj.settings


def fail(message: str, code: int = 2) -> None:
    """Print one error line to stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
