"""Apply a unified diff to one file's text, strictly (context must match exactly)."""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The diff is malformed or does not apply to the file."""


def diff_creates_file(diff: str) -> bool:
    """True when the diff's ``---`` header is ``/dev/null`` (a new file)."""
    for line in diff.splitlines():
        if line.startswith("--- "):
            return line[4:].strip().split("\t")[0] == "/dev/null"
        if line.startswith("@@"):
            break
    return False


def apply_unified_diff(original: str, diff: str) -> str:
    """Return ``original`` with the hunks of ``diff`` applied.

    Hunks are applied in order; each must match its context exactly, at the stated line or
    (if the file has shifted) at the first exact match after the previous hunk.
    """
    old_lines = original.splitlines(keepends=True)
    hunks = _parse(diff)
    if not hunks:
        raise PatchError("no hunks in diff")
    out: list[str] = []
    pos = 0
    for start, old_block, new_block in hunks:
        at = _locate(old_lines, old_block, max(start - 1, 0), pos)
        if at is None:
            raise PatchError(f"hunk at line {start} does not apply (context differs)")
        out.extend(old_lines[pos:at])
        out.extend(new_block)
        pos = at + len(old_block)
    out.extend(old_lines[pos:])
    return "".join(out)


def _locate(lines: list[str], block: list[str], hint: int, floor: int) -> int | None:
    def fits(i: int) -> bool:
        return lines[i : i + len(block)] == block

    if not block:
        return max(min(hint, len(lines)), floor)
    if hint >= floor and fits(hint):
        return hint
    for i in range(floor, len(lines) - len(block) + 1):
        if fits(i):
            return i
    return None


def _parse(diff: str) -> list[tuple[int, list[str], list[str]]]:
    hunks: list[tuple[int, list[str], list[str]]] = []
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            i += 1
            continue
        start = int(m.group(1))
        old_n = int(m.group(2)) if m.group(2) is not None else 1
        new_n = int(m.group(4)) if m.group(4) is not None else 1
        old_block: list[str] = []
        new_block: list[str] = []
        i += 1
        while i < len(lines) and (len(old_block) < old_n or len(new_block) < new_n):
            line = lines[i]
            tag, body = line[:1], line[1:]
            if not line.endswith("\n"):
                body += "\n"
            if tag == " " or line in ("\n", "\r\n"):
                body = body if tag == " " else "\n"
                old_block.append(body)
                new_block.append(body)
            elif tag == "-":
                old_block.append(body)
            elif tag == "+":
                new_block.append(body)
            elif tag == "\\":
                pass
            else:
                raise PatchError(f"unexpected line in hunk: {line.rstrip()!r}")
            i += 1
            if i < len(lines) and lines[i].startswith("\\"):
                _strip_newline(old_block if tag == "-" else new_block if tag == "+" else None, tag,
                               old_block, new_block)
                i += 1
        if len(old_block) != old_n or len(new_block) != new_n:
            raise PatchError(f"hunk at line {start}: line counts do not match its header")
        hunks.append((start, old_block, new_block))
    return hunks


def _strip_newline(target: list[str] | None, tag: str, old_block: list[str], new_block: list[str]) -> None:
    """Handle ``\\ No newline at end of file`` after a line."""
    blocks = [target] if target is not None else [old_block, new_block]
    for b in blocks:
        if b and b[-1].endswith("\n"):
            b[-1] = b[-1][:-1]
