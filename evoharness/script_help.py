"""argparse help for the benchmark and helper scripts that states every option's default.

argparse prints an option's help as written: `--repeat N  runs in turn` said nothing of how many runs one gets
without it. These formatters add ``(default: X)`` after the help of an option whose default is a value (not
None, not a flag's False) and whose help does not say its default already. A default path (a script computes it
from its own place) is shown as the user can type it where they are: relative to the working directory when it
lies under it (``benchmarks/data/x.json`` run from the repository's root; ``../shared/data`` too, beside the root),
else as its absolute path (run from elsewhere a path relative to the root named nothing there). The script still
gets the absolute path.
"""

from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout's root (pyproject.toml) when run from one


def shown(default: object) -> object:
    """``default`` as --help shows it: an absolute path relative to the working directory when it lies under it
    (or beside the repository's root, run from the root), else normalised; anything else as it is."""
    if not isinstance(default, str | Path) or not os.path.isabs(default):
        return default
    path, here = os.path.normpath(default), os.getcwd()
    rel = os.path.relpath(path, here)
    beside_root = os.path.normpath(here) == str(ROOT) and not rel.startswith(os.path.join(os.pardir, os.pardir))
    return rel if not rel.startswith(os.pardir) or beside_root else path


def _has_default(action: argparse.Action) -> bool:
    # by identity: 0 == False, and a default of 0 is one to state
    return bool(action.option_strings) and action.nargs != 0 and not any(
        action.default is x for x in (None, False, argparse.SUPPRESS))


class _StatesDefaults(argparse.HelpFormatter):
    def _format_action(self, action: argparse.Action) -> str:
        if _has_default(action) and not (action.help or "").strip():  # argparse prints no line for an empty help
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _expand_help(self, action: argparse.Action) -> str:
        if (text := shown(action.default)) is not action.default:
            action = copy.copy(action)
            action.default = text
        return super()._expand_help(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not _has_default(action) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class DefaultsHelp(_StatesDefaults):
    """The usual argparse help (description re-wrapped), each option's default stated."""


class RawDefaultsHelp(_StatesDefaults, argparse.RawDescriptionHelpFormatter):
    """The description as written (a docstring's layout kept), each option's default stated."""
