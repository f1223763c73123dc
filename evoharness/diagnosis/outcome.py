"""F1.misstated_outcome: the final answer tells the user something about the run's own last write that the write's
result contradicts.

The write is the last state-changing call before the final answer (``detectors.changes_state``; not a shell command,
whose output is what a program printed, and not a hand-off), read with its result. The result failed when it opens
with ``error`` (tau-bench's and tau2's ``Error: ...``) or is a JSON object with a true ``error`` key or a false
``success`` / ``ok``; otherwise it went through. Each sentence of the final answer (a sentence ends at a newline or at
``. `` / ``! `` / ``? ``) is read clause by clause for one of four claims (``outcome_words`` says how each is
worded), each about the write:

- **failed, where it went through** ("couldn't get your order cancelled", "errored out", "has not been cancelled");
- **went through, where it failed** ("is cancelled", "I've cancelled it", "has been processed"); only when no earlier
  call of the same tool went through (a repeat of a done write is refused as already done);
- **an amount** told as a money field of the result (``amount``, ``refund_amount``, ``price`` ...: a key ending in
  one of ``MONEY_KEY_ENDS``) named by its key's words, or as a refund or a charge, that is none of the result's
  numbers, not the sum of the figures it is told as, and not with the sentence's other amounts one of them; not an
  amount a tool result before gave (a balance, a calculator's answer, another write's payment), a unit's figure
  ("per passenger"), an estimate or a qualified figure ("about", "total", "additional"): the agent's own;
- **a status**: the result's ``status`` for the written entity, and a clause says the entity ``is`` / ``is now`` /
  ``status is`` / ``has been marked as`` another status -- one of the statuses the run's tool results used or of
  ``STATUSES`` -- sharing no word's stem with the result's ("returned" of "return requested" is no contradiction).

A clause that hedges or states a condition claims nothing. A sentence (for a failure, its clause) is about the write
when it names the write's entity (an id the call's arguments or the result's top-level ``*_id`` / ``id`` fields hold,
as a word) or, naming no other id of the run, says the write's verb or object (a word of the tool's name:
``cancel_pending_order`` gives "cancel", "pending", "order", matched by their first five letters: "cancellation") or
a word for any request (``GENERIC``: "request", "action", "change", "transaction", "operation", "update"); an
amount also when it names no other id. The signal is at the final answer.

It runs only with ``diagnosis.outcome_claims = true`` (off by default: about 30 M instructions per 200 tau-bench
airline runs, +8% of labelling, where a default rule may add ~2 M); Healthy runs, multi-agent logs and runs with no
such write are skipped. Literal gates first (a word of failure, a currency sign or a money key's word and a digit in
the answer, ``"status"`` in the result); the result is parsed only past them; patterns are bounded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evoharness.diagnosis.amounts import figure
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import ToolCall, TraceView, failed_result, once
from evoharness.diagnosis.detectors import answer_step, changes_state, has_digit, id_values, is_handoff, is_shell
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.diagnosis.outcome_words import (
    CHARGE_WORDS,
    CLAUSE_END,
    COMPLETION,
    CONCEPT_CUES,
    DONE_CUES,
    DONE_FORMS,
    FAILED,
    FAILED_CUES,
    GENERIC,
    HEDGE,
    LOOK_UPS,
    MONEY_BARE,
    MONEY_CUES,
    MONEY_KEY_ENDS,
    NEGATION,
    NEXT_VERB,
    OTHER,
    PARTICIPLE,
    PER_UNIT,
    QUALIFIERS,
    REFUND_WORDS,
    STATUS_CLAIM,
    STATUS_CUES,
    STATUSES,
    SUCCESS,
    SUMS,
    is_participle,
    money_at,
    verb_forms,
)

MAX_RESULT_CHARS = 100_000
MAX_ANSWER_CHARS = 20_000
SENTENCE_END = re.compile(r"\n|[.!?](?:\s|$)")
_WORDS = re.compile(r"[a-z]+")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
PLAIN_NUMBER = re.compile(r"-?\d{1,12}(?:\.\d{1,6})?")
CLAUSE_STOP = re.compile(r"[,;]|\band\b")


def _sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text[:MAX_ANSWER_CHARS].lower()) if s.strip()]


def _parse(text: str) -> Any:
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        return json.loads(text[:MAX_RESULT_CHARS])
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth, no object read
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

    @once
    def failed(self) -> bool:
        """Whether the result says the write failed (read when a claim needs it)."""
        return failed_result(self.result)

    @once
    def words(self) -> tuple[str, ...]:
        return _name_words(self.call.name)

    @once
    def forms(self) -> tuple[str, ...]:
        return verb_forms(self.words)

    def verb_of(self, word: str) -> bool:
        """Whether ``word`` (a participle: "cancelled", "sent") is a form of a word of the tool's name."""
        return word.startswith(self.forms)

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
        forms = self.forms
        return any(w in GENERIC or w.startswith(forms) for w in _WORDS.findall(sentence))


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
        writes = c.writes  # (kept on the call by the rules that asked first: no call per call)
        if c.step < answer and (writes if writes is not None else changes_state(c)):
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
            if res is not None and not failed_result(res[1]):
                return True
    return False


def _failure_in(clause: str, w: _Write) -> bool:
    """Whether ``clause`` reports that the write did not go through (``outcome_words.FAILED``, read as it says)."""
    if HEDGE.search(clause) or OTHER.search(clause):
        return False
    for m in FAILED.finditer(clause):
        attempt, negated = m.group(1), m.group(3)
        if attempt:
            nxt = NEXT_VERB.match(clause, m.end())
            verb = nxt.group(1) if nxt else ""
            if nxt and verb in ("get", "have", "make"):  # "couldn't get it cancelled": the participle says what
                part = PARTICIPLE.match(clause, nxt.end())
                verb = part.group(1) if part and (part.group(1) in COMPLETION or w.verb_of(part.group(1))) else verb
            if verb in LOOK_UPS:
                continue  # "could not find any other order": a look-up that found nothing, not the write
        elif negated and not (negated in COMPLETION or (is_participle(negated) and w.verb_of(negated))):
            continue  # "is not eligible", "was not charged": no word of the write's outcome
        return w.about(clause)  # the clause's, whichever report of failure: asked once, not once per report
    return False


def _says_failed(sentences: list[str], w: _Write) -> str | None:
    """The first sentence holding a clause that reports the write failed; ``FAILED`` (a long alternation, dear per
    character) runs only on a sentence holding one of ``FAILED_CUES``, literals one of which each of its matches
    holds."""
    for s in sentences:
        padded = f"{s} "
        if any(map(padded.__contains__, FAILED_CUES)) and FAILED.search(s) is not None \
                and any(_failure_in(c, w) for c in CLAUSE_END.split(s)):
            return s
    return None


DONE_COMPLETION = COMPLETION - {"successful", "done", "placed", "saved", "carried"}


def _done_in(clause: str, w: _Write) -> bool:
    """Whether ``clause`` says the write went through: a word of success, or the write's verb (or a verb any write
    completes with) as done; not in a clause that negates, hedges, or says it was so already."""
    if NEGATION.search(clause) or HEDGE.search(clause) or "already" in clause or "tried" in clause \
            or FAILED.search(clause) is not None:
        return False
    done = SUCCESS.search(clause) is not None
    if not done:
        for m in DONE_FORMS.finditer(clause):
            word = next(g for g in m.groups() if g)
            if word in DONE_COMPLETION or (is_participle(word) and w.verb_of(word)):
                done = True
                break
    return done and w.about(clause)


def _says_done(sentences: list[str], w: _Write) -> str | None:
    for s in sentences:
        if any(_done_in(c, w) for c in CLAUSE_END.split(s)):
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
                out.add(round(abs(figure(v)), 2))
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
    if prev and f'"{prev}_{end}":' in result:
        return f"{prev}_{end}", f"{prev} {end}"
    if f'"{end}":' in result and prev not in QUALIFIERS:
        return end, end
    return None


def _sentence_start(low: str, at: int) -> int:
    """Where the sentence of ``low`` holding position ``at`` starts (``SENTENCE_END``'s ends, by literal searches)."""
    return max(low.rfind("\n", 0, at), *(low.rfind(e, 0, at) + 1 for e in (". ", "! ", "? "))) + 1


def _sentence_at(low: str, at: int) -> str:
    """The sentence of ``low`` holding position ``at``."""
    m = SENTENCE_END.search(low, at)
    return low[_sentence_start(low, at):m.start() if m else len(low)]


def _clause_at(s: str, at: int) -> str:
    """The clause of sentence ``s`` holding position ``at`` (``CLAUSE_END``'s ends)."""
    start, end = 0, len(s)
    for m in CLAUSE_END.finditer(s):
        if m.end() <= at:
            start = m.end()
        elif m.start() >= at:
            end = m.start()
            break
    return s[start:end]


def _money_values(node: Any, refund: bool = False, depth: int = 0) -> tuple[list[float], list[float]]:
    """The result's money figures as (refunds, charges), each as a positive number: a number under a money key
    (``MONEY_KEY_ENDS``: ``amount``, ``price``, ``refund_amount`` ...), a refund when its key or an enclosing one says
    "refund", its object's values do (``"transaction_type": "refund"``), or it is negative (tau-bench airline writes a
    refund as a payment of -amount)."""
    refunds: list[float] = []
    charges: list[float] = []
    if depth > 12:
        return refunds, charges
    items = node if isinstance(node, list) else [node]
    for item in items:
        if isinstance(item, list):
            r, c = _money_values(item, refund, depth + 1)
            refunds += r
            charges += c
        if not isinstance(item, dict):
            continue
        typed = refund or any(isinstance(v, str) and "refund" in v.lower() for v in item.values())
        for k, v in item.items():
            k = str(k).lower()
            if isinstance(v, dict | list):
                r, c = _money_values(v, typed or "refund" in k, depth + 1)
                refunds += r
                charges += c
                continue
            if not k.endswith(MONEY_KEY_ENDS) or isinstance(v, bool):
                continue
            f = _float(v) if isinstance(v, int | float) else \
                float(v) if isinstance(v, str) and PLAIN_NUMBER.fullmatch(v.strip()) else None
            if f is not None:
                (refunds if typed or "refund" in k or f < 0 else charges).append(abs(f))
    return refunds, charges


def _in_result(said: float, result: str) -> bool:
    """Whether the result's text writes ``said`` as a number of its own (not inside a longer one): a literal test
    that spares the parse where an answer restates its result rightly, as most do."""
    text = f"{said:g}"  # (JSON writes 1234.5, 600; tau2's strings "4.0": the "4" of it, a "." after it)
    at = result.find(text)
    while at != -1:
        end = at + len(text)
        if (at == 0 or not (result[at - 1].isdigit() or result[at - 1] == ".")) and \
                (end == len(result) or not result[end].isdigit()):
            return True
        at = result.find(text, at + 1)
    return False


def _amounts(low: str, result: str) -> list[tuple[int, float, str | None]]:
    """Each amount of the answer: (where, how much, the result's money key it is told as, if its name comes within
    five words before it in its clause: "the refund amount is $12", "the amount is 1111.00"): money as written
    (``outcome_words.money_at``), and a bare number right after a money key's name. Literal searches first; the
    result's text is searched for a key only where a name of one stands before an amount."""
    out = []
    for at, _, value in money_at(low):
        out.append((at, value, _named_before(low, at, result)))
    for end in MONEY_KEY_ENDS:
        at = low.find(end)
        while at != -1:
            stop_at = at + len(end)
            m = MONEY_BARE.match(low, stop_at, stop_at + 40) if not low[stop_at:stop_at + 1].isalpha() else None
            if m is not None and (named := _key_named(low, at, end, result)) is not None:
                out.append((m.start(1), figure(m.group(1)), named[0]))
            at = low.find(end, at + 1)
    return sorted(out)


def _named_before(low: str, at: int, result: str) -> str | None:
    """The result's money key named within five words before position ``at`` in its clause (the nearest), if any."""
    window = low[max(0, at - 60):at]
    cut = CLAUSE_STOP.search(window[::-1])  # (the nearest stop before ``at``: the reversed window's first)
    if cut is not None:
        window = window[len(window) - cut.start():]
    best = None
    for end in MONEY_KEY_ENDS:
        i = window.rfind(end)
        if i == -1 or (best is not None and i < best[0]) or len(_WORDS.findall(window[i:])) > 6:
            continue
        named = _key_named(low, at - len(window) + i, end, result)
        if named is not None:
            best = (i, named[0])
    return best[1] if best else None


def _given_before(w: _Write, said: float) -> bool:
    """Whether a tool result before the answer other than the write's own writes ``said`` (another write's figure, a
    balance read earlier, a calculator's answer): the answer may be telling that one."""
    view = w._view
    own = view.results.get(w.call.id, (-1, ""))[0]
    return any(_in_result(said, view.texts[i]) for i in view.tool_steps if i < w._answer and i != own)


def _misstated_amount(low: str, w: _Write) -> str | None:
    """An amount of the answer, told as the result's money key or as a refund / charge, that is none of the result's
    numbers, nor a sum of the figures it is told as, nor with the sentence's other amounts a number of the result.
    Literal first: an amount the result's text writes is a restatement, and the result is parsed only past that."""
    result = w.result
    found = None
    amounts = _amounts(low, result)
    for at, said, key in amounts:
        if said == 0 or _in_result(said, result):
            continue
        s_at = _sentence_start(low, at)
        if key is None:
            near = low[max(s_at, at - 60):at + 60]
            if not any(map(near.__contains__, CONCEPT_CUES)):
                continue  # "Gift Card: $128": no word of a refund or a charge near it (a literal gate)
            words = _WORDS.findall(low[max(s_at, at - 60):at])
            if any(x in QUALIFIERS for x in words[-3:]) or not SUMS.isdisjoint(words[-8:]):
                continue  # "the total price is $243", "about $50", "an additional $114": the agent's own figure
        s = _sentence_at(low, at)
        clause = _clause_at(s, at - s_at)
        concept = None
        if key is None:
            concept = "refund" if REFUND_WORDS.search(clause) else "charge" if CHARGE_WORDS.search(clause) else None
            if concept is None:
                continue
        if HEDGE.search(clause) or OTHER.search(clause):
            continue  # "you may be charged up to", "your other order had a refund of"
        parsed = w.parsed
        if parsed is None:
            return None
        if found is None:
            found = (_numbers(parsed), _money_values(parsed))
        numbers, (refunds, charges) = found
        if key is not None:
            values, phrase = _field_values(parsed, key), key.replace("_", " ")
        else:
            values, phrase = (refunds, "refund") if concept == "refund" else (charges, "charge")
        if not values or round(said, 2) in numbers or any(abs(said - abs(v)) <= 0.005 for v in values):
            continue
        if abs(said - sum(abs(v) for v in values)) <= 0.005:
            continue  # the parts' sum: "a refund of $1,300" of 1,250 and 50
        others = [v for a, v, _ in amounts if a != at and _sentence_start(low, a) == s_at]
        if others and round(said + sum(others), 2) in numbers:
            continue  # a part of a split: "$50 to your gift card and $1,250 to your card" of 1,300
        if not PER_UNIT.isdisjoint(_WORDS.findall(low[at:at + 30])[:3]):
            continue  # "$38 per passenger", "$20 each": a unit's figure, not the write's
        # about the write: the sentence says so, or it names no other id
        if not (w.about(s) or not w.names_other(s)):
            continue
        if _given_before(w, said):
            continue  # "the payment of $600" a calculator gave, "your $62 gift card": a figure of another result
        told = ", ".join(f"{v:g}" for v in sorted(set(values))[:3])
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
    """Only sentences that name the written entity (or a word of the tool's name) and hold a status cue are searched,
    clause by clause (a hedged one claims nothing); a claimed word is a status when ``STATUSES`` holds it or a tool
    result used it, and it contradicts unless it shares a word's stem with the result's ("returned" of "return
    requested")."""
    if not isinstance(w.parsed, dict) or not isinstance(w.parsed.get("status"), str):
        return None
    actual = w.parsed["status"].lower().strip()
    if not actual:
        return None
    stems = tuple(x[:5] for x in _WORDS.findall(actual.replace("canceled", "cancelled")))
    forms = w.forms
    for s in sentences:
        if actual in s or not any(map(s.__contains__, STATUS_CUES)) or STATUS_CLAIM.search(s) is None:
            continue
        if not (w.named_in(s) or any(x.startswith(forms) for x in _WORDS.findall(s))) or not w.about(s):
            continue
        for clause in CLAUSE_END.split(s):
            if HEDGE.search(clause):
                continue
            for m in STATUS_CLAIM.finditer(clause):
                one, two = m.group(1), m.group(2)
                for said in ((f"{one} {two}", one) if two else (one,)):
                    if said in STATUSES or _status_used(view, answer, said):
                        break
                else:
                    continue
                if said.replace("canceled", "cancelled").startswith(stems):
                    continue  # the result's own status, or a form of one of its words
                return f"the answer says {said!r}, the write's result says {actual!r}"
    return None


def misstated_outcome(view: TraceView) -> Signal | None:
    """The rule on any run (``MisstatedOutcomeDetector.detect`` skips Healthy runs). Literal gates first, each holding
    a literal that every match of the claim's pattern holds (see the module docstring); most failed runs stop at
    them, and the write's result is read only past them."""
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
    contains = low.__contains__
    sentences: list[str] | None = None
    why = None
    # (map: no generator frame per word) the result's outcome first: each claim needs it
    if w.failed:
        if any(map(contains, DONE_CUES)):
            sentences = _sentences(text)
            said = _says_done(sentences, w)
            if said and not _went_through_before(view, w):
                why = f"the answer says it went through: {said.strip()[:120]!r}; the write's result: " \
                      f"{w.result.strip()[:120]!r}"
    else:
        if any(map(f"{low} ".__contains__, FAILED_CUES)):
            sentences = _sentences(text)
            said = _says_failed(sentences, w)
            if said:
                why = f"the answer says it did not go through: {said.strip()[:120]!r}; the write " \
                      f"({w.call.name}) went through"
        if why is None and has_digit(low) and (any(map(contains, MONEY_CUES))
                                               or any(map(contains, MONEY_KEY_ENDS))):
            why = _misstated_amount(low[:MAX_ANSWER_CHARS], w)
        if why is None and '"status"' in w.result and any(map(contains, STATUS_CUES)):
            why = _misstated_status(view, answer, sentences or _sentences(text), w)
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
