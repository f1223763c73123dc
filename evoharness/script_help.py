"""argparse help for the benchmark and helper scripts that states every option's default.

argparse prints an option's help as written: `--repeat N  runs in turn` said nothing of how many runs one gets
without it. These formatters add ``(default: X)`` after the help of an option whose default is a value (not
None, not a flag's False) and whose help does not say its default already.
"""

from __future__ import annotations

import argparse
import copy


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

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not _has_default(action) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class DefaultsHelp(_StatesDefaults):
    """The usual argparse help (description re-wrapped), each option's default stated."""


class RawDefaultsHelp(_StatesDefaults, argparse.RawDescriptionHelpFormatter):
    """The description as written (a docstring's layout kept), each option's default stated."""
