"""F1.elapsed_claim: a reply says a record is recent ("made within the last 24 hours") when the tools say it is not.

A time window ("within 24 hours of booking", "within 7 days") is a common policy condition, and the agent
decides it by reading a timestamp from a tool result against the current time. The rule:

- the current time is stated in a system message (``current time is 2024-05-15 15:00:00``, ``current date:
  2024-05-15``: a date year first -- ISO's, or with ``/`` or ``.`` -- and an optional ``HH:MM[:SS]``); without one the
  rule cannot judge and stays silent;
- a claim is a sentence of an assistant message (``WITHIN``) that puts a record inside a window of N hours or
  days: ``was / is / were / are / been`` (or ``it's``), up to two words, then ``within [the] [last|past|first]
  N hour(s) / day(s)`` or ``within [the] N-hour / N-day``; a negation (``not``, ``no longer``, ``n't``,
  ``never``) or a condition (``if``, ``unless``, ``whether``) up to three words before ``within`` makes it no
  claim ("I can cancel it only if it's within 24 hours"), and so does a window measured to another moment
  (``OTHER_ANCHOR``: "is within 24 hours of departure", "... before the flight");
- the record's time is the first creation timestamp (``CREATED``: a key holding ``created``, ``booked``,
  ``placed``, ``ordered`` or ``purchased`` with a date-time value written so) of the latest tool result before the
  reply that has one;
- it contradicts the tools when the current time minus that timestamp is more than the window. The signal is
  at that reply (the agent's misreading, or its taking the user's word over the tool's).

Timestamps and the current time are compared as written (no time zones: a benchmark states both in its own
clock). Healthy runs are skipped (their label cannot change). Patterns are literal with bounded repeats; the
scan starts only at the word ``within``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.failed_only import FailedRunDetector
from evoharness.diagnosis.models import FailureClass, Signal

# a date written year first, as an API or a log writes it: ISO's ``2024-05-15``, or ``2024/05/15``, ``2024.05.15``
# (the order is never in doubt when the year leads); then an optional ``HH:MM[:SS]``
ISO_TIME = r"(\d{4})[-/.](\d\d)[-/.](\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d))?)?"
NOW = re.compile(r"current (?:time|date)(?: and date| and time)?\s*(?:is|:)?\s*" + ISO_TIME, re.I)
WITHIN = re.compile(r"\b(?:was|is|were|are|been|it's|it’s)\s+(?:[a-z-]{1,20}\s+){0,2}?within\s+(?:the\s+)?"
                    r"(?:(?:last|past|first)\s+)?(\d{1,3}|a|one)[\s-]+(hour|day)s?\b")
# a window measured to another moment than the record's creation ("within 24 hours of departure", "... before the
# flight"): a claim about that moment, which a creation time cannot contradict
OTHER_ANCHOR = re.compile(r"\s+(?:of|before|until|prior to|to)\s+(?:the\s+|your\s+|its\s+|their\s+|this\s+)?"
                          r"(?:scheduled\s+)?(?:departure|depart|flight|travel|check-?in|arrival|take-?off|boarding|"
                          r"delivery|trip|event|appointment|start)\b")
NEGATED = re.compile(r"(?:\b(?:not|no longer|never|if|unless|whether)|n['’]t)\s+(?:[a-z'’-]{1,20}\s+){0,3}$")
CREATED_KEYS = ("created", "booked", "placed", "ordered", "purchased")
CREATED = re.compile(r'"[a-z_]*(?:created|booked|placed|ordered|purchased)[a-z_]*"\s*:\s*"' + ISO_TIME)
MAX_REPLY_CHARS = 20_000
MAX_RESULT_CHARS = 100_000


def _time(m: re.Match, at: int = 1) -> datetime | None:
    y, mo, d, h, mi, s = (m.group(at + k) for k in range(6))
    try:
        return datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None


def current_time(view: TraceView) -> datetime | None:
    for i, role in enumerate(view.roles):
        if role == "system":
            m = NOW.search(view.texts[i][:MAX_RESULT_CHARS])
            if m:
                return _time(m)
    return None


def _created(text: str) -> datetime | None:
    """The first creation timestamp of a tool result (literal pre-checks: most results hold none)."""
    text = text[:MAX_RESULT_CHARS]
    if not any(k in text for k in CREATED_KEYS):
        return None
    m = CREATED.search(text)
    return _time(m) if m else None


def _claims(low: str) -> list[tuple[str, timedelta]]:
    """The reply's window claims (``WITHIN`` matches not negated or conditional), as (words, window)."""
    out = []
    for m in WITHIN.finditer(low[:MAX_REPLY_CHARS]):
        if NEGATED.search(low[max(0, m.start() - 40):m.start() + m.group(0).find("within")]):
            continue
        if OTHER_ANCHOR.match(low, m.end(), m.end() + 60):
            continue
        n = 1 if m.group(1) in ("a", "one") else int(m.group(1))
        out.append((m.group(0), timedelta(hours=n) if m.group(2) == "hour" else timedelta(days=n)))
    return out


def first_elapsed_contradiction(view: TraceView) -> Signal | None:
    """The rule on any run (``ElapsedClaimDetector.detect`` skips Healthy ones). Work in order of rarity: a reply
    holding "within" (no lower-casing), a claim in it, then the clock and the latest creation time before it."""
    texts, tools = view.texts, view.tool_steps
    if not tools:
        return None
    now: datetime | None = None
    for i in view.assistant_steps:
        if "ithin" not in texts[i] and "ITHIN" not in texts[i]:
            continue
        claims = _claims(view.lowered(i))
        if not claims:
            continue
        now = now or current_time(view)
        if now is None:
            return None  # no stated clock: nothing to judge by
        created = next((c for c in (_created(texts[j]) for j in reversed(tools) if j < i) if c), None)
        if created is None:
            continue
        for words, window in claims:
            if now - created > window:
                age = now - created
                return Signal(id=ElapsedClaimDetector.id, failure_class=FailureClass.F1, step=i,
                              evidence=f"says {words!r}, but the latest tool result's creation time "
                                       f"{created.isoformat(sep=' ')} is {age.days}d {age.seconds // 3600}h before "
                                       f"the current time {now.isoformat(sep=' ')}")
    return None


class ElapsedClaimDetector(FailedRunDetector):
    """F1.elapsed_claim: see the module docstring."""

    id = "F1.elapsed_claim"
    find = staticmethod(first_elapsed_contradiction)
