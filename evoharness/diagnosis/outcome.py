"""F1.misstated_outcome: the final answer tells the user something about the run's own last write that the write's
result contradicts.

The write is the last state-changing call before the final answer (``detectors.changes_state``; not a shell command,
whose output is what a program printed, and not a hand-off), read with its result. The result failed when it opens
with ``error`` (tau-bench's and tau2's ``Error: ...``) or is a JSON object with a true ``error`` key or a false
``success`` / ``ok``; otherwise it went through. Each sentence of the final answer (a sentence ends at a newline or at
``. `` / ``! `` / ``? ``) is read for one of four claims, each about the write:

- **failed, where it went through**: a report that an attempt did not succeed -- ``could not`` / ``couldn't`` /
  ``was unable to`` / ``wasn't able to`` / ``failed`` / ``did not go through`` / ``was unsuccessful`` / ``was
  declined`` / ``has not been`` ... (past forms only: "I'm unable to" / "I cannot" decline what is asked next, they
  report no attempt);
- **went through, where it failed**: ``successfully``, ``all done``, ``has been`` / ``have been`` / ``is now``
  followed by the write's own verb ("has been cancelled" after a refused ``cancel_reservation``), with no word of
  failure in the sentence; only when no earlier call of the same tool went through (a repeat of a done write is
  refused as already done, and "your order has been cancelled" is then right);
- **an amount**: a money field of the result (``amount``, ``refund_amount``, ``balance``,
  ``total_price`` ...: a key ending in ``amount`` / ``charge`` / ``price`` / ``balance`` / ``total`` / ``refund`` /
  ``cost`` / ``fee`` / ``fare`` / ``paid``) named in the sentence by its key's words ("the refund amount is",
  "balance:"), followed within a few words by an amount (``$1,234.50``, ``USD 1234.50``, ``1234.5 dollars``, a bare
  ``1234.5`` after ``is`` / ``:``; a sign is not compared) that is none of the result's numbers. A qualified name
  ("total price", "new balance", "remaining amount") is a figure the agent computed, not the field, unless the key
  itself holds the qualifier (``total_price``);
- **a status**: the result's ``status`` for the written entity, and the sentence says the entity ``is`` / ``is now``
  / ``status is`` another status -- one of the statuses the run's tool results used or of ``STATUSES`` -- and not the
  result's (a status the result's contains, "requested" of "exchange requested", is no contradiction).

A sentence (for a failure, its clause) is about the write when it names the write's entity (an id the call's
arguments or the result's top-level ``*_id`` / ``id`` fields hold, as a word) or, naming no other id of the run, says
the write's verb or object (a word of four letters or more of the tool's name: ``cancel_pending_order`` gives
"cancel", "pending", "order", matched by their first five letters: "cancellation") or a word for any request
(``GENERIC``: "request", "action", "change", "transaction", "operation", "update"); an amount also when it names the
result's own field and no other id. The signal is at the final answer.

It runs only with ``diagnosis.outcome_claims = true`` (off by default: about 9 M instructions per 200 tau-bench
airline runs, +2.5% of labelling, where a default rule may add ~2 M); Healthy runs, multi-agent logs and runs with no
such write are skipped. Literal gates first (a word of failure, a money key word and a digit in the answer,
``"status"`` in the result); the result is parsed only past them; patterns are bounded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import ToolCall, TraceView, once
from evoharness.diagnosis.detectors import answer_step, changes_state, has_digit, id_values, is_handoff, is_shell
from evoharness.diagnosis.models import FailureClass, Signal

MAX_RESULT_CHARS = 100_000
MAX_ANSWER_CHARS = 20_000
SENTENCE_END = re.compile(r"\n|[.!?](?:\s|$)")
_WORDS = re.compile(r"[a-z]+")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")

# a report that an attempt did not succeed (past forms: a present "I'm unable to" declines what comes next); words
# are single-spaced, so that FAILED_WORDS (literals one of which every match holds) gate it exactly
FAILED = re.compile(
    r"\b(?:could ?n[o']t|couldn[’]t|(?:was|were) (?:unable|not able)|(?:wasn|weren)['’]t able|failed|"
    r"(?:did ?n[o']t|didn[’]t) (?:go through|succeed|work)|(?:was|were) (?:not )?(?:unsuccessful|declined|rejected|"
    r"refused)|(?:wasn|weren)['’]t (?:successful|completed|processed)|(?:was|were|has|have) not (?:been )?"
    r"(?:successful|completed|processed|applied)|(?:hasn|haven)['’]t been (?:completed|processed|applied)|"
    r"unsuccessful)\b")
# literals one of which every FAILED match holds: a gate before the regex (few: each is a scan of the answer)
FAILED_WORDS = ("not", "n't", "n’t", "unable", "fail", "unsucc", "declined", "rejected", "refused")
DONE_WORDS = ("success", "been", "done", " now ", "went through", "all set", "ed")
# the verb a failure names ("could not *find*", "was unable to *locate*"): a look-up that found nothing is no write
NEXT_VERB = re.compile(r"\s+(?:to\s+)?(?:be\s+)?([a-z]+)")
LOOK_UPS = frozenset(("find", "found", "locate", "located", "see", "seen", "retrieve", "retrieved", "look", "looked",
                      "get", "access", "accessed", "verify", "verified", "identify", "identified", "fetch", "fetched",
                      "load", "loaded", "reach", "reached", "search", "searched", "match", "matched"))
CLAUSE_END = re.compile(r"[;,:]\s+(?:and|but|while|though|although|so)\b|;|\bbut\b|\bwhile\b|\bhowever\b")
SUCCESS = re.compile(r"\b(?:successfully|success|all\s+(?:done|set)|went\s+through)\b")
DONE_FORMS = re.compile(r"\b(?:has|have|had)\s+been\s+(\w+)|\b(?:is|are)\s+now\s+(\w+)|\bi\s+(?:have\s+)?(\w+ed)\b")
# a word for any request: a clause that says one may be about the write ("the request could not be completed")
GENERIC = frozenset(("request", "requests", "action", "change", "changes", "transaction", "operation", "update"))
# statuses a reply may claim of an entity besides those the run's tool results used
STATUSES = ("pending", "processing", "processed", "delivered", "shipped", "cancelled", "canceled", "confirmed",
            "active", "inactive", "suspended", "completed", "complete", "open", "closed", "refunded", "returned",
            "exchanged", "approved", "rejected", "declined", "failed", "expired", "scheduled", "booked", "paid",
            "unpaid", "on hold", "resolved", "in progress", "enabled", "disabled")
# a status claimed: "status is X", "is now X", "are currently X", "is X" (one or two words; a status only when
# ``STATUSES`` holds it or a tool result used it)
STATUS_CLAIM = re.compile(r"\b(?:status\s+(?:is|was|of\s+[^.]{0,60}?\s+is|:)|(?:is|are)(?:\s+(?:now|currently))?"
                          r"|now\s+shows\s+as)\s+\**([a-z]+)(?:[ -]([a-z]+))?")
MONEY_KEY_ENDS = ("amount", "charge", "price", "balance", "total", "refund", "cost", "fee", "fare", "paid")
QUALIFIERS = frozenset(("total", "new", "additional", "extra", "remaining", "overall", "combined", "difference",
                        "estimated", "original", "old", "previous", "former", "per", "each", "average", "net"))
# an amount as written: $1,234.50 / USD 1234.50 / 1,234.50 USD / 1234.5 dollars (a bare number: MONEY_BARE)
NUMBER = r"(\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d{1,12}(?:\.\d{1,2})?)"
MONEY = re.compile(rf"(?:\$|\busd|€|£)\s?-?{NUMBER}|{NUMBER}\s?(?:usd|dollars?|eur|euros?)\b")  # a sign: not read
MONEY_BARE = re.compile(rf"^\s*(?:is|was|of|=|:|will\s+be|comes\s+to|totals?)\s*\**\s*{NUMBER}\b(?![.,]?\d)(?!\s*%)")
PLAIN_NUMBER = re.compile(r"-?\d{1,12}(?:\.\d{1,6})?")
CLAUSE_STOP = re.compile(r"[,;]|\band\b")


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def _sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text[:MAX_ANSWER_CHARS].lower()) if s.strip()]


def _failed_result(text: str) -> bool:
    if text[:64].lstrip()[:5].lower() == "error":
        return True
    if '"error"' not in text and '"success"' not in text and '"ok"' not in text:
        return False
    parsed = _parse(text)
    if isinstance(parsed, dict):
        if parsed.get("error") or parsed.get("success") is False or parsed.get("ok") is False:
            return True
    return False


def _parse(text: str) -> Any:
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        return json.loads(text[:MAX_RESULT_CHARS])
    except ValueError:
        return None


def _leaves(node: Any, key: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    if depth > 12:
        return []
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in _leaves(v, str(k).lower(), depth + 1)]
    if isinstance(node, list):
        return [x for v in node for x in _leaves(v, key, depth + 1)]
    return [(key, node)]


def _word_in(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` with no letter or digit either side."""
    at = text.find(word)
    while at != -1:
        end = at + len(word)
        if (at == 0 or not text[at - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
            return True
        at = text.find(word, at + 1)
    return False


def _ids(call: ToolCall, parsed: Any) -> set[str]:
    """The written entity's ids: the call's argument values under an id key and the result's top-level ones."""
    out: set[str] = set()
    for src in (call.args, parsed):
        if isinstance(src, dict):
            for k, v in src.items():
                k = str(k).lower()
                if (k == "id" or k.endswith(("_id", "_number"))) and isinstance(v, str) and len(v) >= 3:
                    out.add(v.lower().lstrip("#"))
    return out


def _name_words(name: str) -> tuple[str, ...]:
    """The words of a tool's name that may name its verb or object (four letters or more)."""
    return tuple(w.lower() for w in _NAME_WORDS.findall(name) if len(w) >= 4)


class _Write:
    """The last write before the final answer and what its result says."""

    def __init__(self, view: TraceView, answer: int, call: ToolCall, result: str) -> None:
        self._view, self._answer, self._others = view, answer, None
        self.call, self.result = call, result
        self.failed = _failed_result(result)

    @once
    def words(self) -> tuple[str, ...]:
        return _name_words(self.call.name)

    @once
    def parsed(self) -> Any:
        """The result parsed (None: no JSON object or list), when first asked."""
        return _parse(self.result)

    @once
    def ids(self) -> set[str]:
        return _ids(self.call, self.parsed)

    def named_in(self, sentence: str) -> bool:
        """Whether ``sentence`` names the written entity (one of its ids as a word: "HATHAT", "#W5521093")."""
        return any(_word_in(sentence, i) for i in self.ids)

    def names_other(self, sentence: str) -> bool:
        """Whether ``sentence`` names an id of the run other than the written entity's (the calls' argument ids and
        the results' ``*id`` / ``*_number`` values before the answer; found when first asked)."""
        others = self._others
        if others is None:
            view, answer = self._view, self._answer
            others = set()
            for c in view.calls:
                if c.step < answer:
                    others |= _ids(c, None)
            for i in view.tool_steps:
                if i < answer and 'id"' in view.texts[i]:
                    others |= {v.lower().lstrip("#") for v in id_values(view.texts[i][:MAX_RESULT_CHARS])}
            others = self._others = others - self.ids
        return any(_word_in(sentence, i) for i in others)

    def about(self, sentence: str) -> bool:
        """Whether ``sentence`` (lower-cased) is about this write: it names its entity, or names no other id of the
        run and says its verb / object or a word for any request."""
        if self.named_in(sentence):
            return True
        if self.names_other(sentence):
            return False
        words = _WORDS.findall(sentence)
        return any(w in GENERIC or any(w.startswith(n[:5]) for n in self.words) for w in words)


_HANDOFFS: dict[str, bool] = {}  # is_handoff's answer per tool name (a regex a name); emptied when full


def _handoff(name: str) -> bool:
    known = _HANDOFFS.get(name)
    if known is None:
        if len(_HANDOFFS) >= 4096:
            _HANDOFFS.clear()
        known = _HANDOFFS[name] = is_handoff(name)
    return known


def _last_write(view: TraceView, answer: int) -> _Write | None:
    last: ToolCall | None = None
    for c in reversed(view.calls):
        if c.step < answer and changes_state(c):
            last = c
            break
    if last is None or is_shell(last.name) or _handoff(last.name):
        return None
    res = view.results.get(last.id)
    if res is None or res[0] > answer:
        return None
    text = res[1]
    return _Write(view, answer, last, text)


def _went_through_before(view: TraceView, w: _Write) -> bool:
    for c in view.calls:
        if c is w.call:
            return False
        if c.name == w.call.name:
            res = view.results.get(c.id)
            if res is not None and not _failed_result(res[1]):
                return True
    return False


def _says_failed(sentences: list[str], w: _Write) -> str | None:
    for s in sentences:
        if FAILED.search(s) is None:
            continue
        for clause in CLAUSE_END.split(s):
            for m in FAILED.finditer(clause):
                verb = NEXT_VERB.match(clause, m.end())
                if verb is not None and verb.group(1) in LOOK_UPS:
                    continue  # "could not find any other order": a look-up that found nothing, not the write
                if w.about(clause):
                    return s
    return None


def _says_done(sentences: list[str], w: _Write) -> str | None:
    for s in sentences:
        if FAILED.search(s) or " not " in f" {s} " or "n't" in s or "n’t" in s or "unable" in s:
            continue
        done = SUCCESS.search(s) is not None
        if not done:
            for m in DONE_FORMS.finditer(s):
                word = next(g for g in m.groups() if g)
                if any(word.startswith(n[:5]) for n in w.words):
                    done = True
                    break
        if done and w.about(s):
            return s
    return None


def _float(v: int | float) -> float | None:
    """``v`` as a float; None for an integer past a float's range (JSON's integers have no limit): passed over."""
    try:
        return float(v)
    except OverflowError:
        return None


def _field_values(parsed: Any, key: str) -> set[float]:
    """The numbers the result holds under ``key`` (at any depth; tau2 writes some as strings: "4.0")."""
    out: set[float] = set()
    for k, v in _leaves(parsed):
        if k != key or isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            if (f := _float(v)) is not None:
                out.add(f)
        elif isinstance(v, str) and PLAIN_NUMBER.fullmatch(v.strip()):
            out.add(float(v))
    return out


def _numbers(parsed: Any) -> set[float]:
    out = set()
    for _, v in _leaves(parsed):
        if isinstance(v, int | float) and not isinstance(v, bool):
            if (f := _float(v)) is not None:
                out.add(round(abs(f), 2))
        elif isinstance(v, str):
            try:
                out.add(round(abs(_num(v)), 2))
            except ValueError:
                pass
    return out


def _key_named(s: str, at: int, end: str, result: str) -> tuple[str, str] | None:
    """The result's money key that the word ``end`` at ``s[at:]`` names, and the words naming it: ``X_end`` when the
    word before it is ``X`` and the result has that key ("refund amount"), else ``end`` itself when the result has
    that key and no qualifier comes before it ("total amount", "new balance": the agent's own figures)."""
    if at > 0 and s[at - 1].isalpha():
        return None
    before = _WORDS.findall(s[max(0, at - 30):at])
    prev = before[-1] if before else ""
    if prev and f'"{prev}_{end}"' in result:
        return f"{prev}_{end}", f"{prev} {end}"
    if f'"{end}"' in result and prev not in QUALIFIERS:
        return end, end
    return None


def _sentence_at(low: str, at: int) -> str:
    """The sentence of ``low`` holding position ``at`` (``SENTENCE_END``'s ends, found by literal searches)."""
    start = max(low.rfind("\n", 0, at), *(low.rfind(e, 0, at) + 1 for e in (". ", "! ", "? "))) + 1
    m = SENTENCE_END.search(low, at)
    return low[start:m.start() if m else len(low)]


def _misstated_amount(low: str, ends: list[str], w: _Write) -> str | None:
    """Literal first: each place the answer holds a word ending a money key of the result (``ends``: those the answer
    holds); the result is parsed only where an amount follows such a name."""
    numbers: set[float] | None = None
    result = w.result
    for end in ends:
        if f'_{end}"' not in result and f'"{end}"' not in result:
            continue
        at = low.find(end)
        while at != -1:
            stop_at = at + len(end)
            named = _key_named(low, at, end, result) if not low[stop_at:stop_at + 1].isalpha() else None
            here, at = at, low.find(end, at + 1)
            if named is None:
                continue
            key, phrase = named
            after = low[stop_at:stop_at + 80]
            cut = SENTENCE_END.search(after)
            after = after[:cut.start()] if cut else after
            m = MONEY_BARE.match(after)
            if m is None:
                mm = MONEY.search(after)
                stop = CLAUSE_STOP.search(after)
                m = mm if mm is not None and (stop is None or stop.start() > mm.start()) \
                    and len(_WORDS.findall(after[:mm.start()])) <= 5 else None
            if m is None:
                continue
            said = _num(next(g for g in m.groups() if g))
            if f"{said:g}" in result:
                continue  # the result writes that number (a literal test first: most restatements are right)
            s = _sentence_at(low, here)
            # about the write: the sentence says so, or it names the result's own field and no other id
            if not (w.about(s) or not w.names_other(s)):
                continue
            if numbers is None:
                if w.parsed is None:
                    return None
                numbers = _numbers(w.parsed)
            values = _field_values(w.parsed, key)
            # a sign is not compared: "$-414", "-$414" and a refund "of $414" all say 414 went back
            if values and round(said, 2) not in numbers and all(abs(said - abs(v)) > 0.005 for v in values):
                told = ", ".join(f"{v:g}" for v in sorted(values)[:3])
                return f"the answer says the {phrase} is {said:g}, the write's result says {told}"
    return None


def _status_used(view: TraceView, answer: int, status: str) -> bool:
    """Whether a tool result before the answer gave something the status ``status`` (a literal search per result)."""
    quoted = f'"{status}"'
    for i in view.tool_steps:
        if i >= answer:
            break
        text = view.texts[i]
        if quoted in text and '"status"' in text:  # (a status value is written in lower case: no lowering)
            return True
    return False


def _misstated_status(view: TraceView, answer: int, sentences: list[str], w: _Write) -> str | None:
    """Only sentences that name the written entity (or a word of the tool's name) and hold ``is`` / ``are`` /
    ``status`` are searched; a claimed word is a status when ``STATUSES`` holds it or a tool result used it."""
    if not isinstance(w.parsed, dict) or not isinstance(w.parsed.get("status"), str):
        return None
    actual = w.parsed["status"].lower().strip()
    if not actual:
        return None
    for s in sentences:
        if actual in s or not (" is " in s or " are " in s or "status" in s):
            continue
        if not (w.named_in(s) or any(any(x.startswith(n[:5]) for n in w.words) for x in _WORDS.findall(s))) \
                or not w.about(s):
            continue
        for m in STATUS_CLAIM.finditer(s):
            one, two = m.group(1), m.group(2)
            for said in ((f"{one} {two}", one) if two else (one,)):
                if said in STATUSES or _status_used(view, answer, said):
                    break
            else:
                continue
            if said == actual or said in actual.split() or said.replace("canceled", "cancelled") == actual:
                continue
            return f"the answer says {said!r}, the write's result says {actual!r}"
    return None


def misstated_outcome(view: TraceView) -> Signal | None:
    """The rule on any run (``MisstatedOutcomeDetector.detect`` skips Healthy runs). Literal gates first (see the
    module docstring); most failed runs stop at them."""
    if not view.calls or not view.traj.final_answer:
        return None
    answer = answer_step(view)
    if view.roles[answer] != "assistant" or view.traj.messages[answer].get("tool_calls") \
            or view.traj.messages[answer].get("name"):
        return None
    w = _last_write(view, answer)
    if w is None:
        return None
    text = view.texts[answer]
    low = view.lowered(answer)
    sentences: list[str] | None = None
    why = None
    if w.failed:
        if any(map(low.__contains__, DONE_WORDS)):
            sentences = _sentences(text)
            said = _says_done(sentences, w)
            if said and not _went_through_before(view, w):
                why = f"the answer says it went through: {said.strip()[:120]!r}; the write's result: " \
                      f"{w.result.strip()[:120]!r}"
    else:
        if any(map(low.__contains__, FAILED_WORDS)) and FAILED.search(low) is not None:  # (map: no frame per word)
            sentences = _sentences(text)
            said = _says_failed(sentences, w)
            if said:
                why = f"the answer says it did not go through: {said.strip()[:120]!r}; the write " \
                      f"({w.call.name}) went through"
        result = w.result
        ends = [*filter(low.__contains__, MONEY_KEY_ENDS)] if why is None and has_digit(low) else None
        if ends:  # (filter: no generator frame per word)
            why = _misstated_amount(low[:MAX_ANSWER_CHARS], ends, w)
        if why is None and '"status"' in result and (" is " in low or " are " in low or "status" in low):
            if sentences is None:
                sentences = _sentences(text)
            why = _misstated_status(view, answer, sentences, w)
    if why is None:
        return None
    return Signal(id=MisstatedOutcomeDetector.id, failure_class=FailureClass.F1, step=answer,
                  evidence=f"{why} (last write: {w.call.name} at step {w.call.step})")


class MisstatedOutcomeDetector:
    """F1.misstated_outcome: see the module docstring."""

    id = "F1.misstated_outcome"
    failure_class = FailureClass.F1
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if not cfg.outcome_claims:
            return []  # off by default (its cost: see DiagnosisConfig.outcome_claims)
        t = view.traj
        if t.score is not None and t.score >= cfg.healthy_threshold:
            return []
        found = misstated_outcome(view)
        return [found] if found else []
