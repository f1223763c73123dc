"""JSON lines or one JSON document: told by what a file holds, not by its name.

Every reader of trace files asks ``json_lines`` (the importers behind `diagnose`, `label`, `import`, `export-otel`,
`run --evidence`; standard input; an HTTP body; the dataset commands' "convert it first" hint), so one file is read
the same way by every command. Until the twenty-eighth session a named file was JSON lines only when its name ended
in ``.jsonl``: `export-otel --out spans.otel` then `diagnose spans.otel`, or LangSmith runs dumped one a line as
runs.json, were refused by `diagnose`, `label` and `import` ("invalid JSON (Extra data)") while `dataset export`
read the same lines.

The rule, from the first non-blank line (a UTF-8 byte-order mark skipped; UTF-16 / UTF-32 read by theirs):

- it does not open an object (``[``: a JSON list, read element by element): one document;
- it is a whole JSON object and more follows: JSON lines (one parse does not consume the file);
- it is an object's line that does not parse, does not end as a line of a laid-out document does (``[ { , :``),
  and the next non-blank line opens an object: JSON lines (the first line is broken, e.g. cut short after ``]``;
  the line reader names it, as the dataset commands do);
- anything else with more after it (``{`` alone: a document laid out over lines): one document;
- it is the file's only line, one whole object: both readings hold (one object is one document and one JSON line);
  the name breaks the tie (``*.jsonl`` / ``*.ndjson``: a line), as trajectory ids made of a file name (``stem:0``
  for a record on a line) stay what they were; an only line that does not parse is a document (its error has a column).

Only the first line and the start of the next are read; a one-line file is parsed here only when named as lines.
"""

from __future__ import annotations

import codecs
import io
import json
from collections.abc import Iterator
from pathlib import Path

from jiter import from_json

from evoharness.traces.store import WIDE_BOMS

# names that say JSON lines: they break the one tie the content leaves (a file of one line)
LINES_SUFFIXES = (".jsonl", ".ndjson")


def json_lines(path: Path) -> bool:
    """Whether ``path`` holds JSON lines rather than one JSON document (the module's rule)."""
    with path.open("rb") as fh:
        if _opening(fh) != "{":  # a list (streamed element by element), or no object: one document, read no further
            return False
    with path.open("rb") as fh:
        first, rest = _first_two(fh)
    if not first.startswith(b"{"):
        return False
    if rest is None:  # one line: the name breaks the tie, where the line is one object (else a document's error)
        return path.suffix.lower() in LINES_SUFFIXES and _object(first) is True
    whole = _object(first)
    return whole if whole is not None else rest.startswith(b"{") and not first.endswith((b"[", b"{", b",", b":"))


def _object(line: bytes) -> bool | None:
    """Whether ``line`` is one JSON object (None: it does not parse)."""
    try:
        return isinstance(from_json(line), dict)
    except ValueError:  # a broken line, or what jiter refuses (a lone surrogate escape): the stdlib's reading
        try:
            return isinstance(json.loads(line), dict)
        except (ValueError, RecursionError):
            return None


def _opening(fh: io.BufferedReader) -> str:
    """The file's first non-blank character ('' for none), reading no further than it: a JSON list written on one
    line (``json.dump``'s default) was read whole by ``_first_two`` as its first line before the importers streamed
    it element by element."""
    head = fh.peek(4)[:4]
    if head.startswith(WIDE_BOMS):
        text = io.TextIOWrapper(fh, encoding=json.detect_encoding(head), errors="replace", newline="")
        try:
            while (c := text.read(1)) and (c.isspace() or c == "\ufeff"):
                pass
            return c
        finally:
            text.detach()
    if head.startswith(codecs.BOM_UTF8):
        fh.read(len(codecs.BOM_UTF8))
    while (b := fh.read(1)) and b.isspace():
        pass
    return b.decode("latin-1")


def _first_two(fh: io.BufferedReader) -> tuple[bytes, bytes | None]:
    """The first non-blank line, stripped, and the start of the next non-blank one (None: none follows)."""
    lines = _lines(fh)
    first = b""
    for line in lines:
        if not line.isspace():
            first = line.strip()
            break
    for line in lines:
        if not line.isspace():
            return first, line.lstrip()[:1]
    return first, None


def _lines(fh: io.BufferedReader) -> Iterator[bytes]:
    """The file's lines as UTF-8 bytes, a UTF-8 byte-order mark dropped."""
    head = fh.peek(4)[:4]
    if head.startswith(WIDE_BOMS):  # PowerShell 5's `>`: its lines told apart as their UTF-8 twins would be
        text = io.TextIOWrapper(fh, encoding=json.detect_encoding(head), errors="replace", newline="")
        try:
            for line in text:
                yield line.encode("utf-8", "replace")
        finally:
            text.detach()
        return
    first = True
    for line in fh:
        yield line.removeprefix(codecs.BOM_UTF8) if first else line
        first = False
