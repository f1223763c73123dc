"""LLaMA-Factory's ``dataset_info.json`` for a ShareGPT export: the description LLaMA-Factory reads before it loads a
dataset (``dataset_dir: DIR`` and ``dataset: evoharness`` in its training YAML).

LLaMA-Factory (``data/README.md``, ``src/llamafactory/data/parser.py``) reads, per dataset name: ``file_name``
(relative to ``dataset_dir``), ``formatting`` (``sharegpt``), ``columns`` (which column holds the turns, the system
prompt and the tool declarations) and ``tags`` (the keys and role values of a turn). A ``columns`` or ``tags`` object
it is given replaces its defaults entry by entry with ``None`` for what it leaves out, so both are written whole: every
column and every tag the export's rows use, as ``formats.to_sharegpt`` writes them.

Only ShareGPT gets one. The ``openai`` and ``hf`` exports keep a tool call in the assistant message's ``tool_calls``,
which LLaMA-Factory's ``sharegpt`` reader (role and content tags only) does not read: a tool-calling turn would reach
it with a null content.
"""

from __future__ import annotations

import json
from pathlib import Path

DATASET_INFO = "dataset_info.json"
NAME = "evoharness"  # the dataset name (``dataset: evoharness``); with a validation split, NAME_train / NAME_validation

SHAREGPT_COLUMNS = {"messages": "conversations", "system": "system", "tools": "tools"}
SHAREGPT_TAGS = {
    "role_tag": "from",
    "content_tag": "value",
    "user_tag": "human",
    "assistant_tag": "gpt",
    "observation_tag": "observation",
    "function_tag": "function_call",
    "system_tag": "system",
}


def sharegpt_info(data_files: dict[str, str]) -> dict:
    """``{name: description}`` for each data file of a ShareGPT export: ``{"train": "data.jsonl"}`` (one file) is the
    dataset ``evoharness``; with a validation split each split is one, ``evoharness_train`` and so on."""
    one = len(data_files) == 1
    return {
        NAME if one else f"{NAME}_{split}": {
            "file_name": path,
            "formatting": "sharegpt",
            "columns": dict(SHAREGPT_COLUMNS),
            "tags": dict(SHAREGPT_TAGS),
        }
        for split, path in data_files.items()
    }


def write_dataset_info(out: Path, info: dict) -> str:
    (out / DATASET_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return DATASET_INFO


def foreign_datasets(out: Path) -> str:
    """The datasets ``out``'s dataset_info.json describes that no export wrote (names, comma-separated; empty: none,
    or no file): an earlier export's file to which the user added their own datasets (LLaMA-Factory's data/README
    says to describe a dataset there), which replacing it would lose. A file that is not a JSON object is all
    theirs."""
    try:
        info = json.loads((out / DATASET_INFO).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ""
    except (OSError, ValueError):
        return "an unreadable file"
    if not isinstance(info, dict):
        return "not a JSON object"
    names = [k for k in info if k != NAME and not k.startswith(f"{NAME}_")]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
