"""Built-in tool-call repair (``repair_tool_calls: true``): salvage malformed JSON and arg names."""

from __future__ import annotations

import ast
import difflib
import json
from typing import Any

MAX_REPAIR_CHARS = 100_000


def repair_json(raw: str) -> dict[str, Any] | None:
    """A dict from arguments that are not valid JSON, or None when nothing sensible can be recovered.

    Handles Python-literal dicts (single quotes, True/None), trailing text after the object, and
    a missing closing brace.
    """
    text = (raw or "").strip()
    if not text:
        return {}
    if len(text) > MAX_REPAIR_CHARS:
        return None
    candidates = [text, text + "}", text + "\"}"]
    for cand in candidates:
        try:
            obj, _ = json.JSONDecoder().raw_decode(cand)
            if isinstance(obj, dict):
                return obj
        except json.JSONDecodeError:
            pass
        try:
            obj = ast.literal_eval(cand)
            if isinstance(obj, dict):
                return {str(k): v for k, v in obj.items()}
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return None


def repair_arg_names(args: dict[str, Any], schema: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """Rename unknown argument names to the closest parameter of ``schema`` that is not yet given.

    Returns the new args and the renames made (old -> new).
    """
    props = list(((schema or {}).get("parameters") or {}).get("properties") or {})
    if not props:
        return args, {}
    out, renames = {}, {}
    for k, v in args.items():
        if k in props:
            out[k] = v
            continue
        free = [p for p in props if p not in args and p not in out]
        match = difflib.get_close_matches(k.lower().replace("-", "_"), free, n=1, cutoff=0.5)
        if match:
            out[match[0]] = v
            renames[k] = match[0]
        else:
            out[k] = v
    return out, renames
