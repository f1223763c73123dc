"""classify_tool_error skips a pattern whose literals a text lacks (``gate_text``): it must name what the three regexes
name, on ASCII text and on text with other characters (those that fold onto an ASCII letter among them)."""

from __future__ import annotations

import random

from evoharness.traces.patterns import INFRA_ERROR, INVALID_ARGS, UNKNOWN_TOOL, classify_tool_error

PIECES = ["connection refused", "Connection RESET", "connection error", "timed out", "time out", "TIMEOUT", "timedout",
          "rate limit", "Rate-Limit", "ratelimit", "too many requests", "Service Unavailable", "internal server error",
          " 502 ", "503", "(504)", "5023", "APIConnectionError", "temporarily unavailable", "sandbox crashed",
          "sandbox died", "unknown tool", "Unknown Function", "no such tool", "not a valid tool", "tool f is not found",
          "tool x not available", "function bar not found", "invalid json", "Invalid arguments", "missing 2 required",
          "missing required", "unexpected keyword", "validation error", "required argument", "required property",
          "could not parse arguments", "malformed tool call", "TypeError", "Error:", "reservation", "not", "x", "\n",
          "\u017fervice unavailable", "\u212a", "\u0130", "é", "50", "tool", "function", "required", "time",
          "unexpected \u212aeyword", "t\u0131med out", "connect\u0130on refused", "ü", "\u00b5"]


def _regexes(text: str) -> str:
    for pattern, kind in ((INFRA_ERROR, "tool_infra_error"), (UNKNOWN_TOOL, "unknown_tool"),
                          (INVALID_ARGS, "invalid_arguments")):
        if pattern.search(text):
            return kind
    return "tool_error"


def test_classify_tool_error_names_what_its_regexes_name():
    rng = random.Random(3)
    kinds = set()
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) + rng.choice(["", " ", "_", "-", "."]) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.3:
            text = text.upper() if rng.random() < 0.5 else text.swapcase()
        kinds.add(classify_tool_error(text))
        assert classify_tool_error(text) == _regexes(text), text
    assert kinds == {"tool_infra_error", "unknown_tool", "invalid_arguments", "tool_error"}
    assert classify_tool_error("\u017fervice unavailable") == "tool_infra_error"  # re folds U+017F to s
