"""Candidate commit messages (trailers), branch names, and the `Candidate` read back from git."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from evoharness.harness_repo.gitops import format_trailers, parse_trailers
from evoharness.harness_repo.models import Candidate, Edit

BRANCH_PREFIX = "candidate/"


def slugify(text: str, limit: int = 40) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "edit"
    slug = re.sub(r"[^a-z0-9]+", "-", first.lower()).strip("-")
    return (slug[:limit].rstrip("-")) or "edit"


def branch_name(round: int, message: str) -> str:
    return f"{BRANCH_PREFIX}r{round}-{slugify(message)}"


def failure_class_of(edit: Edit) -> str | None:
    if edit.failure_class:
        return edit.failure_class
    head = edit.targets.split(".", 1)[0]
    return head if re.fullmatch(r"F\d+", head) else None


def commit_message(edit: Edit, round: int, base: str) -> str:
    parts = [edit.message.strip()]
    if edit.rationale.strip():
        parts.append(edit.rationale.strip())
    parts.append(format_trailers([
        ("Targets", edit.targets),
        ("Failure-Class", failure_class_of(edit) or ""),
        ("Evidence", _join(edit.evidence)),
        ("Predicted-Flips", _join(edit.predicted_flips)),
        ("Critic", edit.critic or ""),
        ("Round", str(round)),
        ("Base", base),
    ]))
    return "\n\n".join(parts) + "\n"


def _escaped(ch: str) -> str:
    return quote(ch, safe="") if ch in "%," or ch.isspace() or not ch.isprintable() else ch


def _join(ids: list[str]) -> str:
    """Ids as one trailer value, ', ' between them; in each id a ',', '%', whitespace or unprintable character is
    percent-escaped (UTF-8), so ``_split`` reads it back whole (a trailer is split on ',' and its whitespace
    collapsed: `run:a,b` came back as two ids), and the id "(none)" is not the empty list's word."""
    return ", ".join("".join(map(_escaped, x)) if x != "(none)" else "%28none)" for x in ids)


def _split(value: str) -> list[str]:
    return [unquote(x.strip()) for x in value.split(",") if x.strip()]


def candidate_from_message(branch: str, commit: str, message: str) -> Candidate | None:
    """The `Candidate` a commit message describes, or None if it carries no ``Targets:`` trailer."""
    t = parse_trailers(message)
    if "Targets" not in t:
        return None
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    rationale = "\n\n".join(paragraphs[1:-1]) if len(paragraphs) > 2 else ""
    try:
        round_ = int(t.get("Round", "0") or 0)
    except ValueError:
        round_ = 0
    return Candidate(
        branch=branch, commit=commit, base=t.get("Base", ""), round=round_, targets=t["Targets"],
        failure_class=t.get("Failure-Class") or None, rationale=rationale,
        message=paragraphs[0].splitlines()[0] if paragraphs else "",
        evidence=_split(t.get("Evidence", "")), predicted_flips=_split(t.get("Predicted-Flips", "")),
        critic=t.get("Critic") or None,
    )
