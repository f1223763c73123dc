"""Checks every role output passes before it leaves the roles: paths and injected instructions.

The harness repo validates each edit again; this is the roles' own line of defence against trace
text (tool results, user turns) that tries to steer the engineer ("edit the scorer", "skip
verification", "ignore previous instructions").
"""

from __future__ import annotations

import re

from evoharness.errors import EditRejected
from evoharness.harness_repo.models import Edit
from evoharness.harness_repo.validate import normalise_path
from evoharness.roles.models import HarnessView

_INJECTION = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(edit|modify|change|patch|rewrite|replace|delete|remove|disable|touch)\b[^.\n]{0,40}"
        r"\b(scorer|scoring|grader|verifier|verification|test suite|tests/|harness\.toml|\.git)\b",
        r"\bskip(ping|s)?\b[^.\n]{0,30}\b(verification|verify|verifier|tests?|gates?|checks?|review)\b",
        r"\bignore\b[^.\n]{0,20}\b(previous|prior|above|earlier|all)\b[^.\n]{0,20}\binstructions?\b",
        r"\b(bypass|circumvent|turn off)\b[^.\n]{0,30}\b(gate|verification|sandbox|guard|review|checks?)\b",
        r"\b(always|just)\s+(return|report|output)\b[^.\n]{0,30}\b(score|pass(ed)?|success)\b",
    )
]


def find_injection(text: str) -> str | None:
    """The first phrase in ``text`` that reads like an instruction to subvert evaluation, or None."""
    for rx in _INJECTION:
        m = rx.search(text or "")
        if m:
            return m.group(0)
    return None


def added_text(edit: Edit, harness: HarnessView) -> str:
    """The text an edit adds: new lines of full-content changes, '+' lines of diffs, and its message."""
    parts = [edit.message, edit.rationale]
    for ch in edit.changes:
        if ch.content is not None:
            old = set(harness.text(ch.path).splitlines())
            parts.extend(line for line in ch.content.splitlines() if line not in old)
        elif ch.diff is not None:
            parts.extend(line[1:] for line in ch.diff.splitlines() if line.startswith("+") and not
                         line.startswith("+++"))
    return "\n".join(parts)


def check_edit(edit: Edit, harness: HarnessView) -> None:
    """Raise `EditRejected` if the edit touches a protected or non-editable path or adds an injected
    instruction; return None when it is acceptable."""
    for ch in edit.changes:
        path = normalise_path(ch.path.strip())
        if harness.is_protected(path):
            raise EditRejected("protected path: candidates may never edit it", path)
        if not harness.editable(path):
            raise EditRejected("not in an editable surface of harness.toml", path)
    phrase = find_injection(added_text(edit, harness))
    if phrase:
        raise EditRejected(f"edit carries an instruction that subverts evaluation: {phrase!r}")
