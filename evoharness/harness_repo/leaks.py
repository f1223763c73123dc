"""The edit-content leak guard: a candidate may not copy task text, expected answers or grader internals.

A harness that carries the tasks' own words, their expected answers or the scorer's code is fitted
to the benchmark, not improved (and held-out tasks stop being held out). ``LeakGuard.check(edit)``
refuses an edit whose added text shares a run of ``n`` words (8 by default) with any task prompt of the
environment (dev and held-out), contains an expected answer verbatim (a task's reference values of
at least ``min_answer`` characters holding a digit or '@', or of three times that: e-mail addresses,
ids, amounts, message bodies; not a tool's name nor words the task itself gives), or shares ``n`` code tokens
with the environment's scorer source.

The graph runs it before every candidate it creates; ``evoharness candidate new --env SPEC`` runs it
for hand-written edits.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from evoharness.errors import EditRejected
from evoharness.harness_repo.models import Edit

_WORD = re.compile(r"[a-z0-9_@.']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _grams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


class LeakGuard:
    """Built once per environment; ``check`` raises ``EditRejected`` naming what leaked."""

    def __init__(self, env: Any, n: int = 8, min_answer: int = 8) -> None:
        self.n = n
        tasks = env.list_tasks("all")
        self.task_grams: dict[tuple[str, ...], str] = {}
        for t in tasks:
            for g in _grams(_words(t.prompt), n):
                self.task_grams.setdefault(g, t.id)
        self.answers: dict[str, str] = {}
        for t in tasks:
            refs = _strings(t.meta)
            try:
                refs += _strings([c.args for c in env.ground_truth_calls(t)])  # argument values, not tool names
            except Exception:  # noqa: BLE001 -- an environment without reference calls: the meta alone
                pass
            tools = {tl["function"]["name"].lower() for tl in env.tools(t)}
            for s in refs:
                s = s.strip()
                specific = any(c.isdigit() or c == "@" for c in s) or len(s) >= 3 * min_answer  # not "communicate"
                if len(s) >= min_answer and specific and s.lower() not in t.prompt.lower() and s.lower() not in tools:
                    self.answers.setdefault(s.lower(), t.id)
        try:
            source = inspect.getsource(type(env))
        except (OSError, TypeError):
            source = ""
        self.scorer_grams = _grams(_words(source), n)

    def check(self, edit: Edit, added: str | None = None) -> None:
        """``added``: the text the edit adds (default: every new content and '+' line, message, rationale)."""
        text = added if added is not None else _added(edit)
        words = _words(text)
        for g in _grams(words, self.n):
            if g in self.task_grams:
                raise EditRejected(f"edit copies the text of task {self.task_grams[g]!r}: {' '.join(g)!r}")
            if g in self.scorer_grams:
                raise EditRejected(f"edit copies the environment's scorer code: {' '.join(g)!r}")
        low = text.lower()
        for answer, task in self.answers.items():
            if answer in low:
                raise EditRejected(f"edit contains an expected answer of task {task!r}: {answer[:60]!r}")


def _added(edit: Edit) -> str:
    parts = [edit.message, edit.rationale]
    for ch in edit.changes:
        if ch.content is not None:
            parts.append(ch.content)
        elif ch.diff is not None:
            parts.extend(line[1:] for line in ch.diff.splitlines() if line.startswith("+") and
                         not line.startswith("+++"))
    return "\n".join(parts)
