"""F1.unavailable_offer: the agent offers or books a seat class that the latest tool result about the flight shows
none of ("available_seats": {"economy": 0}).

A flight search lists, per flight, the seats left in each cabin. An agent that then offers the user a cabin with
none left -- or books it -- has put an option to the user that the tools say does not exist (on tau-bench airline
the booking fails later with "not enough seats", after the user has chosen it). The rule:

- the tools' word: each object of a JSON tool result with an ``available_seats`` object and an id (``flight_number``,
  ``id``, ``*_id``, ``*_number``: ``claims._is_id_key``); the cabins it counts 0 seats in are unavailable. The latest
  result about an id wins (a later one that shows seats clears it);
- an offer: an assistant message naming the id and, before the next id-like token it names (``OTHER_ID``; or within
  ``SEGMENT`` characters),
  an unavailable cabin with a price right after it ("Cabin: Economy ($109)", "economy: $109"); not where a longer
  cabin name holds it ("Basic Economy" is not "Economy"), nor where the words near it say it is not there
  (``NEGATIONS``: "sold out", "no seats", "unavailable", ...);
- a booking: a call whose arguments hold a ``cabin`` and a ``flights`` list naming the id (and the same date, where
  both give one), unless the reservation it changes (``reservation_id``) already holds that flight on that date in that
  cabin by the latest tool result about it (a kept flight takes no new seat).

The signal is at the first offer or booking, whichever comes first. The rule reads only a run where the environment
refused a call for want of seats or availability (a failed call, ``failed_call_ids``, whose result says "seat",
"availab", "sold out" or "fully booked": tau-bench's "Error: not enough seats on flight HAT229"), and there only the
ids that refusal names (any, where it names none): the cheap gate that keeps the rule within the labeller's cost bound
(``label_throughput.py --instructions``: a read of every run's seat counts cost 3.5x -> 3.18x json.loads against 2.97x
without the rule; gated, 2.99x). So an offer of a full cabin that the agent never tries to book is not found. Healthy
runs are skipped (their label cannot change).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from evoharness.diagnosis.claims import _is_id_key, _walk
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.failed_only import FailedRunDetector
from evoharness.diagnosis.invariants import failed_call_ids
from evoharness.diagnosis.models import FailureClass, Signal

SEATS = '"available_seats"'
SEGMENT = 400  # characters of a reply read after an id for the cabins it offers on that flight
MAX_RESULT_CHARS = 200_000  # a result is read this far
NEAR = 600  # characters either side of a seat count searched for its object's id and date
ZERO_SEAT = re.compile(r'"([^"]{1,40})"\s*:\s*0\s*[,}]')
CABIN_KEY = re.compile(r'"([^"]{1,40})"\s*:')
ID_FIELD = re.compile(r'"(flight_number|id|[a-z_]{1,30}_(?:id|number))"\s*:\s*"([^"]{1,60})"')
DATE_FIELD = re.compile(r'"(date)"\s*:\s*"([^"]{1,40})"')
# the next id a reply names (five or more letters and digits, both: "HAT266", "OBUT9V"): where its words about one
# flight end
OTHER_ID = re.compile(r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{5,}\b")
SIBLING = re.compile(r"\}[\s\]]*,[\s\[]*\{")  # the end of one list item, the start of the next: "}, {", "}], [{"
MAX_REPLY_CHARS = 20_000
PRICED = r"\W{0,6}\$\s?\d"  # a cabin name then a price: "Economy ($109)", "economy: $109" (bounded: linear)
REFUSALS = ("seat", "availab", "sold out", "fully booked")
NEGATIONS = ("sold out", "no seat", "unavailable", "not available", "0 seats", "no availability", "fully booked",
             "none left", "no longer")

# id -> (cabins with 0 seats, all cabins, the tool result and where its seat counts start: its date is read from there
# only for a booking)
Zero = dict[str, tuple[frozenset[str], frozenset[str], str, int]]


def _field(text: str, at: int, names: re.Pattern[str]) -> str | None:
    """The value of the nearest field ``names`` matches in the same JSON object as position ``at`` of ``text`` (before
    or after it: keys may come in any order), read without parsing: the nearest match either side (within ``NEAR``
    characters) with no end of one object and start of the next (``SIBLING``) between it and ``at``."""
    best: tuple[int, str] | None = None
    lo = max(0, at - NEAR)
    before = [m for m in names.finditer(text, lo, at)]
    if before and not SIBLING.search(text, before[-1].end(), at):
        best = (at - before[-1].end(), before[-1].group(2))
    after = names.search(text, at, at + NEAR)
    if after and not SIBLING.search(text, at, after.start()) and (best is None or after.start() - at < best[0]):
        best = (after.start() - at, after.group(2))
    return best[1] if best else None


def _own_id(text: str, at: int) -> str | None:
    """The id of the object whose seat counts start at ``at``: the nearest id field before it with nothing but flat
    fields between (a literal look back: a search result as tau-bench writes it), else ``_field``'s search (either
    side)."""
    lo = max(0, at - NEAR)
    k = max(text.rfind('_number": "', lo, at), text.rfind('"id": "', lo, at), text.rfind('_id": "', lo, at))
    if k >= 0 and "{" not in text[k:at] and "}" not in text[k:at]:
        start = text.find('"', text.find(":", k) + 1) + 1
        end = text.find('"', start, at)
        if 0 < start < end:
            return text[start:end]
    return _field(text, at, ID_FIELD)


def _zero(text: str) -> bool:
    """A literal pre-check: ``text`` holds a seat count object and a field valued 0 (most search results hold none)."""
    return SEATS in text and ('": 0' in text or '":0' in text)


def _read_seats(text: str, latest: Zero, only: frozenset[str] = frozenset()) -> None:
    """Update ``latest`` with the seat counts a tool result gives: every id it names (quoted) and ``latest`` holds is
    cleared (its latest word), then each ``available_seats`` object with a count of 0 in it marks its object's id
    (``ID_FIELD``) and cabins -- of the ids ``only`` holds, where it holds any (``_zero_blocks``). Read by literal scans
    and small patterns, not by parsing: a parse of every search result cost ~0.5x json.loads of the traces
    (label_throughput), over the 3x bound."""
    text = text[:MAX_RESULT_CHARS]
    for ident in [i for i in latest if f'"{i}"' in text]:
        del latest[ident]
    if not _zero(text):
        return
    for a in dict.fromkeys(_zero_blocks(text, only)):
        end = text.find("}", a)
        block = text[a + len(SEATS):end + 1 if end >= 0 else len(text)]
        zero = frozenset(z.group(1).lower().replace("_", " ") for z in ZERO_SEAT.finditer(block))
        if zero and (ident := _own_id(text, a)) is not None:
            cabins = frozenset(c.lower().replace("_", " ") for c in CABIN_KEY.findall(block))
            held = latest.get(ident)
            latest[ident] = (zero | held[0] if held else zero, cabins, text, a)


def _zero_blocks(text: str, only: frozenset[str]) -> Iterator[int]:
    """Where the seat count objects holding a 0 start in ``text``: of the objects naming an id of ``only`` (the seat
    counts after each quoted mention, in its object), or where ``only`` is empty, of any (found from each 0)."""
    if only:
        for ident in only:
            q = text.find(f'"{ident}"')
            while q >= 0:
                a = text.find(SEATS, q, q + NEAR)
                if a >= 0 and _own_id(text, a) == ident:
                    end = text.find("}", a)
                    block = text[a:end + 1 if end >= 0 else len(text)]
                    if '": 0' in block or '":0' in block:
                        yield a
                q = text.find(f'"{ident}"', q + len(ident) + 2)
        return
    for literal in ('": 0', '":0'):
        p = text.find(literal)
        while p >= 0:
            a = text.rfind(SEATS, max(0, p - 300), p)
            if a >= 0 and "}" not in text[a:p]:
                yield a
            p = text.find(literal, p + len(literal))


@lru_cache(maxsize=64)
def _priced(cabin: str) -> re.Pattern[str]:
    """A cabin's name followed by a price (``PRICED``), compiled once per name."""
    return re.compile(rf"\b{re.escape(cabin)}\b{PRICED}")


def _offered(text: str, latest: Zero) -> tuple[str, str] | None:
    """(id, cabin) of the first unavailable cabin ``text`` offers with a price, if any."""
    low = text.lower()
    for ident, (zero, cabins, _, _) in latest.items():
        if not zero or ident not in text:
            continue
        pos = text.find(ident)
        while pos >= 0:
            nxt = OTHER_ID.search(text, pos + len(ident), pos + SEGMENT)
            seg = low[pos:nxt.start() if nxt else pos + SEGMENT]
            for cabin in zero:
                longer = [c for c in cabins if c != cabin and c.endswith(" " + cabin)]
                for m in _priced(cabin).finditer(seg):
                    if any(seg[max(0, m.start() + len(cabin) - len(c)):m.start() + len(cabin)] == c for c in longer):
                        continue
                    near = seg[max(0, m.start() - 40):m.end() + 40]
                    if any(w in near for w in NEGATIONS):
                        continue
                    return ident, cabin
            pos = text.find(ident, pos + len(ident))
    return None


def _held(view: TraceView, before: int, reservation: Any, cabin: str) -> set[tuple[str, Any]]:
    """The (flight, date) pairs the latest tool result about ``reservation`` before step ``before`` shows it holding in
    ``cabin``: a change that keeps them takes no new seat (tau-bench's update_reservation_flights checks seats only on
    the flights the reservation does not hold in that cabin)."""
    if not isinstance(reservation, str) or not reservation:
        return set()
    for j in reversed(view.tool_steps):
        text = view.texts[j]
        if j >= before or reservation not in text or len(text) > MAX_RESULT_CHARS:
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            continue
        for obj in _walk(data):
            if obj.get("reservation_id") == reservation and isinstance(flights := obj.get("flights"), list):
                if str(obj.get("cabin", "")).lower().replace("_", " ") != cabin:
                    return set()
                return {(n, d) for f in flights if isinstance(f, dict)
                        and _plain(n := f.get("flight_number")) and _plain(d := f.get("date"))}
    return set()


def _plain(value: Any) -> bool:
    """A JSON scalar (a flight number or date as a tool or a call may give it): a list or an object there, which a set
    cannot hold (it raised TypeError out of the labeller), is no flight or date a reservation can be shown to keep."""
    return value is None or isinstance(value, (str, int, float))


def _booked(view: TraceView, step: int, args: Any, latest: Zero) -> tuple[str, str] | None:
    """(id, cabin) where a booking's arguments take an unavailable cabin on a flight the reservation does not already
    hold in that cabin, if any."""
    if not isinstance(args, dict) or not isinstance(cabin := args.get("cabin"), str) \
            or not isinstance(flights := args.get("flights"), list):
        return None
    cabin = cabin.lower().replace("_", " ")
    held: set[tuple[str, Any]] | None = None
    for f in flights:
        if not isinstance(f, dict):
            continue
        ident = next((v for k, v in f.items() if isinstance(k, str) and _is_id_key(k.lower())
                      and isinstance(v, str) and v in latest), None)
        if ident is None:
            continue
        zero, _, text, at = latest[ident]
        if cabin in zero and (not isinstance(f.get("date"), str) or (date := _field(text, at, DATE_FIELD)) is None
                              or f["date"] == date):
            if held is None:
                held = _held(view, step, args.get("reservation_id"), cabin)
            if not _plain(date := f.get("date")) or (ident, date) not in held:
                return ident, cabin
    return None


def _refused(view: TraceView) -> frozenset[str] | None:
    """The ids (``OTHER_ID``) named by the calls of the run that failed with a result speaking of seats or availability
    (``REFUSALS``: tau-bench's "Error: not enough seats on flight HAT229"); None where none did. The gate, on the failed
    calls the view keeps (``failed_call_ids``, asked by other rules too), so that the seat counts of the search results
    are read on few runs, and there only about the ids refused (about any, where a refusal names none)."""
    results = view.results
    found = None
    for cid in failed_call_ids(view):
        text = results[cid][1][:MAX_REPLY_CHARS]
        low = text.lower()
        if any(w in low for w in REFUSALS):
            found = (found or frozenset()) | frozenset(OTHER_ID.findall(text))
    return found


def first_unavailable_offer(view: TraceView) -> Signal | None:
    """The rule on any run (``UnavailableOfferDetector.detect`` skips Healthy ones)."""
    if (refused := _refused(view)) is None:
        return None
    texts = view.texts
    first = next((j for j in view.tool_steps if _zero(texts[j])
                  and (not refused or any(f'"{r}"' in texts[j] for r in refused))), None)
    if first is None:
        return None
    calls: dict[int, list[Any]] = {}
    for c in view.calls:
        calls.setdefault(c.step, []).append(c)
    latest: Zero = {}
    roles = view.roles
    for i in range(first, len(roles)):
        role = roles[i]
        if role == "tool":
            if SEATS in texts[i]:
                _read_seats(texts[i], latest, refused)
            continue
        if role != "assistant" or not latest:
            continue
        if texts[i] and (found := _offered(texts[i][:MAX_REPLY_CHARS], latest)):
            return Signal(id=UnavailableOfferDetector.id, failure_class=FailureClass.F1, step=i,
                          evidence=f"offers {found[1]} on {found[0]}, which the latest tool result about it shows "
                                   f"0 {found[1]} seats on")
        for c in calls.get(i, ()):
            if found := _booked(view, i, c.args, latest):
                return Signal(id=UnavailableOfferDetector.id, failure_class=FailureClass.F1, step=i,
                              evidence=f"{c.name} books {found[1]} on {found[0]}, which the latest tool result about "
                                       f"it shows 0 {found[1]} seats on")
    return None


class UnavailableOfferDetector(FailedRunDetector):
    """F1.unavailable_offer: see the module docstring."""

    id = "F1.unavailable_offer"
    find = staticmethod(first_unavailable_offer)
