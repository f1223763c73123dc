"""Text patterns that recognise harness friction and infrastructure faults in tool output."""

from __future__ import annotations

import re

INFRA_ERROR = re.compile(
    r"(connection (refused|reset|error)|timed? ?out|rate.?limit|too many requests|"
    r"service unavailable|internal server error|\b50[234]\b|APIConnectionError|"
    r"temporarily unavailable|sandbox (crashed|died))",
    re.IGNORECASE,
)
UNKNOWN_TOOL = re.compile(
    r"(unknown (tool|function)|no such (tool|function)|not a valid tool|tool .{0,40} (is )?not (found|available)"
    r"|function .{0,40} not found)",
    re.IGNORECASE,
)
INVALID_ARGS = re.compile(
    r"(invalid (json|arguments?)|missing (\d+ )?required|unexpected keyword|validation error|"
    r"required (argument|parameter|property)|could not parse arguments|malformed (tool call|arguments)|"
    r"TypeError)",
    re.IGNORECASE,
)


# A literal (lower case) that every match of each pattern holds: in ASCII text a pattern none of whose literals
# is in the lower-cased text cannot match, and its search (an IGNORECASE alternation tried at every character,
# ~100 instructions a character) is skipped. Other text is searched as it is: re's case-insensitive matching
# folds more than ``str.lower`` does (U+017F matches "s").
_NEEDS = (
    (INFRA_ERROR, ("connection", "time", "limit", "too many requests", "unavailable", "internal server error",
                   "50", "sandbox")),
    (UNKNOWN_TOOL, ("unknown", "no such", "not ")),
    (INVALID_ARGS, ("invalid", "required", "unexpected keyword", "validation error", "could not parse", "malformed",
                    "typeerror")),
)
_KINDS = ("tool_infra_error", "unknown_tool", "invalid_arguments")


def classify_tool_error(text: str) -> str:
    """Event type for an error-looking tool result."""
    low = text.lower() if text.isascii() else None
    for (pattern, needs), kind in zip(_NEEDS, _KINDS, strict=True):
        if (low is None or any(n in low for n in needs)) and pattern.search(text):
            return kind
    return "tool_error"
