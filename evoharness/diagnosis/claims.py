"""F1 entity claims: a reply that contradicts the latest tool result about the entity it names.

The tools' facts: an entity's latest tool result is the latest JSON result before the reply holding its
own record (``"id": "X"``), else the latest naming it at all. In that result the objects naming the
entity under an id key (``id``, else ``*_id`` / ``*_number``: ``reservation_id``, ``flight_number``) are
its record, and their fields -- nested objects and lists included -- its facts, merged. A claimed value
found verbatim in the result's text is taken as consistent; only otherwise is the result parsed.

A claim is a sentence of a reply to the user (an assistant turn without tool calls, fenced code left
out; a sentence ends at a newline or at ". " / "! " / "? "; only sentences holding a marker -- ``$``, a
month name, ``date``, ``tracking`` -- are read: the scan is literal, the cost stays near a parse's) that
names exactly one known entity (a token of five or more letters and digits holding a digit -- six or
more if only digits -- that a tool result holds as a quoted string) and states, about one of its facts:
- an amount: ``price`` / ``fare`` / ``cost`` / ``amount`` / ``balance`` / ``total`` / ``refund`` followed
  by ``$N`` (optionally ``of``/``for`` and up to three words, then ``is`` / ``was`` / ``of`` / ``:``) and
  not qualified as computed (``total cost``, ``additional``, ``remaining``, ... just before it), checked
  against the entity's fields of that name (``price`` also reads ``prices``, ``fare`` and ``cost``;
  ``total`` reads ``total_price`` / ``total_amount``);
- a date: ``on`` / ``date`` (``is`` / ``of``) followed by an ISO date or ``May 20[, 2024]``, checked against
  every ISO date of the entity's fields (``date``, ``created_at``, ...);
- a field by its name: the field's name with spaces (``tracking id``, ``payment id``, ``total baggages``)
  followed by ``is`` / ``:`` / ``of`` / ``=`` and a value, checked against that field (ids, tracking
  numbers, counts held as numbers);
- a count: ``N <list field>`` (``3 passengers``, ``2 items``) checked against the list's length.

A claim contradicts the tools when the entity has the fact and the claimed value is none of its values.
The signal is located at the first reply that makes a contradicting claim. The detector runs only with
``diagnosis.entity_claims = true`` (off by default: on tau-bench it costs about one more JSON parse of
the traces) and skips Healthy runs (their label cannot change; ``first_contradiction`` is the unguarded
rule). All
patterns are linear (literal alternations, bounded repeats); results past ``MAX_RESULT_CHARS`` and
replies past ``MAX_REPLY_CHARS`` are read in part.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import lru_cache
from itertools import accumulate
from typing import Any

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.models import FailureClass, Signal

MAX_RESULT_CHARS = 100_000
MAX_REPLY_CHARS = 20_000
MAX_RESULTS = 2_000  # tool results kept per run (a hostile trace cannot grow the look-ups without bound)
MAX_SENTENCES = 300  # claim sentences of one run examined

# the fields a named claim is checked against (in a lower-cased result): ids, numbers, counts, tracking
CLAIMED_FIELD = re.compile(r'"((?:total_|num_|number_of_)?[a-z]+(?:_[a-z]+){0,3}?_(?:id|number|count)|tracking_[a-z]+'
                           r'|(?:total|num|number_of)_[a-z]+)"\s*:')
COUNT = re.compile(r"\b(\d{1,4})\s+([a-z]{3,}s)\b")  # "3 passengers": checked against a list field of that name
MONEY = re.compile(r"\b(price|fare|cost|amount|balance|total|refund)\s*(?:(?:of|for)\s+(?:[\w#*-]{1,40}\s+){0,3}?)?"
                   r"(?:(?:is|was|of|will be|:|=)\s*)?"
                   r"\$\s?(\d[\d,]{0,12}(?:\.\d{1,2})?)")  # sentences are lower-cased first
COMPUTED = ("total", "additional", "extra", "new", "remaining", "overall", "combined", "difference", "change",
            "upgrade", "refund", "net")  # a qualified amount is computed by the agent, not read from one field
MONEY_KEYS = {"price": ("price", "prices", "fare", "cost"), "fare": ("fare", "price", "prices"),
              "cost": ("cost", "price", "prices"), "amount": ("amount",), "balance": ("balance",),
              "total": ("total", "total_price", "total_amount", "total_cost"), "refund": ("refund", "refund_amount")}
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
DATE_CLAIM = re.compile(
    r"\b(?:on|date(?:\s+(?:is|of))?:?)\s+(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s+)?"
    r"(?:(\d{4})-(\d\d)-(\d\d)|(" + "|".join(MONTHS)
    + r")\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?)\b")
ANY_DIGIT = re.compile(r"\d")
# where a checked claim may be (lower-cased text): an amount, a date, an id / number / tracking field, a count
MARKERS = ("$", "date", "tracking", *(f"{m} " for m in MONTHS))
TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]+")  # one character class: linear
ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)")
QUOTED = re.compile(r'"([A-Za-z0-9_-]{5,60})"')  # one character class between literals: linear
SENTENCE_CHARS = 400  # a sentence is read at most this far either side of its marker
SENTENCE_ENDS = ("\n", ". ", "! ", "? ")  # "$12.50" and "a.b" do not end one
FENCE_ANY = re.compile(r"```[^`]*(?:`(?!``)[^`]*)*```")
FIELD_VALUE = r"\s*(?:is|was|are|:|=|of)\s+\**#?([A-Za-z0-9][A-Za-z0-9_-]{0,60})"


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every object in a parsed JSON value, depth first (iterative: a deep value cannot overflow the stack)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            yield n
            stack.extend(v for v in n.values() if isinstance(v, dict | list))
        elif isinstance(n, list):
            stack.extend(v for v in n if isinstance(v, dict | list))


def _is_id_key(k: str) -> bool:
    return k == "id" or k.endswith(("_id", "_number")) or k == "number"


def _facts(obj: dict[str, Any], out: dict[str, list[Any]], depth: int = 0) -> None:
    """Every field of ``obj`` and of the objects under it: key -> values (a list field also as its length)."""
    if depth > 12:
        return
    for k, v in obj.items():
        key = str(k).lower()
        if isinstance(v, dict):
            if key in ("prices",):
                out.setdefault(key, []).extend(x for x in v.values() if isinstance(x, int | float))
            _facts(v, out, depth + 1)
        elif isinstance(v, list):
            out.setdefault(f"#{key}", []).append(len(v))
            for x in v:
                if isinstance(x, dict):
                    _facts(x, out, depth + 1)
                elif isinstance(x, str | int | float) and not isinstance(x, bool):
                    out.setdefault(key, []).append(x)
        elif isinstance(v, str | int | float) and not isinstance(v, bool):
            out.setdefault(key, []).append(v)


class EntityFacts:
    """The JSON tool results of a run, asked "what did the tools last say about entity X before step N".

    Nothing is parsed up front: an id is looked up as a quoted JSON string in the results, newest first;
    the latest result holding the entity's own record (``"id": "X"``) wins, else the latest naming it at
    all. That one result is parsed (once), and only when a claim's value is not in its text verbatim.
    """

    def __init__(self, results: list[tuple[int, str]]) -> None:
        self.results = [(step, text[:MAX_RESULT_CHARS]) for step, text in results[:MAX_RESULTS]]
        self.joined = "\n".join(text for _, text in self.results)
        self.strings: set[str] | None = None  # every quoted id-sized string of the results: "named anywhere?"
        self.parsed: dict[int, Any] = {}
        self.cache: dict[tuple[int, str], dict[str, list[Any]]] = {}
        self.low: dict[int, str] = {}

    def latest(self, ident: str, before: int) -> int | None:
        if self.strings is None:
            self.strings = set(QUOTED.findall(self.joined))
        if ident not in self.strings:
            return None
        quoted = f'"{ident}"'
        own = (f'"id": "{ident}"', f'"id":"{ident}"')
        fallback = None
        for idx in range(len(self.results) - 1, -1, -1):
            step, r = self.results[idx]
            if step < before and quoted in r:
                if own[0] in r or own[1] in r:
                    return idx
                if fallback is None:
                    fallback = idx
        return fallback

    def lowered(self, idx: int) -> str:
        if idx not in self.low:
            self.low[idx] = self.results[idx][1].lower()
        return self.low[idx]

    def facts(self, idx: int, ident: str) -> dict[str, list[Any]]:
        if (idx, ident) not in self.cache:
            if idx not in self.parsed:
                try:
                    self.parsed[idx] = json.loads(self.results[idx][1])
                except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
                    self.parsed[idx] = None
            self.cache[(idx, ident)] = _entity_facts(self.parsed[idx], ident)
        return self.cache[(idx, ident)]

    def contradicted(self, sentence: str, before: int) -> str | None:
        """What ``sentence`` (as written) claims against the tools' facts before step ``before``, if anything."""
        named = {}
        for tok in dict.fromkeys(TOKEN_RUN.findall(sentence)):
            if len(tok) < 5 or tok.isalpha() or (tok.isdigit() and len(tok) < 6):
                continue  # an entity id holds a digit; a short number is an amount, a year, a count
            for form in (tok, tok.upper()) if tok != tok.upper() else (tok,):
                if (idx := self.latest(form, before)) is not None:
                    named[tok.lower()] = (idx, form)
                    break
        if len(named) != 1:
            return None
        entity, (idx, tok) = next(iter(named.items()))
        return _contradiction(entity, self.lowered(idx), lambda: self.facts(idx, tok), sentence.lower())


def _entity_facts(data: Any, ident: str) -> dict[str, list[Any]]:
    """The facts of the objects naming ``ident`` under an id key: under its own ``id`` if any, else under
    ``<x>_id`` / ``<x>_number``, merged; plus ``@dates``, every ISO date among them."""
    own: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    for obj in _walk(data):
        for k, v in obj.items():
            if v == ident and isinstance(k, str) and _is_id_key(k.lower()):
                (own if k == "id" else refs).append(obj)
                break
    facts: dict[str, list[Any]] = {}
    for obj in own or refs:
        _facts(obj, facts)
    facts["@dates"] = list({ISO.match(v).groups() for vs in facts.values() for v in vs
                            if isinstance(v, str) and ISO.match(v)})
    return facts


def _num(v: Any) -> float | None:
    """``v`` as a number; None for text that is none, or an integer past a float's range (JSON allows it)."""
    try:
        return float(v) if isinstance(v, int | float) else float(str(v).replace(",", ""))
    except (ValueError, OverflowError):
        return None


def _contradiction(entity: str, raw: str, facts: Callable[[], dict[str, list[Any]]], sentence: str) -> str | None:
    """The first claim of ``sentence`` (lower-cased) about ``entity`` that its facts contradict. ``raw`` is
    the lower-cased tool result the facts come from: a claimed value found in it verbatim is taken as
    consistent without parsing the result (most claims are), so ``facts()`` runs only for the others."""
    for m in MONEY.finditer(sentence) if "$" in sentence else ():
        before = sentence[max(0, m.start() - 24):m.start()].split()
        if before and before[-1].strip("*_:-") in COMPUTED:
            continue
        value = m.group(2).replace(",", "").removesuffix(".00")
        if f": {value}" in raw or f":{value}" in raw:
            continue
        word, claimed = m.group(1), _num(value)
        known = facts()
        values = {_num(v) for k in known if k in MONEY_KEYS[word] for v in known[k]} - {None}
        if values and claimed not in values:
            return f"{entity}: {word} ${m.group(2)} claimed, the tools say {_show(values)}"
    if "on " in sentence or "date" in sentence:
        for m in DATE_CLAIM.finditer(sentence):
            if m.group(1):
                y, mo, d = m.group(1), m.group(2), m.group(3)
            else:
                y, mo, d = m.group(6), f"{MONTHS.index(m.group(4)) + 1:02d}", f"{int(m.group(5)):02d}"
            if (f"{y}-{mo}-{d}" if y else f"-{mo}-{d}") in raw:
                continue
            dates = facts().get("@dates")
            if dates and not any((y is None or y == dy) and mo == dm and d == dd for dy, dm, dd in dates):
                return f"{entity}: date {m.group(0).split(None, 1)[-1]!r} claimed, the tools say " \
                       f"{_show('-'.join(x) for x in dates)}"
    for m in COUNT.finditer(sentence):
        key = m.group(2).replace(" ", "_")
        if f'"{key}": [' not in raw and f'"{key}":[' not in raw:
            continue
        values = facts().get(f"#{key}")
        if values and int(m.group(1)) not in values:
            return f"{entity}: {m.group(1)} {m.group(2)} claimed, the tools list {_show(values)}"
    for key in _claimed_fields(raw) if ANY_DIGIT.search(sentence) else ():
        phrase = key.replace("_", " ")
        if " " not in phrase or phrase not in sentence:
            continue
        for m in re.finditer(rf"\b{re.escape(phrase)}s?{FIELD_VALUE}", sentence):
            claimed = m.group(1)
            if not ANY_DIGIT.search(claimed) or f'"{claimed}"' in raw or f": {claimed}" in raw:
                continue  # ids, tracking numbers and counts hold digits; a value the result holds is no contradiction
            values = facts().get(key, [])
            known = {str(v).lower() for v in values}
            number = _num(claimed)
            if values and claimed not in known and (number is None or number not in {_num(v) for v in values}):
                return f"{entity}: {phrase} {claimed!r} claimed, the tools say {_show(known)}"
    return None


@lru_cache(maxsize=32)
def _claimed_fields(raw: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(CLAIMED_FIELD.findall(raw)))


def _show(values: Any) -> str:
    vals = sorted({str(int(v) if isinstance(v, float) and v.is_integer() else v) for v in values})
    return ", ".join(vals[:4]) + (" …" if len(vals) > 4 else "")


def first_contradiction(view: TraceView) -> Signal | None:
    """The first reply whose claim about an entity contradicts the latest tool result about it.

    The replies after the first JSON tool result are joined once and scanned for ``MARKERS`` (literal
    scans); only the sentences around a marker are read, in order."""
    results: list[tuple[int, str]] = []
    replies: list[tuple[int, str]] = []
    for i, m in enumerate(view.traj.messages):
        content = m.get("content")
        if not isinstance(content, str) or not content:
            continue
        role = m.get("role")
        if role == "tool":
            text = content.lstrip()
            if text.startswith(("{", "[")):
                results.append((i, text))
        elif role == "assistant" and results and not m.get("tool_calls"):
            replies.append((i, FENCE_ANY.sub(" ", content) if "```" in content else content[:MAX_REPLY_CHARS]))
    if not replies:
        return None
    text = "\n".join(r for _, r in replies)
    low = text.lower()
    offsets = list(accumulate((len(r) + 1 for _, r in replies), initial=0))
    spans: dict[int, int] = {}  # sentence start -> end, around each marker (bounded scans: linear)
    for marker in MARKERS:  # literal scans (C speed): where a checked claim may be
        pos = low.find(marker)
        while pos >= 0 and len(spans) < MAX_SENTENCES:
            lo, hi = max(0, pos - SENTENCE_CHARS), pos + SENTENCE_CHARS
            start = max(lo - 1, *(low.rfind(d, lo, pos) for d in SENTENCE_ENDS)) + 1
            if start not in spans:
                ends = [i for i in (low.find(d, pos, hi) for d in SENTENCE_ENDS) if i >= 0]
                spans[start] = min(ends, default=min(len(low), hi))
            pos = low.find(marker, pos + len(marker))
    if not spans:
        return None
    facts = EntityFacts(results)
    for start in sorted(spans):
        end = spans[start]
        step = replies[bisect_right(offsets, start) - 1][0]
        found = facts.contradicted(text[start:end + 1], step)
        if found:
            return Signal(id=ContradictedClaimDetector.id, failure_class=FailureClass.F1, step=step,
                          evidence=f"contradicts the latest tool result: {found}")
    return None


class ContradictedClaimDetector:
    """F1.contradicted_claim: see the module docstring."""

    id = "F1.contradicted_claim"
    failure_class = FailureClass.F1
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if not cfg.entity_claims or (t.score is not None and t.score >= cfg.healthy_threshold):
            return []  # off (``diagnosis.entity_claims``), or a Healthy run: its label cannot change
        found = first_contradiction(view)
        return [found] if found else []
