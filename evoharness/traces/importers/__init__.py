"""Importers: turn trace files written by other agents into canonical trajectories.

Formats (auto-detected per file; ``fmt`` overrides):

- ``canonical``: evoharness JSONL (or a JSON list) of ``Trajectory`` objects.
- ``openai``: records of OpenAI chat messages with an outcome, e.g. tau-bench's
  ``historical_trajectories/*.json`` (``traj`` + ``reward`` + ``task_id`` + ``trial``), or SWE-rebench's OpenHands
  records (``trajectory`` + ``resolved`` 1 / 0 + ``instance_id``).
- ``mini-swe-agent``: ``*.traj.json`` files, joined with ``logs/<id>/report.json``'s
  ``resolved`` flag when present (score 1.0 / 0.0; unscored without a report).
- ``swe-agent``: SWE-agent ``<instance_id>.traj`` files (``history`` / ``trajectory`` / ``info``), joined with
  SWE-bench results as for mini-swe-agent.
- ``openhands``: OpenHands' evaluation output (``output.jsonl`` of its SWE-bench ``run_infer.py``: ``instance_id``,
  ``history`` of events, the classic ones or the V1 agent SDK's, ``test_result.git_patch``), joined with the
  SWE-bench verdicts its evaluation writes beside it.
- ``nebius-swe-agent``: rows of nebius' ``SWE-agent-trajectories`` dataset (``instance_id``, ``target``,
  ``exit_status``, ``generated_patch``, ``trajectory`` of ``{role: system / user / ai, text}`` turns), JSONL or a
  JSON list, scored by ``target``.
- ``who-and-when``: Who&When multi-agent failure logs (failure-only, unscored).
- ``agentrx``: a bare JSON list of ``{role, content}`` messages whose roles name the agents,
  e.g. AgentRx's Magentic-One runs (failure-only, unscored; human labels joined when present), or whose ``name``s
  do: AG2's / AutoGen 0.2's ``chat_history``, its tool calls and ``tool_responses`` read as steps (``ag2``).
- ``agentrx-tau``: AgentRx's tau-bench runs (``data/tau_dataset/<id>.json``: one tau-bench record whose
  messages carry a 1-based ``index``), scored by ``reward``; human labels joined when present.
- ``atif``: ATIF trajectories (``schema_version`` "ATIF-v1.x": Harbor / terminal-bench, NeMo Agent
  Toolkit), joined with Harbor's ``<trial>/result.json`` reward.
- ``tau2``: tau2-bench ``results.json`` (one trajectory per simulation, scored by its reward).
- ``otlp``: OTLP JSON traces (OTLP/HTTP JSON, or the file exporters' JSON lines) in the OpenTelemetry
  GenAI or the OpenInference dialect: one trajectory per trace.
- ``langsmith``: LangSmith runs (``list_runs`` records or a run tree): one trajectory per trace,
  feedback as score.
- ``autogen``: AutoGen AgentChat runs (0.4 and later, ``MagenticOneGroupChat`` too): a ``TaskResult`` dump
  (``{messages, stop_reason}``), its messages alone (a JSON list of ``{source, type, content, ...}``), a JSON list or
  JSONL of ``TaskResult`` objects; agents named by ``source``, tool calls and results as steps (unscored).

Every error names the file and the record / line: ``InputError(source, reason, where)``.

Files are read one trajectory at a time: JSONL line by line, and a JSON list of canonical, OpenAI, OpenHands,
nebius SWE-agent or AgentRx tau-bench records element by element (``jsonstream.ArrayRecords``), so memory does not
grow with the number of trajectories in a file. A file holding one trajectory (mini-swe-agent, Who&When, an
AgentRx message list) is parsed whole.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from jiter import from_json

from evoharness.errors import NOT_A_REGULAR_FILE, InputError, missing_reason
from evoharness.run_dirs import run_trajectories
from evoharness.traces.importers import (
    ag2,
    agentrx,
    agentrx_tau,
    atif,
    autogen,
    canonical,
    langsmith,
    mini_swe,
    nebius_swe_agent,
    neighbours,
    openai_records,
    openhands,
    otlp,
    swe_agent,
    tau2_results,
    who_when,
)
from evoharness.traces.importers.jsonstream import ArrayRecords, starts_with_list
from evoharness.traces.jsontext import lone_surrogates_replaced
from evoharness.traces.layout import json_lines
from evoharness.traces.models import Trajectory
from evoharness.traces.store import GZIP_MAGIC, GZIP_REASON, WIDE_BOMS, jsonl_lines

FORMATS: dict[str, Any] = {
    "canonical": canonical,
    "openai": openai_records,
    "mini-swe-agent": mini_swe,
    "swe-agent": swe_agent,
    "openhands": openhands,
    "nebius-swe-agent": nebius_swe_agent,
    "who-and-when": who_when,
    "agentrx": agentrx,
    "agentrx-tau": agentrx_tau,
    "atif": atif,
    "tau2": tau2_results,
    "otlp": otlp,
    "langsmith": langsmith,
    "autogen": autogen,
}

FORMAT_NAMES = tuple(FORMATS)

OnInvalid = Callable[[InputError], None]


def iter_files(paths: Iterable[Path | str], *, exclude: Path | None = None,
               on_unreadable: OnInvalid | None = None) -> Iterator[Path]:
    """Expand directories (recursively, sorted) into their trace files; ``exclude`` (a resolved path: the
    command's own output, see ``output_apart``, under any name: a hard link too) is left out of a directory's.
    A directory that cannot be listed (no permission) is an ``InputError``, or handed to ``on_unreadable`` and
    left out when one is given: its runs are never dropped unsaid."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            if _run_directory(p) and not any((p / n).is_file() for n in ("trajectories.jsonl", "summary.json")):
                raise InputError(str(p), "a run that has written no trajectories yet (no trajectories.jsonl): "
                                         "try again once its first rollouts are done")
            own = _file_id(exclude) if exclude is not None else None  # written by now: the caller opened it
            if (latest := _demo_run_trajectories(p)) is not None:  # `demo --resume` added a run: read the latest
                if _kept(latest, exclude, own):
                    yield latest
                continue
            held: list[Path] = []  # labels `label DIR --out DIR[/NAME]` wrote: read only when the scan finds no traces
            found = False
            for f in _walk(p, on_unreadable):  # sorted(p.rglob("*"))'s order, without a Path per file held
                if f.is_file() and not f.name.startswith(".") and _is_trace_file(f) and _kept(f, exclude, own):
                    if _labels_file(f):
                        held.append(f)
                        continue
                    found = True
                    yield f
            if not found:  # labels alone: read, and said to be labels (``detect_format``), not 'no trajectories'
                yield from held
        elif p.is_file():
            yield p
        elif p.exists():  # a FIFO would hang the reader, /dev/zero never ends
            raise InputError(str(p), NOT_A_REGULAR_FILE)
        else:  # a loop or a link to a missing file is named as a link: "no such file" when `ls` shows the name
            raise InputError(str(p), missing_reason(p))


def _walk(d: Path, on_unreadable: OnInvalid | None = None) -> Iterator[Path]:
    """The entries under ``d`` in ``sorted(d.rglob("*"))``'s order (names sorted per directory, a directory's
    entries right after it; symlinked directories not entered), holding one directory's names per level instead
    of every path (a folder of 100,000 runs held ~90 MiB of Paths). An unlistable directory: see ``iter_files``
    (it was left out silently: `import` of a folder wrote the runs it could read, exit 0)."""
    try:
        with os.scandir(d) as it:
            entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
    except OSError as e:
        err = InputError(str(d), f"cannot list the directory: {(e.strerror or str(e)).lower()}")
        if on_unreadable is None:
            raise err from None
        on_unreadable(err)
        return
    for name, is_dir in entries:
        yield d / name
        if is_dir:
            yield from _walk(d / name, on_unreadable)


def output_apart(out: Path | str, paths: Iterable[Path | str], *,
                 ours: Callable[[bytes], bool] | None = None) -> Path:
    """``out`` resolved, to pass as ``exclude``: writing into an input directory is fine (the output is left
    out of the scan; read while it is written it would grow without end), naming an input file is an
    ``InputError`` (opening it for writing would empty the input before it is read). So is an ``out`` that
    already holds a trace file of an input directory which ``ours`` (given its first line) says this command
    did not write: it would be emptied, unread (an earlier run's own output is replaced, as a re-run expects)."""
    target = Path(out).resolve()
    for raw in paths:
        p = Path(raw)
        if p.is_file() and (p.resolve() == target or _same_file(p, target)):
            raise InputError("--out", f"{out} is also an input: write the output to another file")
        if (ours is not None and p.is_dir() and p.resolve() in target.parents and target.is_file()
                and not target.name.startswith(".") and _is_trace_file(target) and not ours(_head_line(target))):
            raise InputError("--out", f"{out} is a trace file in the input directory {raw}, not one this command "
                                      "wrote: write the output to another file")
    return target


def _file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``, None when it does not exist (yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file under two names (a hard link: ``resolve`` tells them apart)."""
    ida = _file_id(a)
    return ida is not None and ida == _file_id(b)


def _head_line(path: Path, limit: int = 1 << 20) -> bytes:
    """The first line of ``path`` (at most ``limit`` bytes; empty when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return fh.readline(limit).strip()
    except OSError:
        return b""


def canonical_line(line: bytes) -> bool:
    """Whether ``line`` is empty or a canonical trajectory (what ``evoharness import`` writes)."""
    if not line:
        return True
    try:
        Trajectory.model_validate_json(line)
    except ValueError:
        return False
    return True


# A run directory's own records (<home>/runs/<run-id>/ beside its trajectories.jsonl: settings, summary, the
# analyst's evidence snapshot, harness evidence, `evaluate`/`ablate` results, the labels it keeps) and a demo
# directory's summary.json are not traces of the run: `diagnose DEMO_DIR` stopped on the first of them. The run's
# trajectories.jsonl is read.
_RUN_RECORDS = frozenset({"settings.json", "summary.json", "evidence.jsonl", "harness_evidence.json",
                          "ablation.json", "evaluation-dev.json", "evaluation-heldout.json", "labels.jsonl"})


def _run_directory(d: Path) -> bool:
    """A run's directory: its settings.json beside its trajectories, its summary, or the lock its driver holds
    (a run started that has rolled nothing out yet)."""
    return (d / "settings.json").is_file() and any((d / name).is_file()
                                                   for name in ("trajectories.jsonl", "summary.json", "run.lock"))


def _kept(f: Path, exclude: Path | None, own: tuple[int, int] | None) -> bool:
    """Whether ``f`` is not ``exclude`` (resolved) nor, by its file identity ``own``, a hard link to it."""
    return exclude is None or (f.resolve() != exclude and (own is None or _file_id(f) != own))


def _demo_directory(d: Path) -> bool:
    """A demo's output directory: its summary.json beside the runs' state and the harness."""
    return (d / "summary.json").is_file() and (d / "state" / "runs").is_dir() and (d / "harness").is_dir()


def _demo_run_trajectories(d: Path) -> Path | None:
    """The trajectories.jsonl of the run a demo directory ``d`` holds (``run_dirs.demo_run``: the one its
    summary.json names, the latest, under ``d`` itself; `report` and `export-otel` read that one), None when ``d``
    is no demo directory. A demo directory whose run cannot be told, or whose run has no trajectories yet, is an
    ``InputError``: its runs read together would be a mixture no other command reads."""
    return run_trajectories(d, str(d)) if _demo_directory(d) else None


def _run_record(f: Path) -> bool:
    if f.name not in _RUN_RECORDS:
        return False
    d = f.parent
    if _run_directory(d):
        return True
    # the labels of the trajectories.jsonl beside them, in any directory (`import --out DIR` then `label --out DIR`):
    # the pair `dataset export -t DIR/trajectories.jsonl` reads together; `diagnose DIR` stopped on the labels
    if f.name == "labels.jsonl" and (d / "trajectories.jsonl").is_file():
        return True
    return f.name == "summary.json" and _demo_directory(d)


# the keys of a line `evoharness label` writes (`diagnosis.models.LabelLine`), which no trace format's record holds
_LABEL_KEYS = frozenset({"trajectory_id", "failure_class", "first_signal", "lever"})


def _label_line(rec: Any) -> bool:
    return isinstance(rec, dict) and _LABEL_KEYS <= rec.keys() and "messages" not in rec


# how every line `evoharness label` writes opens (``LabelLine``'s first field)
_LABEL_LINE_START = b'{"trajectory_id":'


def _labels_file(f: Path) -> bool:
    """Whether ``f`` is a JSONL file whose first line is a line `evoharness label` writes. `label DIR --out DIR` puts
    labels.jsonl beside the traces it labelled (`--out DIR/judge.jsonl` a file of another name), and `diagnose DIR`,
    `import DIR` and `label DIR` again then stopped on it ('a labels file ..., not traces'); the labels of a
    trajectories.jsonl beside them were already left out (``_run_record``). A file not named labels.jsonl has its
    first line read only when it opens as a label line does: a scan reads 17 bytes more of each other trace file (of
    any name: `label --out labels.json` is labels too)."""
    if f.name != "labels.jsonl":
        try:
            with f.open("rb") as fh:
                if fh.read(len(_LABEL_LINE_START)) != _LABEL_LINE_START:
                    return False
        except OSError:
            return False
    try:
        return _label_line(json.loads(_head_line(f) or b"null"))
    except ValueError:
        return False


def _is_trace_file(f: Path) -> bool:
    if f.suffix not in TRACE_SUFFIXES or _run_record(f):
        return False
    # SWE-bench results (logs/.../report.json, aggregate reports) and preds.json are joined with
    # mini-swe-agent trajectories, not traces themselves
    if mini_swe.is_sidecar(f) or openhands.is_sidecar(f):  # OpenHands' evaluation files beside its output.jsonl
        return False
    # Harbor's <trial>/result.json is joined with <trial>/agent/trajectory.json
    if f.name == "result.json" and (f.parent / "agent" / "trajectory.json").is_file():
        return False
    # AgentRx's ground truth (joined with each run) and its step counts sit beside the runs
    return not ((f.name in agentrx.SIDECARS
                 and (f.parent.name == "trajectories" or (f.parent / "trajectories").is_dir()))
                or agentrx.is_ground_truth(f))


# the names a directory scan reads (its other files -- READMEs, logs, scripts -- are left alone); a named file is
# read whatever its name, JSON lines or one document by its content (``layout.json_lines``). .traj: SWE-agent's
TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")

PARQUET_MAGIC = b"PAR1"


def read_json_file(path: Path) -> Any:
    raw = path.read_bytes()
    if raw.startswith(WIDE_BOMS):  # UTF-16 / UTF-32 with a byte-order mark (PowerShell 5's `>` writes UTF-16)
        try:
            raw = raw.decode(json.detect_encoding(raw)).encode()
        except UnicodeDecodeError:
            raise InputError(str(path), "not JSON: binary content, or UTF-16 / UTF-32 text cut short") from None
    if not raw.removeprefix(codecs.BOM_UTF8).strip():
        raise InputError(str(path), "empty file")
    if raw.startswith(GZIP_MAGIC):
        raise InputError(str(path), GZIP_REASON)
    if raw.startswith(PARQUET_MAGIC):  # e.g. a Hugging Face dataset's shard: what to do instead, not just "binary"
        raise InputError(str(path), "a parquet file, not JSON: export its rows as JSON lines (datasets' "
                                    "Dataset.to_json; docs/traces.md, nebius-swe-agent)")
    if b"\x00" in raw[:4096]:
        raise InputError(str(path), "not JSON: binary content")
    try:  # jiter (``jsonstream``): json.loads' values in about half its instructions, and no search for a surrogate
        return from_json(raw)
    except ValueError:  # what it refuses (a lone surrogate escape, nesting over 200 deep, a BOM, an error): read by
        pass  # the stdlib, its values and errors as before
    try:
        return json.loads(lone_surrogates_replaced(raw))
    except UnicodeDecodeError:
        raise InputError(str(path), "not JSON: binary or non-UTF-8 content") from None
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"invalid JSON ({e.msg})", where=f"line {e.lineno} col {e.colno}") from None
    except RecursionError:
        raise InputError(str(path), "JSON nested too deeply") from None
    except (ValueError, MemoryError) as e:  # e.g. an integer of over 4,300 digits
        raise InputError(str(path), f"unreadable JSON: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    """The reason, for a user: Python's advice on a long integer ('use sys.set_int_max_str_digits() to increase
    the limit') is for a programmer, and left out."""
    return (str(e).splitlines() or [type(e).__name__])[0].split("; use sys.set_int_max_str_digits")[0][:200]


def _first_jsonl_record(path: Path) -> Any:
    for lineno, line in jsonl_lines(path):  # a byte-order mark skipped; UTF-16 / UTF-32 read as UTF-8
        try:
            return json.loads(line)
        except UnicodeDecodeError:
            raise InputError(str(path), "not JSON: binary or non-UTF-8 content", where=f"line {lineno}") from None
        except json.JSONDecodeError as e:
            raise InputError(str(path), f"invalid JSON ({e.msg})", where=f"line {lineno}") from None
        except RecursionError:
            raise InputError(str(path), "JSON nested too deeply", where=f"line {lineno}") from None
        except ValueError as e:
            raise InputError(str(path), f"unreadable JSON: {_first_line(e)}", where=f"line {lineno}") from None
    raise InputError(str(path), "empty file")


# the formats whose records may come one a JSON line (the others are one JSON document per file)
LINE_FORMATS = ("canonical", "openai", "otlp", "langsmith", "autogen", "openhands", "nebius-swe-agent")


def detect_format(path: Path, data: Any = None) -> str:
    """Name the format of one file (its parsed JSON document may be passed to avoid re-reading). JSON lines or one
    document by what the file holds (``layout.json_lines``), whatever its name."""
    if data is None and json_lines(path):
        return _detect_lines(path)
    return _detect_document(path, data)


def _detect_lines(path: Path) -> str:
    first = _first_jsonl_record(path)
    name = _detect_record(first)
    if name in LINE_FORMATS:
        return name
    if _label_line(first):  # our own output, read as traces: say what it is, not "unrecognised"
        raise InputError(str(path), "a labels file (what `evoharness label` writes), not traces: name the "
                                    "trajectories it labels", where="line 1")
    if name is not None:  # e.g. Who&When logs joined one a line: each is a file of its own
        raise InputError(str(path), f"JSON lines of {name} records: that format is one JSON document per file",
                         where="line 1")
    raise InputError(str(path), f"unrecognised JSONL record (formats: {', '.join(FORMAT_NAMES)})",
                     where="line 1")


def _detect_document(path: Path, data: Any) -> str:
    if data is None:
        data = _streamed_list(path, None) or read_json_file(path)
    if isinstance(data, ArrayRecords):
        return _detect_record(data.first())  # _streamed_list admits STREAMED records only
    if isinstance(data, list):
        if not data:
            raise InputError(str(path), "empty list: no trajectories")
        if ag2.is_history(data):  # before openai: AG2's roles are a reader's view, its names who spoke
            return "agentrx"
        if openai_records.is_chat_list(data):  # before agentrx: its tool calls would be dropped as text
            return "openai"
        if agentrx.is_message_list(data):
            return "agentrx"
        if autogen.is_message_list(data):
            return "autogen"
        name = _detect_record(data[0])
        if name in ("canonical", "openai", "langsmith", "agentrx-tau", "autogen", "openhands", "nebius-swe-agent"):
            return name
        raise InputError(str(path), f"unrecognised record (formats: {', '.join(FORMAT_NAMES)})",
                         where="record 0")
    name = _detect_record(data)
    if name is None:
        raise InputError(str(path), f"unrecognised format (formats: {', '.join(FORMAT_NAMES)})")
    return name


def record_format(rec: Any) -> str | None:
    """The format one parsed record looks like (None: none of them)."""
    return _detect_record(rec)


# The order record detection asks each format's ``matches(record)``: the most specific first (an
# OpenAI record is anything with messages). ``agentrx`` is detected on the whole list instead.
RECORD_DETECTION = ("atif", "tau2", "otlp", "langsmith", "openhands", "nebius-swe-agent", "swe-agent", "who-and-when",
                    "autogen",
                    "mini-swe-agent", "canonical", "agentrx-tau", "openai")


def _detect_record(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return None
    return next((name for name in RECORD_DETECTION if FORMATS[name].matches(rec)), None)


def load_file(path: Path, fmt: str | None = None, *, skip_invalid: bool = False,
              on_invalid: OnInvalid | None = None, warnings: ImportWarnings | None = None) -> Iterator[Trajectory]:
    """Yield the trajectories in one file; ``warnings`` gathers the files this import met but could not use
    (``meta["import_warnings"]``). A canonical file's trajectories carry the warnings of the import that wrote them:
    kept in their meta, not gathered again (that import said so; the file it named may be fixed since)."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (formats: {', '.join(FORMAT_NAMES)})")
    data: Any = None
    if json_lines(path):
        name = fmt or _detect_lines(path)
        if name not in LINE_FORMATS:  # its importer would read the file as one document: "Extra data" at line 2
            raise InputError(str(path), f"JSON lines, but the {name} format is one JSON document per file",
                             where="line 1")
    else:
        data = _streamed_list(path, fmt)
        if data is None:
            data = read_json_file(path)
        name = fmt or _detect_document(path, data)
    met = warnings if name != "canonical" else None
    try:
        for t in FORMATS[name].load(path, data, skip_invalid=skip_invalid, on_invalid=on_invalid):
            yield met.add(t) if met is not None else t
    except (ValueError, RecursionError, MemoryError) as e:  # hostile input no importer foresaw: one line
        raise InputError(str(path), f"unreadable {name} input: {type(e).__name__}: {_first_line(e)}") from None


# formats whose JSON list is read element by element
STREAMED = ("canonical", "openai", "agentrx-tau", "openhands", "nebius-swe-agent")


def _streamed_list(path: Path, fmt: str | None) -> ArrayRecords | None:
    """The file's records as a stream when it is a JSON list of canonical / OpenAI / AgentRx tau-bench records."""
    if fmt not in (None, *STREAMED) or not starts_with_list(path):
        return None
    records = ArrayRecords(path)
    first = records.first()  # parses the first element only; the importer's iteration goes on from it
    if first is None:
        raise InputError(str(path), "empty list: no trajectories")
    if agentrx.is_message_list([first]) or (fmt is None and _detect_record(first) not in STREAMED):
        return None  # a bare message list (one conversation) is read whole, whatever --format says
    return records


def load_paths(paths: Iterable[Path | str], fmt: str | None = None, *, skip_invalid: bool = False,
               on_invalid: OnInvalid | None = None, exclude: Path | None = None,
               warnings: ImportWarnings | None = None) -> Iterator[Trajectory]:
    """Yield trajectories from files and directories (``exclude``: see ``iter_files``; ``warnings``: see
    ``load_file``).

    With ``skip_invalid`` a bad file or record is reported through ``on_invalid``
    and skipped; otherwise the first one raises ``InputError``.
    """
    def unreadable(e: InputError) -> None:
        if on_invalid:
            on_invalid(e)

    paths = list(paths)
    if sum(str(p) == STDIN for p in paths) > 1:
        raise InputError(STDIN, "standard input given twice")
    for raw in paths:
        if str(raw) == STDIN:
            yield from _load_stdin(fmt, skip_invalid=skip_invalid, on_invalid=on_invalid, warnings=warnings)
            continue
        for f in iter_files([raw], exclude=exclude, on_unreadable=unreadable if skip_invalid else None):
            try:
                try:
                    yield from load_file(f, fmt, skip_invalid=skip_invalid, on_invalid=on_invalid,
                                         warnings=warnings)
                except OSError as e:  # a file that cannot be read (no permission): skipped as bad input when skipping
                    raise InputError(str(f), (e.strerror or str(e)).lower()) from None
            except InputError as e:
                if not skip_invalid:
                    raise
                if on_invalid:
                    on_invalid(e)


STDIN = "-"  # a path argument that names standard input


def _load_stdin(fmt: str | None, *, skip_invalid: bool, on_invalid: OnInvalid | None,
                warnings: ImportWarnings | None) -> Iterator[Trajectory]:
    """The trajectories piped in as ``-``: copied to a temporary file (named ``stdin.json`` or ``stdin.jsonl``, so
    ids made of a file name read ``stdin``), read as that file would be, with nothing beside it joined (as a
    ``load_bytes`` body); errors name ``-``. A terminal is refused: the command would wait for a file to be typed."""
    import shutil
    import sys
    import tempfile

    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        raise InputError(STDIN, "standard input is a terminal: pipe a trace file in (`... < FILE`), or name it")

    def named(e: InputError) -> InputError:
        return InputError(STDIN, e.reason.replace(str(path), STDIN), e.where)

    def report(e: InputError) -> None:
        if on_invalid:
            on_invalid(named(e))

    with tempfile.TemporaryDirectory(prefix="evoharness-stdin-") as tmp:
        spool = Path(tmp) / "stdin"
        with spool.open("wb") as fh:
            shutil.copyfileobj(stdin.buffer, fh, 1 << 20)
        path = spool.rename(spool.with_suffix(".jsonl" if json_lines(spool) else ".json"))
        try:
            with neighbours.alone():
                yield from load_file(path, fmt, skip_invalid=skip_invalid, on_invalid=report, warnings=warnings)
        except InputError as e:
            if not skip_invalid:
                raise named(e) from None
            report(e)


class ImportWarnings:
    """The files the importers found but could not use (a broken AgentRx ground truth, a broken SWE-bench results
    file), gathered from the trajectories they concern (``meta["import_warnings"]``: ``{kind, file, reason}``) for
    a command's summary: one line per file, however many trajectories it concerns. ``load_paths(warnings=...)``
    adds each trajectory an importer read, but none a canonical file carries (an earlier import said those)."""

    def __init__(self) -> None:
        self._files: dict[str, list] = {}  # file -> [kind, reason, trajectories concerned]
        self._empty = 0  # trajectories with no message and no event: a record that held no run
        self._first_empty: str | None = None

    def add(self, t: Trajectory) -> Trajectory:
        for w in t.meta.get("import_warnings") or ():
            if isinstance(w, dict) and isinstance(w.get("file"), str):
                seen = self._files.setdefault(w["file"], [w.get("kind"), w.get("reason"), 0])
                seen[2] += 1
        if not t.messages and not t.events:
            self._empty += 1
            self._first_empty = self._first_empty or t.id
        return t

    def files(self, kind: str | None = None) -> list[tuple[str, str]]:
        """(file, reason) of each file met, of ``kind`` when given."""
        return [(f, reason) for f, (k, reason, _) in self._files.items() if kind is None or k == kind]

    def lines(self, kind: str | None = None) -> list[str]:
        """``warning: FILE: REASON (N trajectories)``, one per file, in the order they were met; then (kind None or
        ``"empty"``) one line for the records that held no run: no message and no event (a tau-bench ``traj: []``,
        an empty tau2 simulation, an OTLP trace of HTTP spans only). Each is kept (an OpenHands run with an empty
        history is an empty run, not bad input), and its label can only come from its reward: said once, not
        silently."""
        out = [f"warning: {f}: {reason} ({n} trajector{'y' if n == 1 else 'ies'})"
               for f, (k, reason, n) in self._files.items() if kind is None or k == kind]
        if self._empty and kind in (None, "empty"):
            n = self._empty
            out.append(f"warning: {n} trajector{'y holds' if n == 1 else 'ies hold'} no message and no event (e.g. "
                       f"{self._first_empty}): a record with no run in it; kept, but its label can only come from "
                       "its reward")
        return out


class RepeatedIds:
    """Trajectories whose id an earlier one of the same command has (ids are made of file names: the same runs in
    two files, a trace file beside its imported copy, two runs in files of one name). Every command that reads them
    keeps each; what keys by id downstream (dataset enqueue and export, calibrate, a store) keeps the first, so the
    command says so in one line (``line``). Holds the ids seen: ~100 bytes a trajectory."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.n = 0
        self.first: str | None = None

    def add(self, t: Trajectory) -> Trajectory:
        if t.id in self._seen:
            self.n += 1
            self.first = self.first or t.id
        else:
            self._seen.add(t.id)
        return t

    def line(self, total: int, kept: str) -> str | None:
        """``warning: N of TOTAL trajectories have the id of an earlier one (...)``; ``kept``: what the command did
        with them ("all are written", "each is counted"). None when no id came twice."""
        if not self.n:
            return None
        return (f"warning: {self.n} of {total} trajectories have the id of an earlier one (e.g. {self.first}: the "
                f"same runs in two files, or two runs in files of the same name?); {kept}, but what keys by id "
                "(dataset enqueue and export, calibrate) keeps one of each")


def load_single(path: Path, data: Any, convert: Callable[[Path, Any], Trajectory], *, skip_invalid: bool,
                on_invalid: OnInvalid | None) -> Iterator[Trajectory]:
    """For formats with one trajectory per JSON file: convert it, reporting a ValueError as bad input."""
    if data is None:
        data = read_json_file(path)
    try:
        yield convert(path, data)
    except ValueError as e:
        report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e)))


def report_invalid(skip_invalid: bool, on_invalid: OnInvalid | None, err: InputError) -> None:
    """Raise ``err`` unless skipping, in which case hand it to ``on_invalid``."""
    if not skip_invalid:
        raise err
    if on_invalid:
        on_invalid(err)


def convert_records(path: Path, records: Iterable[tuple[str, Any]], convert: Callable[[int, Any], Trajectory],
                    what: str, *, bad: Any = None, skip_invalid: bool = False,
                    on_invalid: OnInvalid | None = None) -> Iterator[Trajectory]:
    """``convert(n, record)`` of each ``(where, record)`` of a file of records, in order: a record that is ``bad``
    (its JSON did not parse) or that ``convert`` refuses (``ValueError``; a pydantic ``ValidationError`` is "bad
    ``what``: ...") is one ``InputError`` naming the file and where, raised or handed on (``report_invalid``)."""
    from pydantic import ValidationError

    from evoharness.traces.store import _describe

    for n, (where, rec) in enumerate(records):
        try:
            if rec is bad:
                raise ValueError("invalid JSON (truncated or not JSON)")
            yield convert(n, rec)
        except ValidationError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), f"bad {what}: {_describe(e)}", where=where))
        except ValueError as e:
            report_invalid(skip_invalid, on_invalid, InputError(str(path), str(e), where=where))


def load_bytes(body: bytes, fmt: str | None = None, *, source: str = "body",
               limit: int | None = None) -> list[Trajectory]:
    """The trajectories in one document held in memory (e.g. an HTTP request body), in any format.

    ``fmt`` None detects the format as for a file. The document goes through the same importer as a
    file would (a temporary file, removed afterwards), so every format and every check applies;
    errors name ``source`` instead of the temporary path. With ``limit``, more trajectories than that
    is an ``InputError``. Nothing beside the temporary file is joined with it (``neighbours``: no SWE-bench results
    or AgentRx ground truth from the server's temporary folder).
    """
    import tempfile

    if fmt is not None and fmt not in FORMATS:
        raise InputError(source, f"unknown format {fmt!r} (formats: {', '.join(FORMAT_NAMES)})")
    with tempfile.TemporaryDirectory(prefix="evoharness-body-") as tmp, neighbours.alone():
        path = Path(tmp) / f"{source}.json"  # JSON lines or one document by its content, as for a file (``load_file``)
        path.write_bytes(body)
        out: list[Trajectory] = []
        try:
            for t in load_file(path, fmt):
                out.append(t)
                if limit is not None and len(out) > limit:
                    raise InputError(source, f"more than {limit} trajectories in one document")
        except InputError as e:
            raise InputError(source, e.reason.replace(str(path), source), e.where) from None
        return out
