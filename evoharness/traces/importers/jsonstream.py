"""The records of a top-level JSON list, read from disk one at a time.

A file of 100,000 trajectories as one JSON list would otherwise be parsed whole (gigabytes of
Python objects) before the first one is labelled. ``ArrayRecords(path)`` parses one element at a
time from a buffer refilled in chunks, so memory holds the buffer and the current record only (or the
elements of up to ``_BATCH`` bytes of it): a list written with an indent (tau-bench's results) with
jiter (pydantic-core's parser, as its own package), a few elements at a time, as long as every element is laid
out that way;
any other list, and the rest of one once that fails, with the C scanner behind ``json.loads``
(``JSONDecoder.raw_decode``). Both give what ``json.loads`` of the whole file gives, a lone surrogate
escape read as U+FFFD (``traces.jsontext``).

Errors are the ones ``json.loads`` of the whole file would give, as an ``InputError`` naming the
file and ``line L col C``; they surface when the stream reaches them (the records before them
have been yielded).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Generator, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from jiter import from_json

from evoharness.errors import InputError
from evoharness.traces.jsontext import has_surrogate_escape, lone_surrogates_replaced

CHUNK = 1 << 20
_WS = " \t\n\r"


def starts_with_list(path: Path) -> bool:
    """Whether the first non-blank byte of ``path`` opens a JSON list."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    return head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"[")


class ArrayRecords:
    """Iterate the elements of the JSON list in ``path`` (re-iterable: each iteration re-reads, but the one ``first``
    began, which goes on from there)."""

    def __init__(self, path: Path, chunk: int = CHUNK) -> None:
        self.path = path
        self.chunk = chunk
        self._begun: tuple[Any, Iterator[Any]] | None = None  # ``first``'s element and the iteration it began

    def first(self) -> Any:
        """The list's first element (None when the list is empty), read once: the next iteration goes on from the
        read that found it instead of opening the file again. Format detection asks for the first record before the
        importer reads them all (``importers._streamed_list``, ``detect_format``): each of the three was a read of its
        own, the file's first megabyte and its first element's parse three times (25 KB of tau-bench airline's
        4 MB; the whole file for a list of one record). Errors are the iteration's own."""
        if self._begun is None:
            it = self._elements()
            for value in it:
                self._begun = value, it
                break
            else:
                return None
        return self._begun[0]

    def __iter__(self) -> Iterator[Any]:
        begun, self._begun = self._begun, None
        if begun is None:
            return self._elements()
        return chain((begun[0],), begun[1])

    def _elements(self) -> Iterator[Any]:
        done = yield from _indented_records(self.path, self.chunk)
        if done is not None:  # the layout or a value the fast path does not take: the stdlib goes on
            yield from _Reader(self.path, self.chunk).records(skip=done)


_WS_BYTES = frozenset(b" \t\r\n")
_CLOSER = {ord("{"): b"}", ord("["): b"]"}
_SEARCH = 1 << 24  # bytes read looking for one element's closing line before the stdlib takes over
_BATCH = 1 << 18  # bytes of elements parsed at once, so alive at once (a tau-bench record is ~20 KB of text)


def _indented_records(path: Path, chunk: int) -> Generator[Any, None, int | None]:
    """The elements of a JSON list written with an indent (``json.dump(records, f, indent=N)``, as
    tau-bench writes its results), parsed with ``jiter.from_json`` (what pydantic parses JSON with, as its own
    package: the same values and errors as ``pydantic_core.from_json``, a newer build at ~82% of its instructions,
    56 M against 68 M for tau-bench airline's 4 MB): about half the stdlib scanner's instructions here. It reads
    every value as ``json.loads`` does (integers beyond 64 bits exact, NaN and Infinity, 1e400 as inf, the last of
    duplicate keys; orjson, ~2.5x cheaper on a whole file, makes an integer beyond 64 bits a float, and a walk of
    every value to catch that cost a third of the parse) and refuses a lone surrogate escape and nesting over 200
    deep, which ``json.loads`` then parses.

    Such a list's element opens alone at the end of a line (after its indent I) and closes on the first
    later line that is I and its closing bracket (strings hold no raw newline; nested lines are
    indented deeper). The bytes from the opening to that line are parsed whole and the slice taken
    only when they parse: a proper prefix of an object or list is never a JSON value, and a
    slice that runs past the element has content after it, so a slice that parses is the element.
    Once an element has ended with the separator (``paired``), the elements that end in the next ``_BATCH``
    bytes are parsed together: the last element end there (the closing line, the separator and the next
    opening) is looked for backwards, and the bytes up to it are parsed as one list, ``[`` and ``]`` around them.
    Such a list's values are the elements the file's own list holds there (a value's extent does not depend on
    what follows it). A byte search forwards for each element's end cost as many instructions as a third of its
    parse (7 M of 87 M on tau-bench's 200 records; ~15 of ~58 microseconds a record); backwards it reads about
    one element per batch. Where the list does not parse (a lone surrogate escape, the one more level of
    nesting, an error), its elements are read one at a time as before.
    Returns None at the end of the list, or the number of elements yielded when it cannot go on (any
    other layout; the end of the list followed by more than blanks; an error): the caller hands over to
    the stdlib reader, which reads past that many elements and gives exactly what it always gave,
    errors included.
    """
    try:
        fh = path.open("rb")
    except OSError:
        return 0  # the stdlib reader says why
    with fh:
        buf = fh.read(chunk)
        eof = not buf
        pos = 3 if buf.startswith(codecs.BOM_UTF8) else 0
        n = 0
        dropped = 0  # bytes of the file before buf[0] (less a BOM)
        solo = 0  # the elements before this offset (dropped + pos) are parsed one at a time (a batch of them failed)

        def more(want: int) -> int:  # drop up to the line holding pos, append ``want`` bytes; the drop
            nonlocal buf, pos, eof, dropped
            keep = buf.rfind(b"\n", 0, pos) + 1
            dropped += keep
            raw = fh.read(want)
            eof = not raw
            buf = buf[keep:] + raw
            pos -= keep
            return keep

        def blank() -> int:  # the next non-blank byte (pos on it), -1 at end of file
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _WS_BYTES:
                    pos += 1
                if pos < len(buf):
                    return buf[pos]
                if eof:
                    return -1
                more(chunk)

        if blank() != ord("["):
            return 0
        pos += 1
        if blank() in (ord("]"), -1):
            return 0  # an empty or unterminated list: the stdlib reader checks it
        paired = False  # the last element's closing line had the separator after it, as ``json.dump`` writes it
        while True:
            opener = buf[pos]
            line = buf.rfind(b"\n", 0, pos) + 1  # buf starts at a line's start, or at the file's
            indent = buf[line:pos]
            if pos + 1 == len(buf):
                more(chunk)
            if opener not in _CLOSER or indent.strip(b" \t") or buf[pos + 1:pos + 2] not in (b"\n", b"\r"):
                return n  # not an opening on a line of its own, as ``json.dump`` with an indent writes it
            closer = b"\n" + indent + _CLOSER[opener]
            # where the last element's end had the separator after it: this one's closing line, the separator and the
            # next element's opening (the same bracket as this one's). A byte search for "\n  }" steps about one byte
            # at a time over indented JSON (every blank is a candidate for its last byte), one for a needle that ends
            # in a bracket about twice as far (14 M -> 7 M instructions on tau-bench's 200 records). A match that is
            # not this element's end (an earlier closing line without them: the last element, another layout, an
            # element of another kind next) makes a slice that does not parse; not found, the closing line is looked for
            after = b"," + (b"\r\n" if buf[pos + 1:pos + 3] == b"\r\n" else b"\n") + indent  # the opening line's end
            needle = closer + after + bytes((opener,)) if paired else closer
            if paired and dropped + pos >= solo:  # the elements ending in the next _BATCH bytes, parsed as one list
                end = buf.rfind(needle, pos, pos + _BATCH)
                if end > pos:
                    end += len(closer)
                    try:
                        values = from_json(b"".join((b"[", memoryview(buf)[pos:end], b"]")))
                    except ValueError:  # a lone surrogate, nesting, an error: these elements one by one, below
                        solo = dropped + end
                    else:
                        yield from values
                        n += len(values)
                        del values
                        pos = end
                        if blank() != ord(","):  # the needle's own separator: never
                            return n
                        pos += 1
                        blank()
                        continue
            want, start = chunk, pos
            while (end := buf.find(needle, start)) < 0:
                if eof or len(buf) - pos > max(_SEARCH, chunk):
                    if needle is closer:
                        return n
                    needle, start = closer, pos  # the last element, or another layout
                    continue
                start = len(buf) - len(needle) + 1  # no match starts before this
                start -= more(want)
                start = max(pos, start)
                want *= 2
            end += len(closer)
            paired = buf.startswith(after, end)
            segment = buf[pos:end]
            try:
                value = from_json(segment)
            except ValueError:  # what jiter refuses: a lone surrogate, nesting over 200 deep, an error
                try:  # a lone surrogate escape is read as U+FFFD (``traces.jsontext``)
                    value = json.loads(str(lone_surrogates_replaced(segment), "utf-8"))
                except (ValueError, RecursionError):
                    return n
            yield value
            n += 1
            pos = end
            sep = blank()
            if sep == ord("]"):
                pos += 1
                return None if blank() == -1 else n
            if sep != ord(","):
                return n
            pos += 1
            if blank() == -1:
                return n


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

    def records(self, skip: int = 0) -> Iterator[Any]:
        """The list's elements, the first ``skip`` of them parsed and checked but not yielded."""
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
                    from evoharness.traces.importers import _first_line

                    raise InputError(str(self.path), f"unreadable JSON: {_first_line(e)}",
                                     where=self._where(self.pos)) from None
                if (not self.eof and self.buf[self.pos] not in '{["'
                        and self.buf[end:end + 1] not in tuple(_WS + ",]")):  # a number may go on
                    self._fill(want)
                    continue
                if has_surrogate_escape(self.buf, self.pos, end):  # read a lone one as U+FFFD
                    value = json.loads(lone_surrogates_replaced(self.buf[self.pos:end]))
                want = self.chunk
                self.pos = end
                if skip:
                    skip -= 1
                else:
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
