"""How long an exported record is in tokens: what a fine-tuning run's ``max_seq_length`` (TRL's ``max_length``,
axolotl's ``sequence_len``, LLaMA-Factory's ``cutoff_len``) is compared with.

Two counters behind one small protocol:

- ``ChatTemplateTokens(DIR)``: the base model's own tokenizer, read from local files (a Hugging Face tokenizer
  directory or model snapshot: ``tokenizer.json``, ``tokenizer_config.json`` with its ``chat_template``; never a hub
  download), counting the tokens of the record rendered by the model's chat template with its tools, each call's
  arguments parsed into the object templates expect (as TRL's loading step and ``ops/train/sft_lora.py`` do): the
  length the trainer sees.
- ``ApproxTokens``: no tokenizer given. The record's JSON line's UTF-8 bytes over ``BYTES_PER_TOKEN`` (3), rounded
  up: meant as an upper estimate. Measured against SmolLM2-135M-Instruct's tokenizer (a 49k vocabulary; larger
  vocabularies such as Qwen2.5's or Llama 3's give fewer tokens) on the 200 tau-bench airline rows rendered as
  ChatML with their tools: 3.61 bytes of the line per token (median; 2.93-4.84), so bytes / 3 was at or above the
  count for 198 of 200 rows. Text in scripts that take more bytes per character (CJK) or less JSON escaping may go
  below it: give ``--tokenizer`` for a count that holds.
"""

from __future__ import annotations

import json
import math
import os
import threading
from array import array
from pathlib import Path
from typing import Protocol

from evoharness.errors import InputError

from .formats import record_line

BYTES_PER_TOKEN = 3


class TokenCounter(Protocol):
    """Counts the tokens of a record (``{"messages", "tools"}``, the OpenAI export's record). ``count`` raises
    ``TemplateFailed`` when the record cannot be rendered (a template that refuses two calls in one turn); ``method``
    is what the card says the lengths are."""

    method: str
    exact: bool

    def count(self, record: dict, line: bytes | None = None) -> int: ...


class TemplateFailed(Exception):
    """The chat template raised on this record: a trainer using it cannot tokenize the record either."""


class ApproxTokens:
    """UTF-8 bytes of the record's JSON line over ``BYTES_PER_TOKEN``, rounded up (``line``: that line when the
    export made it already)."""

    method = f"approximate: UTF-8 bytes of the record's JSON line / {BYTES_PER_TOKEN}, rounded up (no --tokenizer)"
    exact = False

    def count(self, record: dict, line: bytes | None = None) -> int:
        line = line if line is not None else record_line(record)
        return math.ceil((len(line) - line.endswith(b"\n")) / BYTES_PER_TOKEN)


class ChatTemplateTokens:
    """The tokens of a record rendered by a local tokenizer's chat template (``apply_chat_template(messages,
    tools=tools, tokenize=True)``, arguments parsed), with transformers. ``path``: a tokenizer directory (or a model
    snapshot holding one); loaded with ``local_files_only``, so nothing is downloaded. ``option``: how the caller
    names the setting, for its errors."""

    exact = True

    def __init__(self, path: Path | str, option: str = "--tokenizer") -> None:
        path = Path(path)
        if not path.is_dir():
            raise InputError(option, f"{path}: " + ("not a directory: give the directory that holds tokenizer.json "
                                                    "and tokenizer_config.json (a model snapshot)"
                                                    if path.exists() else "no such directory"))
        if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
            # transformers' own words for this were four lines, the first 'Couldn't instantiate the backend
            # tokenizer from one of:', which the error line ended on
            raise InputError(option, f"{path}: holds no tokenizer.json or tokenizer_config.json: give the directory "
                                     "of the base model's Hugging Face tokenizer (a model snapshot)")
        try:
            AutoTokenizer = _transformers_auto_tokenizer()
        except ImportError:
            raise InputError(option, "needs the transformers package (pip install transformers; no torch needed): "
                                     "without --tokenizer the lengths are approximate") from None
        try:
            self.tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except Exception as e:  # noqa: BLE001 (transformers raises OSError, ValueError, KeyError... for a bad dir)
            said = " ".join(str(e).split()) or type(e).__name__  # its message, often several lines, as one
            raise InputError(option, f"{path}: cannot load a tokenizer from it: {said[:400]}") from None
        if not getattr(self.tok, "chat_template", None):
            raise InputError(option, f"{path}: the tokenizer has no chat template (tokenizer_config.json's "
                                     "chat_template, or chat_template.jinja): a conversation's length is that of its "
                                     "rendering; give the chat (instruct) model's tokenizer")
        self.method = f"{type(self.tok).__name__} of {path} through its chat template, tools included"
        # the service keeps one for its exports, which run in worker threads: a fast tokenizer's Rust side refuses
        # a second borrow while one is in use ('Already borrowed')
        self._lock = threading.Lock()

    def count(self, record: dict, line: bytes | None = None) -> int:
        messages = [_parsed(m) for m in record["messages"]]
        try:
            with self._lock:
                ids = self.tok.apply_chat_template(messages, tools=record.get("tools") or None, tokenize=True,
                                                   return_dict=False)
        except Exception as e:  # noqa: BLE001 (a template's raise_exception, a jinja error: the record's, not ours)
            raise TemplateFailed(next((x for x in str(e).splitlines() if x.strip()), type(e).__name__)) from None
        if ids and isinstance(ids[0], list):  # a batch of one
            ids = ids[0]
        return len(ids)


def tokenizer_files(path: Path | str) -> tuple | None:
    """What a loaded tokenizer of ``path`` is kept by: the directory's real path and each regular file's name, size and
    modification time (a Hugging Face snapshot's files are links to blobs: followed). None when it cannot be read."""
    try:
        real = Path(path).resolve()
        with os.scandir(real) as entries:
            files = sorted((e.name, st.st_size, st.st_mtime_ns) for e in entries
                           if e.is_file() and (st := e.stat()))
    except OSError:
        return None
    return str(real), tuple(files)


def _transformers_auto_tokenizer():
    """transformers' ``AutoTokenizer``, imported without its advice "PyTorch was not found. Models won't be available
    ..." on stderr: a token count needs no torch, and the line preceded every `--tokenizer` export's output and its
    error line alike (``TRANSFORMERS_NO_ADVISORY_WARNINGS``, read while transformers is imported, then restored)."""
    key = "TRANSFORMERS_NO_ADVISORY_WARNINGS"
    before = os.environ.get(key)
    os.environ[key] = "1"
    try:
        from transformers import AutoTokenizer
    finally:
        if before is None:
            del os.environ[key]
        else:
            os.environ[key] = before
    return AutoTokenizer


def _parsed(message: dict) -> dict:
    """The message with each call's arguments as the object chat templates expect (the export writes a JSON text)."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    out = []
    for call in calls:
        fn = call["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        out.append({**call, "function": {**fn, "arguments": args}})
    return {**message, "tool_calls": out}


class Lengths:
    """The token lengths of one split's records, one 4-byte unsigned int each (memory: 400 KB per 100,000 records;
    until 2026-12-06 a C long, 8 bytes, though this said 4). A length past 2**32 - 1 tokens (a record of ~12 GB at
    3 bytes a token) would raise OverflowError."""

    def __init__(self) -> None:
        self.values = array("I")

    def add(self, n: int) -> None:
        self.values.append(n)

    def stats(self, limit: int | None) -> dict[str, float | int]:
        """records, min, median, p95, max, mean, total, and with ``limit`` how many are over it."""
        v = sorted(self.values)
        if not v:
            return {"records": 0}
        out: dict[str, float | int] = {
            "records": len(v), "min": v[0], "median": v[(len(v) - 1) // 2], "p95": v[math.ceil(0.95 * len(v)) - 1],
            "max": v[-1], "mean": round(sum(v) / len(v), 1), "total": sum(v)}
        if limit is not None:
            out["over_max_tokens"] = sum(1 for x in v if x > limit)
        return out
