"""The exception hierarchy. Each exception carries its payload.

Per-trajectory failures are *data* (a scored failed trajectory); these exceptions
are for bad input and infrastructure problems.
"""

from __future__ import annotations

import errno
import os


class EvoharnessError(Exception):
    """Base class: every error evoharness raises on purpose."""


class InputError(EvoharnessError):
    """Bad user input: a malformed trace file, an unknown format, a bad config value.

    ``source`` names the file (or other input) and ``where`` the record / line inside it.
    """

    def __init__(self, source: str, reason: str, where: str | None = None) -> None:
        self.source = source
        self.where = where
        self.reason = reason
        loc = f"{source}:{where}" if where else source
        # a reason that starts with the source already names it ("--model is for --labeller llm")
        named = not where and reason.startswith(f"{source} ")
        super().__init__(reason if named else f"{loc}: {reason}")


class HeldOutRequested(InputError):
    """A request that asks for held-out tasks, which are never exported: the request's fault (a service answers
    422), not the state of what it holds."""


class EditRejected(EvoharnessError):
    """A harness edit failed validation; nothing was written."""

    def __init__(self, reason: str, path: str | None = None) -> None:
        self.reason = reason
        self.path = path
        # a path with a line break or another control character is shown quoted: the error stays one line
        shown = path if path is None or path.isprintable() else repr(path)
        super().__init__(f"{shown}: {reason}" if path else reason)


class MergeRefused(EvoharnessError):
    """A verified merge was refused (main moved, branch moved, no or failed verdict)."""

    def __init__(self, reason: str, candidate: str | None = None) -> None:
        self.reason = reason
        self.candidate = candidate
        super().__init__(f"{candidate}: {reason}" if candidate else reason)


class InfraError(EvoharnessError):
    """Infrastructure failure (sandbox crashed, endpoint down). Never the agent's fault.

    ``retryable`` tells callers whether backing off and retrying can help.
    """

    def __init__(self, reason: str, retryable: bool = True) -> None:
        self.reason = reason
        self.retryable = retryable
        super().__init__(reason)


class BudgetExhausted(EvoharnessError):
    """A spend would exceed the budget ledger."""

    def __init__(self, needed: float, left: float) -> None:
        self.needed = needed
        self.left = left
        super().__init__(f"budget exhausted: need {needed:g} units, {left:g} left")


def yaml_problem(error: Exception) -> str:
    """One line for a PyYAML error: what is wrong and where (``line L, column C``, 1-based)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    text = f"{context}: {problem}" if context else str(problem)
    return f"{text} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else text


SYMLINK_LOOP = "a symlink loop (too many levels of symbolic links)"
NOT_A_REGULAR_FILE = "not a regular file (a FIFO, socket or device is refused)"


def missing_reason(path: str | os.PathLike[str], missing: str = "no such file or directory") -> str:
    """Why ``path``, which names no file, directory or device that can be opened, cannot be read: a symbolic link
    that leads nowhere is said to be one (`ls` shows its name, so "no such file" read as wrong), a loop as
    ``SYMLINK_LOOP`` wherever a command finds it; any other name is ``missing``."""
    if not os.path.islink(path):
        return missing
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return SYMLINK_LOOP
        return f"a symbolic link that cannot be followed: {(e.strerror or str(e)).lower()}"
    return missing


def not_a_file_reason(path: str | os.PathLike[str], what: str, missing: str = "no such file or directory") -> str:
    """Why ``path``, which is no regular file, cannot be read as ``what`` (a labels file, a trajectory file): a
    directory, something that is there but is no regular file (``NOT_A_REGULAR_FILE``: a FIFO would hang the reader,
    /dev/zero never ends), or a name that leads to nothing (``missing_reason``, ``missing`` for a plain one)."""
    if os.path.isdir(path):
        return f"is a directory, not a {what}"
    if os.path.exists(path):
        return NOT_A_REGULAR_FILE
    return missing_reason(path, missing)
