"""A JSONL trajectory store: one canonical ``Trajectory`` JSON object per line.

Appends are flushed and fsync'd per batch so an acknowledged write survives a crash.
A torn last line (the process died mid-write) is reported, never silently dropped
into a placeholder; ``read_trajectories(..., skip_invalid=True)`` skips it.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

import pydantic_core
from pydantic import ValidationError

from evoharness.errors import InputError
from evoharness.logging import get_logger
from evoharness.traces.jsontext import lone_surrogates_replaced
from evoharness.traces.models import Trajectory

log = get_logger(__name__)


def _describe(e: ValidationError) -> str:
    first = e.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "record"
    return f"{loc}: {first['msg']}"


def jsonl_lines(path: Path | str) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of every non-blank line; an unreadable file is an ``InputError``."""
    path = Path(path)
    try:
        fh = path.open("rb", buffering=1 << 20)  # lines of real traces run to tens of KB: 4x faster than 8 KB
    except OSError as e:
        raise InputError(str(path), f"cannot open: {e.strerror}") from None
    with fh:
        if fh.peek(2)[:2] == GZIP_MAGIC:
            raise InputError(str(path), GZIP_REASON)
        if fh.peek(4)[:4].startswith(WIDE_BOMS):  # UTF-16 / UTF-32 with a byte-order mark (PowerShell 5's `>`)
            yield from _wide_lines(path, fh)
            return
        first = fh.readline()
        if first.startswith(codecs.BOM_UTF8):  # a byte-order mark (Windows editors write one) is no JSON
            first = first[len(codecs.BOM_UTF8):]
        for lineno, raw in enumerate(itertools.chain((first,), fh), start=1):
            if raw and not raw.isspace():  # not blank (``raw.strip()`` would copy every line to ask)
                yield lineno, raw


# a gzip file (`traces.jsonl.gz`): one reason from every reader, JSON lines or a document; it was "not JSON: binary
# content" from `import` / `diagnose` and "line 1: invalid JSON (truncated or not JSON)" from the dataset commands
GZIP_MAGIC = b"\x1f\x8b"
GZIP_REASON = "gzip-compressed, not JSON: decompress it first (`gunzip -k FILE`)"

# UTF-16 / UTF-32 byte-order marks (UTF-32-LE's starts as UTF-16-LE's)
WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)


def _wide_lines(path: Path, fh: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """The lines of a UTF-16 / UTF-32 file (its byte-order mark says which) as UTF-8 bytes: they were refused
    ("JSON lines are read as UTF-8"), or "invalid JSON" with ``--format``, as their bytes split at no line."""
    import io
    import json

    encoding = json.detect_encoding(fh.peek(4)[:4])  # "utf-16" / "utf-32": the BOM is read and dropped
    text = io.TextIOWrapper(fh, encoding=encoding, newline="")
    lineno = 0
    try:
        for lineno, line in enumerate(text, start=1):
            if line and not line.isspace():
                yield lineno, line.encode("utf-8")
    except UnicodeDecodeError:
        raise InputError(str(path), f"not {encoding.upper()} text past this line (its byte-order mark says "
                                    f"{encoding.upper()}): cut short or binary", where=f"line {lineno + 1}") from None
    finally:
        text.detach()


def parse_trajectory(raw: bytes | str) -> Trajectory:
    """``Trajectory.model_validate_json(raw)``: the same trajectory (equal, the same fields set) or the same
    ``ValidationError``, with ~15% fewer instructions on real traces.

    The line is parsed by pydantic's own JSON parser (``pydantic_core.from_json``, what
    ``model_validate_json`` parses with) and validated in Python mode with an empty ``messages``; the
    parsed messages are then taken over as they are once each is checked to be a dict with a string
    ``role`` (all that validating them checks, at the cost of copying every message dict and a
    Python-level validator call). Any line that fails on the way goes through ``model_validate_json``
    itself, so its error is exactly pydantic's. The other fields are strings, numbers, enums of strings and
    objects of those, which lax Python-mode and JSON-mode validation accept and convert alike
    (``tests/traces/test_traces_importers.py`` holds the edges).
    """
    try:
        d = pydantic_core.from_json(raw)
    except ValueError:
        return Trajectory.model_validate_json(raw)
    messages = d.get("messages") if type(d) is dict else None
    if type(messages) is list:
        for m in messages:
            if type(m) is not dict or type(m.get("role")) is not str:
                break
        else:
            d["messages"] = []
            try:
                traj = Trajectory.model_validate(d)
            except ValidationError:
                pass
            else:
                # checked above; kept, not copied: what ``traj.messages = messages`` does (no validate_assignment;
                # ``messages`` is in the fields set already) without pydantic's Python-level ``__setattr__``
                traj.__dict__["messages"] = messages
                return traj
    return Trajectory.model_validate_json(raw)


class KeptLine:
    """The line the trajectory ``read_trajectories`` yielded last was parsed from (``keeping_lines``).

    ``line_of(traj)`` is that line only for that very trajectory object (``is``, not ``==``): a reader that
    wraps the stream (an importer, a filter) and yields another object, or a trajectory read some other way,
    gets None, never a neighbour's line. A store that keeps a label with each trajectory (the service's ingest store;
    a run's file with its labels beside it) notes it too (``keep``, ``label``), and ``label_of(traj)`` gives it, under
    the same rule; ``offers`` says that the source keeps labels at all (so a trajectory without one lacks it); a plain
    JSONL file has none."""

    __slots__ = ("label", "offers", "raw", "traj")

    def __init__(self) -> None:
        self.traj: Trajectory | None = None
        self.raw = b""
        self.label = None
        self.offers = False

    def line_of(self, traj: Trajectory) -> bytes | None:
        return self.raw if traj is self.traj else None

    def label_of(self, traj: Trajectory):
        """The label stored with ``traj`` (a ``diagnosis.models.LabelHead``), None when none was."""
        return self.label if traj is self.traj else None

    def keep(self, traj: Trajectory, raw: bytes, label=None) -> None:
        """Note ``traj``, the bytes it was parsed from and the label stored with it (a reader other than
        ``read_trajectories``: the ingest store's rows)."""
        self.traj, self.raw, self.label, self.offers = traj, raw, label, True


_KEPT: ContextVar[KeptLine | None] = ContextVar("evoharness_kept_line", default=None)


@contextmanager
def keeping_lines() -> Iterator[KeptLine]:
    """Inside the block, ``read_trajectories`` (also as ``load_paths`` reads a canonical JSONL file) notes the line
    of each trajectory it yields in the ``KeptLine`` given (a reference: nothing is copied or hashed)."""
    kept = KeptLine()
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def current_kept() -> KeptLine | None:
    """The ``KeptLine`` of the enclosing ``keeping_lines()`` block, None outside one."""
    return _KEPT.get()


def line_digest(raw: bytes) -> str:
    """The SHA-256 (hex) of a canonical JSONL line's bytes as read, without its line end (``\\n`` or
    ``\\r\\n``): the same trajectory line gives the same digest whether or not it ends the file."""
    end = len(raw)
    if raw.endswith(b"\n"):
        end -= 2 if raw.endswith(b"\r\n") else 1
    return hashlib.sha256(memoryview(raw)[:end]).hexdigest()


def read_trajectories(
    path: Path | str,
    *,
    skip_invalid: bool = False,
    on_invalid: Callable[[InputError], None] | None = None,
    kept: KeptLine | None = None,
) -> Iterator[Trajectory]:
    """Yield trajectories from a canonical JSONL file; blank lines are ignored. ``kept`` (by default the one of
    an enclosing ``keeping_lines()``) is told each trajectory's line before it is yielded."""
    if kept is None:
        kept = _KEPT.get()
    for lineno, raw in jsonl_lines(path):
        try:
            if kept is not None:
                kept.traj, kept.raw, kept.label = _parse_line(raw), raw, None
                yield kept.traj
                continue
            yield _parse_line(raw)
        except ValidationError as e:
            err = InputError(str(path), _line_reason(raw, e), where=f"line {lineno}")
            if not skip_invalid:
                raise err from None
            if on_invalid:
                on_invalid(err)


def _parse_line(raw: bytes) -> Trajectory:
    """``parse_trajectory(raw)``; a line pydantic's parser refuses for a lone surrogate escape is read with it as
    U+FFFD (``jsontext``)."""
    try:
        return parse_trajectory(raw)
    except ValidationError:
        fixed = lone_surrogates_replaced(raw)
        if fixed == raw:
            raise
    return parse_trajectory(fixed)


def _line_reason(raw: bytes, e: ValidationError) -> str:
    kinds = {x["type"] for x in e.errors()}
    if "json_invalid" in kinds:
        return "invalid JSON (truncated or not JSON)"
    return f"not a canonical trajectory: {_describe(e)}"


@contextmanager
def replacing(path: Path | str, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file to write that becomes ``path`` only when the block ends without an error: it is written beside
    it as ``.NAME.PID.THREAD.tmp`` (hidden, and no trace file, so no scan of the directory reads it; one per
    thread, so two threads writing one path do not share it), fsync'd, renamed over ``path``, and the
    directory fsync'd so the rename outlasts a power cut. On an error, or Ctrl-C, ``path`` is left as it was
    (an earlier output is not lost to a bad input). A ``path`` that is not a regular file (``/dev/stdout``, a
    FIFO, a symlink) is written through, as before."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        try:
            with path.open(mode) as fh:
                yield fh
        except OSError as e:  # a link to /dev/full: the line names the output, as below
            raise naming_output(e, path) from None
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open(mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise naming_output(e, path) from None
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_directory(path.parent)


# what a write answers when the disk (or a quota, or the file size limit) refuses it
_REFUSED_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def naming_output(e: OSError, path: Path | str) -> OSError:
    """``e`` with ``path`` as its file when it is a refused write that names none (a write or flush on an open file
    carries no name): the CLI's line then says which output the disk refused, `error: PATH: no space left on
    device`, not only `error: no space left on device`. Any other error is returned as it is."""
    if e.filename is None and e.errno in _REFUSED_WRITE:
        return OSError(e.errno, e.strerror, str(path))
    return e


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable where the file system allows: one that answers EINVAL to a directory's fsync (some
    network and FUSE file systems), or a directory that may be written but not opened (mode 0o300), keeps the output
    the rename already put in place, as before this fsync (SQLite's ``unixSync`` ignores the directory's too)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_trajectories(path: Path | str, trajectories: Iterable[Trajectory], *, append: bool = False) -> int:
    """Write (or append) trajectories as JSONL; returns how many were written. A write (not an append)
    replaces ``path`` only once every trajectory is written (``replacing``): an error while the
    trajectories are produced leaves an earlier file as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("ab") if append else replacing(path) as fh:
        for t in trajectories:
            fh.write(t.model_dump_json(exclude_defaults=False).encode() + b"\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    return n


# The labels a run keeps beside its trajectory store (``TrajectoryStore.add(..., labels=)``): ``label``'s line format,
# one line per trajectory the store appended, in the same order; `dataset export -t DIR/trajectories.jsonl` reads it.
LABELS_NAME = "labels.jsonl"


class TrajectoryStore:
    """An append-only JSONL store with idempotent ``add`` by trajectory id, and (when ``add`` is given a label maker)
    beside it the labels of what it appended (``labels_path``)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.labels_path = self.path.with_name(LABELS_NAME)
        self._ids: dict[str, bytes] | None = None  # id -> the SHA-256 of its line
        # ids ``add`` was given that the store holds with another line (not appended: the first copy stays)
        self.conflicts: list[str] = []

    def _known(self) -> dict[str, bytes]:
        if self._ids is None:
            self._ids = {}
            if self.path.exists():
                kept = KeptLine()
                for t in read_trajectories(self.path, skip_invalid=True, kept=kept):
                    self._ids.setdefault(t.id, _digest(kept.raw))
        return self._ids

    def add(self, trajectories: Iterable[Trajectory], labels: Callable[[Trajectory, str], str] | None = None) -> int:
        """Append those not already stored; returns how many were new. ``labels(traj, digest)``: the label line (JSON
        text, no line end) of a trajectory appended, given the ``line_digest`` of the line written for it; the lines
        are appended to ``labels_path`` after the trajectories are durable, in their order. A crash between the two
        leaves trajectories without a label line, never a label line without its trajectory: a reader takes the
        labels as an ordered subsequence of the trajectories (``datasets.export.LabelsBeside``)."""
        known = self._known()
        new, lines, ids = [], [], {}
        for t in trajectories:
            if t.id not in known and t.id not in ids:
                line = t.model_dump_json(exclude_defaults=False).encode()
                ids[t.id] = _digest(line)
                new.append(t)
                lines.append(line)
            else:  # stored already (or earlier in this batch): the same line is a duplicate, another one a conflict
                ours = _digest(t.model_dump_json(exclude_defaults=False).encode())
                if (ids[t.id] if t.id in ids else known[t.id]) != ours:
                    self.conflicts.append(t.id)
                    log.warning("store.conflict", trajectory=t.id, store=str(self.path),
                                reason="stored already with other content; not appended")
        if not new:
            return 0
        _append(self.path, lines, fsync=True)
        known.update(ids)  # only once they are stored: a failed append is retried whole, not skipped as stored
        if labels is not None:  # losing them costs a relabelling at export, never a wrong class: no fsync
            _append(self.labels_path, [labels(t, hashlib.sha256(line).hexdigest()).encode()
                                       for t, line in zip(new, lines, strict=True)], fsync=False)
        return len(new)

    def __iter__(self) -> Iterator[Trajectory]:
        if not self.path.exists():
            return iter(())
        return read_trajectories(self.path, skip_invalid=True)

    def __len__(self) -> int:
        return len(self._known())

    def __contains__(self, trajectory_id: str) -> bool:
        return trajectory_id in self._known()


def _digest(line: bytes) -> bytes:
    """The SHA-256 of a trajectory's line, without its line end."""
    return hashlib.sha256(line.rstrip(b"\r\n")).digest()


def _append(path: Path, lines: list[bytes], *, fsync: bool) -> None:
    """Append ``lines`` (each without its line end) to ``path`` in one write. A write the disk refuses (full, over
    quota, over the file size limit) takes back what it appended, so no half line is left for the next append to
    run into, and names ``path``: it said `cannot write a file of the run: No space left on device`, naming none,
    and left the part of the batch that fit, its last line cut."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab", buffering=0) as fh:  # unbuffered: closing it writes nothing after a refused write
        size = os.fstat(fh.fileno()).st_size
        try:
            data = memoryview(b"".join(line + b"\n" for line in lines))
            while data:  # one write, or more where the kernel takes part of it
                data = data[fh.write(data):]
            if fsync:
                os.fsync(fh.fileno())
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fh.fileno(), size)
            raise naming_output(e, path) from None
