"""The records of a top-level JSON list, read from disk one at a time.

A file of 100,000 trajectories as one JSON list would otherwise be parsed whole (gigabytes of
Python objects) before the first one is labelled. ``ArrayRecords(path)`` parses one element at a
time with the C scanner behind ``json.loads`` (``JSONDecoder.raw_decode``) from a buffer refilled
in chunks, so memory holds the buffer and the current record only.

Errors are the ones ``json.loads`` of the whole file would give, as an ``InputError`` naming the
file and ``line L col C``; they surface when the stream reaches them (the records before them
have been yielded).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError

CHUNK = 1 << 20
_WS = " \t\n\r"


def starts_with_list(path: Path) -> bool:
    """Whether the first non-blank byte of ``path`` opens a JSON list."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    return head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"[")


class ArrayRecords:
    """Iterate the elements of the JSON list in ``path`` (re-iterable: each iteration re-reads)."""

    def __init__(self, path: Path, chunk: int = CHUNK) -> None:
        self.path = path
        self.chunk = chunk

    def __iter__(self) -> Iterator[Any]:
        return _Reader(self.path, self.chunk).records()


class _Reader:
    def __init__(self, path: Path, chunk: int) -> None:
        self.path = path
        self.chunk = chunk
        self.fh = None
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.base = 0  # offset in the file's text of ``buf[0]`` (the text before it is dropped)

    def records(self) -> Iterator[Any]:
        scan = json.JSONDecoder().raw_decode
        try:
            self.fh = self.path.open("rb")
        except OSError as e:
            raise InputError(str(self.path), f"cannot open: {e.strerror}") from None
        with self.fh:
            if self._next_char() != "[":
                raise self._error("expected a JSON list")
            self.pos += 1
            if self._next_char() == "]":
                self.pos += 1
                self._expect_end()
                return
            want = self.chunk
            while True:
                self._next_char()
                if not self.eof and len(self.buf) - self.pos < self.chunk >> 1:
                    self._fill(self.chunk)  # read ahead: see ``_fill``
                try:
                    value, end = scan(self.buf, self.pos)
                except json.JSONDecodeError as e:
                    if self.eof:
                        raise self._error(e.msg, e.pos) from None
                    self._fill(want)  # the element runs past the buffer: read more, bigger each time
                    want *= 2
                    continue
                except RecursionError:
                    raise InputError(str(self.path), "JSON nested too deeply", where=self._where(self.pos)) from None
                except ValueError as e:  # e.g. an integer of over 4,300 digits
                    first = (str(e).splitlines() or ["ValueError"])[0][:200]
                    raise InputError(str(self.path), f"unreadable JSON: {first}", where=self._where(self.pos)) from None
                if (not self.eof and self.buf[self.pos] not in '{["'
                        and self.buf[end:end + 1] not in tuple(_WS + ",]")):  # a number may go on
                    self._fill(want)
                    continue
                want = self.chunk
                self.pos = end
                yield value
                sep = self._next_char()
                if sep == "]":
                    self.pos += 1
                    self._expect_end()
                    return
                if sep != ",":
                    raise self._error("expected ',' or ']'" if sep else "unterminated list")
                self.pos += 1

    def _fill(self, n: int) -> bool:
        """Append up to ``n`` more bytes' text to the buffer; False at end of file.

        What is consumed is dropped first, so the buffer starts at the element being read: an element
        that runs past the buffer makes the scanner raise, and its ``JSONDecodeError`` counts the
        newlines from the buffer's start to where it stopped. The reader fills before an element
        when less than half a chunk is left, so that happens only for elements that big, and the
        count covers that element, not the megabyte before it (it was a sixth of the parse)."""
        if self.eof:
            return False
        if self.pos:  # drop what is consumed (the tail kept is under half a chunk, or one element)
            self.base += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        raw = self.fh.read(n)
        if b"\x00" in raw[:4096] and not self.buf.strip():
            raise InputError(str(self.path), "not JSON: binary content")
        try:
            self.buf += self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError:
            raise InputError(str(self.path), "not JSON: binary or non-UTF-8 content") from None
        self.eof = not raw
        return bool(raw)

    def _next_char(self) -> str:
        """The next non-blank character (not consumed); '' at end of file."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self._fill(self.chunk):
                return ""

    def _expect_end(self) -> None:
        if self._next_char():
            raise self._error("Extra data")

    def _error(self, msg: str, at: int | None = None) -> InputError:
        return InputError(str(self.path), f"invalid JSON ({msg})", where=self._where(self.pos if at is None else at))

    def _where(self, at: int) -> str:
        lines_before, last_newline = self._dropped_newlines()
        line = lines_before + self.buf.count("\n", 0, at) + 1
        nl = self.buf.rfind("\n", 0, at)
        col = at - nl if nl >= 0 else self.base + at - last_newline
        return f"line {line} col {col}"

    def _dropped_newlines(self) -> tuple[int, int]:
        """(newlines in the dropped text, offset of the last one or -1), counted only when an error needs a
        position: the file's first ``base`` characters are read again (counting them on every refill cost a
        tenth of the parse)."""
        count, last, seen = 0, -1, 0
        if not self.base:
            return count, last
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        with self.path.open("rb") as fh:
            while seen < self.base:
                raw = fh.read(self.chunk)
                text = decoder.decode(raw, final=not raw)[: self.base - seen]
                if not raw and not text:
                    break
                count += text.count("\n")
                nl = text.rfind("\n")
                if nl >= 0:
                    last = seen + nl
                seen += len(text)
        return count, last
