"""Exporters: where records go. Each writes one format into an output directory.

The contract (``Exporter``): ``write(record, meta, arguments)`` is called once per record, in order, with an
OpenAI chat record (``{"messages", "tools"}``, already valid), its provenance row and the values of its calls'
argument texts, parsed already (a writer needing them as values does not parse them again); ``close()``
finishes the files and returns their names relative to the output directory. Writers stream: they
hold at most one record (the HF writer stages rows on disk and converts at the end).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from json.encoder import c_make_encoder, encode_basestring
from pathlib import Path
from typing import Any, Protocol

import orjson
import pydantic_core

from evoharness.errors import InputError
from evoharness.traces.models import loads

from .llamafactory import function_call_value


class Exporter(Protocol):
    def write(self, record: dict, meta: dict, arguments: Mapping[str, Any] = ...) -> None:
        """``arguments``: argument texts of the record's calls with their values, parsed already (a writer that
        needs a call's arguments as a value looks there before parsing a text; a text not there is parsed)."""

    def close(self) -> list[str]: ...

    def abort(self) -> None:
        """A failed export: close the files without finishing them, raising nothing (a full disk fails a close's
        flush again); the export removes its staging directory after this."""


# ``json.dumps(value, ensure_ascii=False)`` with its C encoder built once (``dumps`` builds an encoder and a C
# encoder per call): the same text. No circular check, so only for values made of parsed JSON (acyclic)
_ENCODE_C = c_make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ": ", ", ", False, False,
                           True) if c_make_encoder is not None else None


def _dumps(value) -> str:
    if _ENCODE_C is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "".join(_ENCODE_C(value, 0))


_NONE: Mapping[str, Any] = {}
WRITE_BUFFER = 1 << 20  # bytes buffered per data file (the reader's buffer too: ``traces.store.jsonl_lines``)
_MISSING = object()


def _parsed(arguments: str, known: Mapping[str, Any] = _NONE):
    """``json.loads(arguments)`` (a record's arguments are valid JSON: the exporter checked them): the value in
    ``known`` when the text was parsed before (``chat.record_and_arguments``)."""
    value = known.get(arguments, _MISSING)
    if value is not _MISSING:
        return value
    try:
        return loads(arguments)
    except StopIteration:
        raise ValueError(f"arguments are not JSON: {arguments[:40]!r}") from None


def _dump(obj) -> bytes:
    """One compact JSON line: the bytes ``pydantic_core.to_json(obj) + b"\\n"`` gives, for a value without NaN or
    infinite floats (to_json writes ``NaN``/``Infinity``, orjson ``null``): a record's messages (strings and
    None only), a ShareGPT record (strings), a provenance row (its score is validated to lie in [0, 1]).
    orjson runs ~5x fewer instructions; what it refuses (an integer beyond 64 bits, a lone surrogate) goes
    to to_json, which writes it or raises as before."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError
        return pydantic_core.to_json(obj) + b"\n"


def _dump_value(obj) -> bytes:
    """``_dump(obj)`` without its newline (not a copy of it less its last byte)."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # orjson.JSONEncodeError
        return pydantic_core.to_json(obj)


def fingerprint(value) -> int:
    """``value``'s compact JSON (``_dump_value``) as one int: its length and Python's keyed 64-bit hash of the bytes
    (SipHash, keyed per process): equal for values that serialise alike, which is how an export finds a record
    identical to an earlier one. Two different records of one length match by chance about once in 2**64 pairs (a
    million records: ~3e-8). ~110k instructions a tau-bench row (~17 KB), the JSON most of it; a 16-byte blake2b
    digest of the same bytes cost ~150k, hashing the texts without the JSON (a tuple of them) as much as this."""
    dumped = _dump_value(value)
    return hash(dumped) ^ (len(dumped) << 64)


# orjson writes only the plain JSON types itself (no dataclass, datetime or subclass: their bytes could differ from
# to_json's); anything else raises, and goes to to_json
_PLAIN_ONLY = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def _dump_tools(tools: list) -> bytes:
    """``pydantic_core.to_json(tools)``: the same bytes, by orjson where that is certain (~3x fewer instructions
    on tau-bench's declarations). A declaration is the trajectory's (parsed JSON, where a NaN may stand) or its
    environment's (Python values): orjson writes a NaN or an infinity as ``null`` where to_json writes ``NaN``,
    so a text holding ``null`` is written again by to_json, as is one orjson refuses (a big integer, a lone
    surrogate, a key that is no string, a value of any other type)."""
    try:
        out = orjson.dumps(tools, option=_PLAIN_ONLY)
    except TypeError:  # orjson.JSONEncodeError
        return pydantic_core.to_json(tools)
    return pydantic_core.to_json(tools) if b"null" in out else out


def record_line(record: dict) -> bytes:
    """``{"messages", "tools"}`` as one line: ``tools`` by ``_dump_tools``, the messages (only strings) by
    ``_dump_value``: the bytes to_json gives the whole. Joined once: each ``+`` copied the line so far (~17 KB a
    tau-bench row, four times)."""
    return b"".join((b'{"messages":', _dump_value(record["messages"]), b',"tools":',
                     _dump_tools(record["tools"]), b"}\n"))


_dump_record = record_line


def line_key(line: bytes) -> int:
    """``fingerprint`` of the record whose line (``record_line``) is ``line``: the line's length and keyed hash,
    so an export that writes the line hashes it rather than serialising the record a second time for the check
    (~17 KB a tau-bench row). Two records have one key exactly when their lines, the bytes written, are the same,
    which is what a duplicate record is (docs/datasets.md); the keys of ``fingerprint`` and ``line_key`` are not
    compared with each other (one export uses one of them)."""
    return hash(line) ^ (len(line) << 64)


def _close_quietly(*files) -> None:
    """Close each file; an error flushing what it buffered (a full disk, again) is dropped: the caller is failing
    already, and the file is closed either way (a buffered file closes its descriptor after a failed flush)."""
    for f in files:
        try:
            f.close()
        except OSError:
            pass


class OpenAIWriter:
    """``data.jsonl``: OpenAI chat fine-tuning records; ``metadata.jsonl``: provenance, line by line. Opened on a
    split (``train``, ``validation``): ``<split>.jsonl`` and ``<split>.metadata.jsonl``."""

    def __init__(self, out: Path, split: str | None = None) -> None:
        self.out = out
        self.files = [f"{split}.jsonl", f"{split}.metadata.jsonl"] if split else ["data.jsonl", "metadata.jsonl"]
        # a tau-bench row is ~17 KB: with the default 8 KB buffer each one was a write(2) of its own
        self._data = (out / self.files[0]).open("wb", buffering=WRITE_BUFFER)
        self._meta = (out / self.files[1]).open("wb")

    def write(self, record: dict, meta: dict, arguments: Mapping[str, Any] = _NONE) -> None:
        self._data.write(_dump_record(record))
        self._meta.write(_dump(meta))

    def write_line(self, line: bytes, meta: dict) -> None:
        """``write`` of the record whose ``record_line`` is ``line``, made already."""
        self._data.write(line)
        self._meta.write(_dump(meta))

    def close(self) -> list[str]:  # idempotent
        try:
            self._data.close()
        finally:
            self._meta.close()
        return list(self.files)

    def abort(self) -> None:
        _close_quietly(self._data, self._meta)


def to_sharegpt(record: dict, arguments: Mapping[str, Any] = _NONE, notes: set[str] | None = None) -> dict:
    """LLaMA-Factory's ShareGPT layout: ``system``, ``tools`` (JSON string) and ``conversations`` whose
    turns alternate human|observation and gpt|function_call. Consecutive user messages merge; the
    results of one assistant turn merge into one observation (a JSON list when several); an assistant
    turn with both text and calls becomes a function_call turn ``TEXT<tool_call>CALLS</tool_call>``
    (``llamafactory.function_call_value``; until 2026-12-06 ``{"content", "calls"}``, which LLaMA-Factory cannot
    read). ``arguments``: argument texts already parsed, with their values (not parsed again). ``notes``, when given,
    gets ``"text_with_calls"`` for a record with such a turn and ``"calls_unreadable"`` for one with a function_call
    turn that LLaMA-Factory would not read back as written (its text or calls hold the tool-call words)."""
    system = "\n\n".join(m["content"] for m in record["messages"] if m["role"] == "system")
    turns: list[dict] = []
    results: list[str] = []

    def add(who: str, value: str) -> None:
        if turns and turns[-1]["from"] == who == "human":
            turns[-1]["value"] += "\n\n" + value
        else:
            turns.append({"from": who, "value": value})

    def flush_results() -> None:
        if results:
            add("observation", results[0] if len(results) == 1 else _dumps(results))
            results.clear()

    for m in record["messages"]:
        role = m["role"]
        if role == "tool":
            results.append(m["content"])
            continue
        flush_results()
        if role == "user":
            add("human", m["content"])
        elif role == "assistant":
            if turns and turns[-1]["from"] in ("gpt", "function_call"):
                add("human", "")  # two assistant turns in a row: keep the alternation visible
            calls = [{"name": c["function"]["name"], "arguments": _parsed(c["function"]["arguments"], arguments)}
                     for c in m.get("tool_calls") or []]
            if calls:
                value, readable = function_call_value(m.get("content"), _dumps(calls[0] if len(calls) == 1 else calls))
                if notes is not None:
                    if m.get("content"):
                        notes.add("text_with_calls")
                    if not readable:
                        notes.add("calls_unreadable")
                add("function_call", value)
            else:
                add("gpt", m["content"])
    flush_results()
    if turns and turns[0]["from"] not in ("human", "observation"):
        turns.insert(0, {"from": "human", "value": ""})
    tools = [t["function"] for t in record["tools"]]
    return {"conversations": turns, "system": system, "tools": _dumps(tools)}


class ShareGPTWriter(OpenAIWriter):
    """``text_with_calls``: the records written with a ``function_call`` turn of text and calls
    (``TEXT<tool_call>CALLS</tool_call>``, which only a LLaMA-Factory template that passes its tool-call words reads;
    docs/datasets.md); ``calls_unreadable``: the records with a function_call turn LLaMA-Factory cannot read back as
    written (the text or the calls hold the tool-call words). Counted so the export says so instead of leaving it to
    a failed training run."""

    text_with_calls = 0
    calls_unreadable = 0

    def write(self, record: dict, meta: dict, arguments: Mapping[str, Any] = _NONE) -> None:
        notes: set[str] = set()
        self._data.write(_dump(to_sharegpt(record, arguments, notes)))
        self._meta.write(_dump(meta))
        if notes:
            self.text_with_calls += "text_with_calls" in notes
            self.calls_unreadable += "calls_unreadable" in notes


META_COLUMNS = ("id", "task_id", "split", "failure_class", "first_signal", "harness_commit", "model",
                "source", "run_id", "env")


def hf_features():
    from datasets import Features, Value

    call = {"id": Value("string"), "type": Value("string"),
            "function": {"name": Value("string"), "arguments": Value("string")}}
    message = {"role": Value("string"), "content": Value("string"),
               "tool_calls": [call], "tool_call_id": Value("string")}
    cols = {"messages": [message], "tools": Value("string")}
    cols.update({c: Value("string") for c in META_COLUMNS})
    cols.update({"score": Value("float64"), "round": Value("int64"), "placebo": Value("bool")})
    return Features(cols)


def _require_datasets():
    try:
        import datasets  # noqa: F401
    except ModuleNotFoundError:
        raise InputError("--format hf", "needs the `datasets` package (pip install datasets)") from None


class HFWriter:
    """Hugging Face ``datasets`` parquet: ``data/train-00000-of-00001.parquet``.

    Rows are staged as JSONL on disk and converted with ``datasets.Dataset.from_json`` (memory-mapped
    Arrow) and ``to_parquet``. Messages carry all four fields (``content``/``tool_calls``/
    ``tool_call_id`` null where absent) so every row has one schema; ``tools`` is a JSON string.
    """

    PARQUET = "data/train-00000-of-00001.parquet"
    SPLIT_PARQUET = "data/{split}-00000-of-00001.parquet"  # opened on a split (train: PARQUET)

    def __init__(self, out: Path, split: str | None = None) -> None:
        _require_datasets()
        self.out = out
        self.parquet = self.SPLIT_PARQUET.format(split=split) if split else self.PARQUET
        self._stage_dir = out / (f"hfstage-{split}" if split else "hfstage")
        self._stage_dir.mkdir(exist_ok=True)
        self._stage = (self._stage_dir / "rows.jsonl").open("wb", buffering=WRITE_BUFFER)
        self.n = 0
        self._closed = False

    def write(self, record: dict, meta: dict, arguments: Mapping[str, Any] = _NONE) -> None:
        messages = [{"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
                     "tool_call_id": m.get("tool_call_id")} for m in record["messages"]]
        row = {"messages": messages, "tools": _dumps(record["tools"])}
        row.update({c: meta.get(c) for c in META_COLUMNS})
        row.update({"score": meta.get("score"), "round": meta.get("round"), "placebo": meta.get("placebo")})
        self._stage.write(_dump(row))
        self.n += 1

    def abort(self) -> None:  # the rows staged are not converted: the staging directory goes with the export's
        self._closed = True
        _close_quietly(self._stage)

    def close(self) -> list[str]:
        from datasets import Dataset
        from datasets.utils import logging as ds_logging

        if self._closed:
            return [self.parquet]
        self._closed = True
        self._stage.close()
        target = self.out / self.parquet
        target.parent.mkdir(parents=True, exist_ok=True)
        bars = ds_logging.is_progress_bar_enabled()
        ds_logging.disable_progress_bar()
        try:
            if self.n:
                ds = Dataset.from_json(str(self._stage_dir / "rows.jsonl"), features=hf_features(),
                                       cache_dir=str(self._stage_dir / "cache"))
            else:
                ds = Dataset.from_dict({k: [] for k in hf_features()}, features=hf_features())
            ds.to_parquet(str(target))
            del ds
        finally:
            if bars:
                ds_logging.enable_progress_bar()
            shutil.rmtree(self._stage_dir, ignore_errors=True)
        return [self.parquet]
