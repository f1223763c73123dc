"""Text patterns that recognise harness friction and infrastructure faults in tool output."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoharness.traces.models import Trajectory

# how an importer writes the result of a call the *user* made on its own side (tau2 telecom: the customer's phone) as a
# user message: what the user saw, not what it said (``E.user_off_script`` reads the user's words only). The text is for
# a reader; which messages are such results is ``meta[USER_TOOL_RESULTS]`` (`user_tool_result_steps`), never the text:
# a message the user wrote may start with these words too
USER_TOOL_RESULT = "[result of the customer's call] "
USER_TOOL_RESULTS = "user_tool_results"  # meta key: the indexes of the messages that are results of the user's calls


def user_tool_result_steps(traj: Trajectory) -> frozenset[int]:
    """The indexes of ``traj``'s messages that hold the result of a call the user made on its own side, as its
    importer listed them (``meta[USER_TOOL_RESULTS]``). A tau2 trajectory imported before the list was kept (the
    thirteenth session) has none: there the user messages starting with ``USER_TOOL_RESULT`` are taken, as then."""
    meta = traj.meta if isinstance(traj.meta, dict) else {}
    listed = meta.get(USER_TOOL_RESULTS)
    if isinstance(listed, list):
        return frozenset(i for i in listed if isinstance(i, int) and not isinstance(i, bool))
    if meta.get("source_format") != "tau2":
        return frozenset()
    return frozenset(i for i, m in enumerate(traj.messages) if isinstance(m, dict) and m.get("role") == "user"
                     and isinstance(m.get("content"), str) and m["content"].startswith(USER_TOOL_RESULT))

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


# the characters outside ASCII that re's case-blind matching (``re.IGNORECASE``, a str pattern) takes for an ASCII
# letter: U+0130 and U+0131 for "i", U+017F for "s", the Kelvin sign U+212A for "k" (every other case pair of an ASCII
# letter is ASCII; tests/traces/test_traces_patterns_gate.py checks every code point). ``str.lower`` maps none of
# them to the letter alone (U+0130 becomes two characters), so a text holding one is searched as it is.
FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")


def gate_text(text: str) -> str | None:
    """``text.lower()`` where a word test on it is sound for a case-blind regex: when the text holds no
    ``FOLDS_TO_ASCII`` character (ASCII text never does), what an ASCII literal of the pattern matches is that literal
    in ASCII, in one case or the other, and lower-cased it is in ``text.lower()`` (``str.lower`` maps each character
    alone, and no other character's lower case is or holds an ASCII letter). So a pattern every match of which holds
    one of some lower-case ASCII words cannot match where none of them is in this. None otherwise: then the regex must
    be run. A text outside ASCII costs four C scans for the four characters, not the regex's ~100 instructions a
    character."""
    if text.isascii() or not any(f in text for f in FOLDS_TO_ASCII):
        return text.lower()
    return None


# Per pattern, a test of the lower-cased text (``gate_text``) that every text the pattern matches passes: the literals
# every match holds. A text that fails it cannot match, and its search (an IGNORECASE alternation tried at every
# character, ~100 instructions a character) is skipped. ``UNKNOWN_TOOL``'s "tool ... not found" and "function ... not
# found" hold "not " with "tool" or "function": "not " alone let tau-bench's "Error: flight HAT030 not available" and
# "... does not add up" (49 of tau-bench airline's 73 tool errors) through to the regex, ~3 M instructions of the 200
# records' import. Written as ``in`` tests joined by ``or`` (no generator: most texts fail every one).
_GATES = (
    lambda low: ("connection" in low or "time" in low or "limit" in low or "too many requests" in low
                 or "unavailable" in low or "internal server error" in low or "50" in low or "sandbox" in low),
    lambda low: "unknown" in low or "no such" in low or ("not " in low and ("tool" in low or "function" in low)),
    lambda low: ("invalid" in low or "required" in low or "unexpected keyword" in low or "validation error" in low
                 or "could not parse" in low or "malformed" in low or "typeerror" in low),
)
_KINDS = ("tool_infra_error", "unknown_tool", "invalid_arguments")
_CHECKS = tuple(zip((INFRA_ERROR, UNKNOWN_TOOL, INVALID_ARGS), _GATES, _KINDS, strict=True))


def classify_tool_error(text: str) -> str:
    """Event type for an error-looking tool result."""
    low = gate_text(text)
    for pattern, gate, kind in _CHECKS:
        if (low is None or gate(low)) and pattern.search(text):
            return kind
    return "tool_error"


# a multi-agent chat's closing word alone in a message (AG2 / AutoGen's ``TERMINATE``), as agents write it: bare, in
# markdown emphasis or code marks ("**TERMINATE**"), with a final full stop -- a control word, never an answer
_TERMINATE = re.compile(r"\s*[*_`]*\s*TERMINATE\s*[*_`]*\s*\.?\s*", re.IGNORECASE)


def is_terminate(text: str) -> bool:
    """``text`` is the closing word alone (``_TERMINATE``): no answer, no reasoning turn."""
    return _TERMINATE.fullmatch(text) is not None
