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
import re
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


# A function_call turn: LLaMA-Factory's ``FunctionFormatter.apply`` (``data/formatter.py``) looks for the template's
# tool-call words (``Template.tool_call_words``; ``register_template`` gives every template ``<tool_call>`` /
# ``</tool_call>`` unless it names others) and, when they enclose the calls, trains on the text around them followed by
# the calls in the template's own tool format; without them the whole value must be the calls' JSON. (Added by its
# PR #9610, merged 2025-12-12; read and run here from the llamafactory 0.9.5 wheel.)
TOOL_CALL_WORDS = ("<tool_call>", "</tool_call>")
_THOUGHT_WORDS = ("<think>\n", "\n</think>\n\n")  # the template's default thought words, cut out before the JSON


def function_call_value(text: str | None, calls_json: str) -> tuple[str, bool]:
    """The value of a ``function_call`` turn for an assistant reply of ``text`` (None or empty: none) and calls
    ``calls_json`` (one ``{"name", "arguments"}`` object, or a list of them), and whether LLaMA-Factory reads it back as
    that text and those calls: ``TEXT<tool_call>CALLS</tool_call>`` when there is text (the text as the model wrote it,
    then its calls), the bare JSON when there is none (as before). Not readable: a text that holds ``<tool_call>``
    (the formatter would take it for the calls' start) or calls whose JSON holds ``</tool_call>`` (their end), and
    bare JSON holding both."""
    start, end = TOOL_CALL_WORDS
    if text:
        return f"{text}{start}{calls_json}{end}", start not in text and end not in calls_json
    return calls_json, not (start in calls_json and end in calls_json)


def function_call_problem(value: str) -> str | None:
    """Why LLaMA-Factory's function formatter (default tool-call and thought words) cannot read the ``function_call``
    value ``value`` as calls; None when it can. What it does: the JSON between the first ``<tool_call>`` and the next
    ``</tool_call>`` if both stand in the value, else the whole value less a thought block; ``json.loads`` of it, one
    call or a list; each call's ``name`` and ``arguments`` (a missing one: a KeyError that stops its preprocessing)."""
    start, end = (re.escape(w) for w in TOOL_CALL_WORDS)
    if found := re.search(f"{start}(.*?){end}", value, re.DOTALL):
        part = found.group(1)
    else:
        thought = re.search(f"{re.escape(_THOUGHT_WORDS[0])}(.*?){re.escape(_THOUGHT_WORDS[1])}", value, re.DOTALL)
        part = value.replace(thought.group(0), "") if thought else value
    try:
        calls = json.loads(part)
    except (ValueError, RecursionError):
        return "its calls are not JSON" + (" between <tool_call> and </tool_call>" if found else "")
    for call in calls if isinstance(calls, list) else [calls]:
        if not isinstance(call, dict) or "name" not in call or "arguments" not in call:
            return "a call without name and arguments"
    return None
