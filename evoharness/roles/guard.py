"""Checks every role output passes before it leaves the roles: paths and injected instructions.

``find_injection`` is ``harness_repo/injection.py``'s (the same check ``HarnessRepo.create_candidate``
runs on every path that makes a candidate). The harness repo validates each edit again; this is the
roles' own line of defence against trace text (tool results, user turns) that tries to steer the
engineer ("edit the scorer", "skip verification", "ignore previous instructions").
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from evoharness.errors import EditRejected
from evoharness.harness_repo.injection import find_injection
from evoharness.harness_repo.models import Edit
from evoharness.harness_repo.validate import normalise_path
from evoharness.roles.models import HarnessView


def added_text(edit: Edit, harness: HarnessView, with_message: bool = True) -> str:
    """The text an edit adds: new lines of full-content changes, '+' lines of diffs (and its message)."""
    parts = [edit.message, edit.rationale] if with_message else []
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


def accommodation_in(edit: Edit, harness: HarnessView, task_ids: list[str]) -> str | None:
    """Why ``edit`` merely accommodates the current model, or None: it names a task it should flip
    (a task-specific hint), or its only change is more steps."""
    added = added_text(edit, harness, with_message=False)
    for t in task_ids:
        if len(t) >= 4 and re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", added):
            return f"names task {t!r}: a task-specific hint accommodates the model, fixes no harness defect"
    if [c.path for c in edit.changes] == ["policies.yaml"] and edit.changes[0].content is not None:
        old, new = _mapping(harness.text("policies.yaml")), _mapping(edit.changes[0].content)
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
        if changed == {"max_steps"}:
            return (f"only raises max_steps ({old.get('max_steps')} -> {new.get('max_steps')}): that "
                    "accommodates the model, it fixes no harness defect")
    return None


def _mapping(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}
