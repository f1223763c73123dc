"""The export formats: name -> `FormatEntry` (its writer, its validator and its dataset-card text).

``dataset export --format NAME`` and ``dataset validate --format NAME`` look the name up here; an
unknown name is one error listing the valid ones (nothing falls through to a default writer). A new
format is its writer (and validator) in its own module plus one ``EXPORT_FORMATS.register`` below.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evoharness.errors import InputError
from evoharness.registry import Registry

from .formats import Exporter, HFWriter, OpenAIWriter, ShareGPTWriter
from .llamafactory import sharegpt_info
from .validate import openai_errors, sharegpt_errors, validate_file

if TYPE_CHECKING:
    from .models import RequestNames


@dataclass(frozen=True)
class FormatEntry:
    writer: Callable[..., Exporter]  # opened on the output directory (and, with a validation split, on a split name)
    data_file: str  # where the records land, relative to the output directory
    validate: Callable[[Path], tuple[int, list[str]]]  # a data file -> (records, problems 'line N: ...')
    card: str  # what the dataset card says about the layout
    # LLaMA-Factory's dataset_info.json for the export's data files ({split: path}); None: the format gets none
    dataset_info: Callable[[dict[str, str]], dict] | None = None
    # where a split's records land (``{split}``: train, validation), for ``--val-fraction``; None: the format has none
    split_file: str | None = None
    # the optional package the writer needs (hf: ``datasets``), checked before any is opened; None: none
    needs: str | None = None


def _jsonl(check: Callable[[dict], list[str]]) -> Callable[[Path], tuple[int, list[str]]]:
    return lambda path: validate_file(path, check)


def hf_row_errors(row: dict) -> list[str]:
    """A parquet row checked as the OpenAI record it was written from (null message fields dropped)."""
    try:
        tools = json.loads(row.get("tools") or "[]")
    except (TypeError, ValueError):
        return ["tools: not a JSON string"]
    messages = row.get("messages") or []
    if not isinstance(messages, list):
        return ["messages: not a list"]
    messages = [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in messages]
    return openai_errors({"messages": messages, "tools": tools})


def validate_parquet(path: Path) -> tuple[int, list[str]]:
    try:
        import pyarrow.parquet as pq  # optional: installed with `datasets`
    except ModuleNotFoundError:
        raise InputError("--format hf", "needs the `datasets` package (pip install datasets)") from None
    n, problems = 0, []
    try:
        data = pq.ParquetFile(path)
    except (ValueError, OSError) as e:  # pyarrow's ArrowInvalid is a ValueError: not parquet, or cut short
        raise InputError(str(path), f"not a parquet file ({str(e).splitlines()[0][:200]})") from None
    for batch in data.iter_batches(batch_size=256):
        for row in batch.to_pylist():
            n += 1
            problems += [f"row {n}: {e}" for e in hf_row_errors(row)]
    return n, problems


EXPORT_FORMATS: Registry[FormatEntry] = Registry("export format", "--format")
EXPORT_FORMATS.register("openai", FormatEntry(
    writer=OpenAIWriter, data_file="data.jsonl", validate=_jsonl(openai_errors), split_file="{split}.jsonl",
    card="OpenAI chat fine-tuning JSONL: one `{\"messages\", \"tools\"}` object per line (assistant "
    "`tool_calls`, `tool` results with `tool_call_id`). `metadata.jsonl` holds the provenance of each "
    "record, line by line."))
EXPORT_FORMATS.register("hf", FormatEntry(
    writer=HFWriter, data_file=HFWriter.PARQUET, validate=validate_parquet, split_file=HFWriter.SPLIT_PARQUET,
    needs="datasets",
    card="Hugging Face `datasets` parquet: `messages` (role, content, tool_calls, tool_call_id), `tools` "
    "(a JSON string: a list column of structs would merge every row's tool schemas into one type; for TRL, which "
    "passes `tools` to `apply_chat_template`, decode it with `ds.cast_column(\"tools\", datasets.Json())`, not "
    "`map(json.loads)`, which merges them again) and one provenance column per field."))
EXPORT_FORMATS.register("sharegpt", FormatEntry(
    writer=ShareGPTWriter, data_file="data.jsonl", validate=_jsonl(sharegpt_errors), split_file="{split}.jsonl",
    card="ShareGPT (LLaMA-Factory layout): `conversations` alternating human|observation and "
    "gpt|function_call, plus `system` and `tools` (a JSON string). `metadata.jsonl` holds the provenance "
    "of each record, line by line. `dataset_info.json` describes the data for LLaMA-Factory: `dataset_dir: DIR` "
    "and `dataset: evoharness` in its training YAML.",
    dataset_info=sharegpt_info))


def open_writer(fmt: str, out: Path, split: str | None = None, names: RequestNames | None = None) -> Exporter:
    """The format's writer on ``out``; with ``split`` (train, validation), the one writing that split's files.
    ``names``: how the request spells its format and split (default: the CLI's options)."""
    fmt_name, split_name = (names.format, names.val_fraction) if names else ("--format", "--val-fraction")
    entry = EXPORT_FORMATS.get(str(fmt))
    if entry.needs:
        try:
            importlib.import_module(entry.needs)
        except ModuleNotFoundError:  # a service's client was told of a CLI option it never sent ("--format hf")
            raise InputError(f"{fmt_name} {fmt}", f"needs the `{entry.needs}` package (pip install "
                             f"{entry.needs})") from None
    out.mkdir(parents=True, exist_ok=True)
    if split is None:
        return entry.writer(out)
    if entry.split_file is None:
        raise InputError(split_name, f"the {fmt} format writes no split files")
    return entry.writer(out, split)
