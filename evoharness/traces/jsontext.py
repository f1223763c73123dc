"""JSON text as trace files hold it, made readable: a lone UTF-16 surrogate escape becomes U+FFFD.

JSON may spell a character outside the Basic Multilingual Plane as a pair of escapes (``"\\ud83d\\ude00"``).
A writer that cuts a string by UTF-16 units (JavaScript's ``slice``, a log truncating at N characters) leaves
half a pair (``"\\ud83d"``). ``json.loads`` reads that into a ``str`` no UTF-8 encoder takes (writing the
trajectory failed with a traceback; pydantic's parser refused the line as "invalid JSON"). This module replaces
each escape that is not half of a pair with ``\\ufffd`` (the replacement character, as a UTF-8 decoder's
``errors="replace"`` gives) in the JSON text before it is parsed; a pair, an escaped backslash followed by
``u`` and hex digits, and every other byte are left as they are. Text without a surrogate escape is returned
as it is (one regex search).
"""

from __future__ import annotations

import gc
import json
import re
import threading
from typing import Any, AnyStr

_HI, _LO = r"[dD][89abAB][0-9a-fA-F]{2}", r"[dD][c-fC-F][0-9a-fA-F]{2}"
# a run of backslashes, then u and a high surrogate (with the low escape after it, if any), or a low one
_PATTERN = rf"(\\+)u({_HI})(\\u{_LO})?|(\\+)u({_LO})"
_ESCAPE = {str: re.compile(_PATTERN), bytes: re.compile(_PATTERN.encode())}
_ANY = {str: re.compile(r"\\u[dD][89a-fA-F]"), bytes: re.compile(rb"\\u[dD][89a-fA-F]")}


def _replace(m: re.Match) -> Any:
    text = m.group(0)
    u, fffd = (b"u", b"\\ufffd") if isinstance(text, bytes) else ("u", "\\ufffd")
    if m.group(1) is not None:  # a high one
        run, low = m.group(1), m.group(3)
        if len(run) % 2 == 0:  # an escaped backslash, then the text 'uD83D'; a low escape after it is alone
            return text if low is None else run + u + m.group(2) + fffd
        if low is not None:  # a pair
            return text
    else:
        run = m.group(4)
        if len(run) % 2 == 0:
            return text
    return run[:-1] + fffd  # the escaped backslashes before it, then U+FFFD


def lone_surrogates_replaced(text: AnyStr) -> AnyStr:
    """``text`` (JSON, ``str`` or UTF-8 ``bytes``) with every lone surrogate escape replaced by ``\\ufffd``."""
    kind = type(text)
    if _ANY[kind].search(text) is None:
        return text
    return _ESCAPE[kind].sub(_replace, text)


_PAIR = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_ESCAPED_BACKSLASH_U = re.compile(rb"\\\\u[dD][89a-fA-F]")


def may_hold_lone_surrogate(text: bytes) -> bool:
    """Whether ``text`` (UTF-8 JSON) may hold a lone surrogate escape: False only when it holds none. A text of
    surrogate pairs only (an emoji as ``json.dumps`` writes it by default) is False: its pairs are cut out (in C, no
    Python call a match, as ``lone_surrogates_replaced`` makes) and no surrogate escape is left. Where an escaped
    backslash comes before such an escape's text (the run of backslashes decides), True."""
    if _ANY[bytes].search(text) is None:
        return False
    if _ESCAPED_BACKSLASH_U.search(text) is not None:
        return True
    return _ANY[bytes].search(_PAIR.sub(b"", text)) is not None


def has_surrogate_escape(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds a surrogate escape (half of a pair or alone), without slicing it."""
    return _ANY[str].search(text, start, end) is not None


def loads(text: str | bytes, *, unique: bool = False) -> Any:
    """``json.loads(text)``, lone surrogate escapes read as U+FFFD (see the module's docstring); ``unique`` (the
    reading a service body gets): an object that holds a key twice is ``DuplicateKey`` (``unique_keys``), and a number
    JSON does not have (``NaN``, ``Infinity``, one past a double such as ``1e999``) is ``NotFinite``.
    Parsed with the collector held (``collection_held``)."""
    with collection_held:
        if unique:
            return json.loads(lone_surrogates_replaced(text), object_pairs_hook=unique_keys,
                              parse_constant=_not_finite, parse_float=_finite)
        return json.loads(lone_surrogates_replaced(text))


class _CollectionHeld:
    """``with collection_held:`` the cyclic garbage collector does not run, in any thread, until the last holder
    leaves (then it runs again if it ran before the first came). For ``json.loads`` of text from outside: its C parser
    recurses once a level, so text nested 100,000 deep takes the stack to the recursion limit before RecursionError
    ends it, and every level allocates -- a collection there finalised whatever garbage the process held (another
    request's socket, a temporary file) ~1,000 frames deep, where each ``__del__`` failed with RecursionError and its
    cleanup was lost (a CI run of the service's tests: 'Exception ignored' twice, then a failure). The parse makes no
    cycles, so holding the collector for it costs nothing but the wait.

    Holds of several threads overlap (the service parses bodies in its thread pool; the JSON pairs hook is Python,
    so threads switch mid-parse): two threads parsing back to back left the holder count at 0 almost never, and the
    collector did not run at all while a third thread made 200,000 cycles (all 200,000 alive at the end). So a
    thread that leaves its hold while other threads still hold runs the young collection the allocations since have
    earned (generation 0, or 1 when its turn has come, as the collector picks them), in its own thread: it has left
    its parse, so the finalisers run at its shallow depth, never on a holder's deep stack. The oldest generation is
    left to the collector itself (its own rule against walking a large heap too often), at the next moment no
    thread holds. A hold within a hold of the same thread (an importer's parse inside ``Labeller.labelled``'s batch)
    collects nothing, and the last holder to leave only re-enables the collector: the single-threaded ``diagnose``
    and ``label`` run as before. The service as it is gives those moments: 200 POSTs of 100 trajectories at 8 or
    64 in flight, a side thread making 20,000 cycles a second, peaked at ~1,000 of them alive with the hold, the
    same without it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[int, int] = {}  # thread id -> how many holds it is in (a hold within a hold: 2)
        self._was_on = False

    def __enter__(self) -> None:
        me = threading.get_ident()
        with self._lock:
            if not self._holders:
                self._was_on = gc.isenabled()
                gc.disable()
            self._holders[me] = self._holders.get(me, 0) + 1

    def __exit__(self, *_: object) -> None:
        me = threading.get_ident()
        with self._lock:
            if left := self._holders[me] - 1:
                self._holders[me] = left
                return  # still held by this thread (an importer's parse within a labelled batch)
            del self._holders[me]
            if not self._holders:
                if self._was_on:
                    gc.enable()
                return
            if not self._was_on:
                return
        # other threads still hold: the young collection due, here, outside the lock (a finaliser may parse and hold)
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if thresholds[0] and counts[0] > thresholds[0]:
            gc.collect(1 if counts[1] > thresholds[1] else 0)


collection_held = _CollectionHeld()


class DuplicateKey(ValueError):
    """A JSON object that holds ``key`` twice."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"the key {key!r} twice in one object")


class NotFinite(ValueError):
    """A number JSON does not have (RFC 8259: no NaN or Infinity) in a body a service takes: Python's ``json.loads``
    reads ``NaN``, ``Infinity`` and ``1e999`` as floats, which pydantic then wrote as null in a free-form value
    (``meta``, a message), so what was stored was not what was sent, and nothing said so."""

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__(f"{text[:40]}, a number JSON does not have")


def _not_finite(text: str) -> float:
    raise NotFinite(text)


def _finite(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):  # 1e999: a float too large for a double
        raise NotFinite(text)
    return value


_INF = float("inf")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` for a body a service takes: ``DuplicateKey`` for an object that holds a key
    twice. JSON leaves such an object's meaning open (RFC 8259: "the names within an object SHOULD be unique") and its
    readers differ: Python's and pydantic's keep the last value, others the first, so a proxy or a client library that
    checked `{"score": 0, "score": 1}` saw another record than the one stored."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return d
