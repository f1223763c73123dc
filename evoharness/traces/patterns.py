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


def classify_tool_error(text: str) -> str:
    """Event type for an error-looking tool result."""
    if INFRA_ERROR.search(text):
        return "tool_infra_error"
    if UNKNOWN_TOOL.search(text):
        return "unknown_tool"
    if INVALID_ARGS.search(text):
        return "invalid_arguments"
    return "tool_error"
