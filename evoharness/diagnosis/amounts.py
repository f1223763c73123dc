"""F1.amount_claim: a reply states an amount that the run's own numbers contradict.

The agent often does the arithmetic of a payment itself, or reads it off a calculator tool; a slip there is a
misreading of tool output (F1), not a plan failure. Two checks, both on a sentence of an assistant message's text
(a sentence ends at a newline or at ". " / "! " / "? "), both arithmetic on numbers the sentence or the tool wrote:

- **covers**: the sentence says a balance or credit of ``$A`` covers (``cover``, ``covers``, ``covering``) an amount
  ``$B`` -- ``balance of $A`` (or ``credit of``, ``funds of``) before ``cover``, ``$B`` the first amount after it --
  and ``A < B``; a negation or a part (``not``, ``n't``, ``insufficient``, ``part``, ``partly``, ``partially``,
  ``portion``, ``some of``) in the sentence makes it no claim ("a balance of $280 is not enough to cover $340",
  "a balance of $50 will cover part of the $80" are right), and so does another subject for ``cover`` between
  them (a comma, ``;``, ``and``, ``but``, another payment method: "a balance of $100 will be applied, and your
  credit card will cover the remaining $250" is right);
- **sign**: the latest tool result before the reply, with no user message between, is a bare negative number
  ``-N`` (a calculator's answer: the new price is lower), and the reply states ``$N`` as something the user pays
  (``additional``, ``extra``, ``charge``, ``pay``, ``owe``, ``cost`` in the sentence) with no word of money coming
  back (``refund``, ``credit``, ``back``, ``save``, ``less``, ``lower``, ``cheaper``, ``reduc``, ``return``).

The signal is at the reply (the earlier of the two). Healthy runs are skipped (their label cannot change). The scan
is literal first (a reply holding ``cover`` and ``$``, a tool result opening with ``-``); patterns are bounded.
"""

from __future__ import annotations

import re

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.failed_only import FailedRunDetector
from evoharness.diagnosis.models import FailureClass, Signal

MAX_REPLY_CHARS = 20_000
AMOUNT = r"\$\s?(\d[\d,]{0,12}(?:\.\d{1,2})?)"
COVERS = re.compile(r"\b(?:balance|credit|funds)\s+of\s+" + AMOUNT + r"(?P<gap>[^$\n]{0,120}?)\bcover(?:s|ing)?\b"
                    r"[^$\n]{0,80}?" + AMOUNT)
COVER_NEGATED = re.compile(r"\bnot\b|n['’]t\b|\binsufficient\b|\bpart(?:ly|ially)?\b|\bportion\b|\bsome of\b")
# the balance is not what is said to cover: another clause or another payment method between them ("a balance of
# $100 will be applied, and your credit card will cover the remaining $250")
COVER_OTHER_SUBJECT = re.compile(r"[,;:()]|\b(?:and|but|while|then|card|certificate|voucher|paypal|account|cash)\b")
NEGATIVE = re.compile(r"-(\d{1,12}(?:\.\d+)?)\s*")
PAYS = re.compile(r"\b(?:additional|extra|charge[ds]?|pay|owe|cost)\b")
COMES_BACK = re.compile(r"\b(?:refund\w*|credit\w*|back|sav\w*|less|lower|cheaper|reduc\w*|return\w*)\b")
SENTENCE_END = re.compile(r"\n|[.!?] ")
SENTENCE_CHARS = 300  # a sentence is read at most this far either side of its "cover"


def figure(s: str) -> float:
    """A figure as written: digits with thousands separators ("1,250.50"). ``outcome`` reads amounts by it too."""
    return float(s.replace(",", ""))


def _sentences(low: str) -> list[str]:
    return SENTENCE_END.split(low[:MAX_REPLY_CHARS])


def _sentence_around(text: str, at: int) -> str:
    """The lower-cased sentence of ``text`` holding position ``at``, read at most ``SENTENCE_CHARS`` either side."""
    lo = max(0, at - SENTENCE_CHARS)
    left = text[lo:at]
    cut = max(left.rfind("\n"), left.rfind(". "), left.rfind("! "), left.rfind("? "))
    right = text[at:at + SENTENCE_CHARS]
    m = SENTENCE_END.search(right)
    return (left[cut + 1:] + (right[:m.start()] if m else right)).lower()


def _covers(text: str) -> str | None:
    """The covers check on a reply's raw text: only the sentences around its "cover"s are read."""
    at = text.find("cover", 0, MAX_REPLY_CHARS)
    while at != -1:
        s = _sentence_around(text, at)
        if "$" in s and ("balance of" in s or "credit of" in s or "funds of" in s):
            m = COVERS.search(s)
            if m and figure(m.group(1)) < figure(m.group(3)) and not COVER_NEGATED.search(s) \
                    and not COVER_OTHER_SUBJECT.search(m["gap"]):
                return f"says a balance of ${m.group(1)} covers ${m.group(3)}"
        at = text.find("cover", at + 5, MAX_REPLY_CHARS)
    return None


def _sign(low: str, n: float) -> str | None:
    for s in _sentences(low):
        if "$" not in s or not PAYS.search(s) or COMES_BACK.search(s):
            continue
        for m in re.finditer(AMOUNT, s):
            if figure(m.group(1)) == n:
                return f"states ${m.group(1)} as a charge, where the tool's answer just before was -{n:g} " \
                       "(money back)"
    return None


def first_amount_contradiction(view: TraceView) -> Signal | None:
    """The rule on any run (``AmountClaimDetector.detect`` skips Healthy ones). Literal tests first: a reply holding
    "cover" and "$" for the covers check; a tool result opening with "-" for the sign check."""
    texts, roles = view.texts, view.roles
    # most runs have neither: two comprehensions (a Python loop over every message of every failed run would cost
    # more than the rest of the rule; a join of the replies and one search costs more than this)
    covers = [i for i in view.assistant_steps if "cover" in texts[i]]
    negatives = [j for j in view.tool_steps if texts[j][:1] == "-"]
    if not covers and not negatives:
        return None
    found: list[tuple[int, str]] = []
    for i in covers:
        if "$" in texts[i]:
            why = _covers(texts[i])
            if why:
                found.append((i, why))
                break
    for j in negatives:
        text = texts[j]
        if len(text) > 40 or (found and j > found[0][0]):
            continue
        m = NEGATIVE.fullmatch(text)
        if m is None:
            continue
        # the reply that reads it: the next assistant text with an amount, before any user message or tool result
        for k in range(j + 1, len(roles)):
            if roles[k] != "assistant":
                break
            if "$" in texts[k]:
                why = _sign(view.lowered(k), float(m.group(1)))
                if why:
                    found.append((k, why))
                break
    if not found:
        return None
    step, why = min(found)
    return Signal(id=AmountClaimDetector.id, failure_class=FailureClass.F1, step=step, evidence=why)


class AmountClaimDetector(FailedRunDetector):
    """F1.amount_claim: see the module docstring."""

    id = "F1.amount_claim"
    find = staticmethod(first_amount_contradiction)
