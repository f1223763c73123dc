"""How a final answer says that a write failed, went through, moved an amount or left a status: read as an English
reader reads them, clause by clause (``outcome.py`` decides whether what is said contradicts the write's result).

- **failed**: an attempt reported as not succeeding -- "could not" / "couldn't" / "was unable to" / "wasn't able
  to" / "failed to" / "did not manage to" / "it was not possible to" followed by the verb tried ("couldn't *get*
  your reservation *cancelled*": the participle after "get" / "have" is the verb), a failure said outright ("the
  cancellation failed", "errored out", "ran into an error", "did not go through", "was declined",
  "unsuccessful"), or the write's own verb negated ("has not been cancelled", "wasn't processed"). Present forms
  ("I'm unable to", "I cannot") decline what is asked next and report no attempt; a look-up that found nothing
  ("could not find") is no write;
- **went through**: "successfully", "all done", "went through", "is complete", or the write's verb as done ("has
  been cancelled", "is now cancelled", "was cancelled", "I've cancelled"), in a clause with no negation;
- a clause that hedges ("if", "may", "might", "whether", "not sure", "once", "should it") claims neither;
- **an amount**: money as people write it -- "$1,300.00", "$1,300", "USD 1300", "1300 USD", "1,300 dollars",
  "$1.3k" (a "k" only after a currency sign or before "dollars": a bare "1.3k" is no amount) -- and what it is
  of: a money field named by its key's words ("the refund amount is"), a refund ("refund", "refunded", "back",
  "credited", "reimbursed") or a charge ("charged", "paid", "payment", "billed", "cost"). An amount after an
  estimate or a qualifier ("about", "up to", "total", "additional", "remaining", "each") is the agent's own figure;
- **a status**: "is X", "is now X", "are currently X", "status is X", "status changed to X", "has been marked as
  X", "set to X", "now shows as X".
"""

from __future__ import annotations

import re

# a report that an attempt did not succeed, in three groups: (1) an attempt negated, the verb tried after it;
# (2) a failure said outright; (3) a done-form negated, the verb after it. Words single-spaced (a lowered answer)
FAILED = re.compile(
    r"\b(?:(could ?n[o'’]t|(?:was|were) (?:unable|not able)|(?:wasn|weren)['’]t able|(?:did ?n[o'’]t|didn['’]t) "
    r"manage|failed(?= to\b)|(?:was|wasn['’]t|was not) possible(?= to\b))"
    r"|(failed|errored(?: out)?|(?:ran|run|running) into (?:an? |some )?(?:\w+ )?(?:error|problem|issue)|"
    r"(?:hit|encountered|got|received|returned|threw|gave) (?:me |us )?(?:an? )?(?:\w+ )?error|"
    r"(?:did ?n[o'’]t|didn['’]t|never|has ?n[o'’]t|hasn['’]t|have ?n[o'’]t|haven['’]t) (?:go|gone|went) through|"
    r"(?:did ?n[o'’]t|didn['’]t) (?:succeed|work)|(?:was|were) (?:declined|rejected|refused)|"
    r"(?:wasn|weren)['’]t successful|(?:was|were) not successful|unsuccessful)"
    r"|(?:has|have|had|was|were|is|are)(?: not| never|n['’]t)(?: yet)?(?: been)?(?: yet)? ([a-z]+))\b")
# literals one of which every FAILED match holds: an exact gate before the regex
FAILED_CUES = (" not ", "n't ", "n’t ", "unable", "fail", "error", "problem", "issue", "never ", "unsucc", "declined",
               "rejected", "refused")
# the word after an attempt: "could not [be] *cancelled*", "was unable to *cancel*"
NEXT_VERB = re.compile(r"\s+(?:to\s+)?(?:be\s+)?([a-z]+)")
# "couldn't get your reservation cancelled": the participle a few words after "get" / "have" is what was tried
PARTICIPLE = re.compile(r"(?:\s+[a-z0-9#'’-]+){0,6}?\s+([a-z]+(?:ed|en))\b")
LOOK_UPS = frozenset(("find", "found", "locate", "located", "see", "seen", "retrieve", "retrieved", "look", "looked",
                      "get", "access", "accessed", "verify", "verified", "identify", "identified", "fetch", "fetched",
                      "load", "loaded", "reach", "reached", "search", "searched", "match", "matched", "confirm",
                      "confirmed", "determine", "pull", "check", "checked", "have", "make"))
# verbs any write completes with: "the request has not been processed", "the change was completed"
COMPLETION = frozenset(("completed", "processed", "applied", "submitted", "finalized", "finalised", "executed",
                        "successful", "done", "made", "placed", "saved", "carried"))
# irregular past forms a write's verb takes
IRREGULAR = {"send": ("sent",), "make": ("made",), "pay": ("paid",), "set": ("set",), "put": ("put",),
             "issue": ("issued",), "refuel": ("refuelled", "refueled")}
CLAUSE_END = re.compile(r"[;,:]\s+(?:and|but|while|though|although|so|because|since)\b|;|\bbut\b|\bhowever\b|"
                        r"\bbecause\b|\bsince\b|\balthough\b")
# a clause that hedges or puts the outcome under a condition claims nothing
HEDGE = re.compile(r"\b(?:if|whether|may|might|maybe|perhaps|unless|once|until|should it|in case|not sure|"
                   r"could have|would have|may have|might have|possibly|in the event)\b")
# a clause about another entity than the one written ("the other one", "the second reservation")
OTHER = re.compile(r"\b(?:other|another|second|third|remaining|rest of|previous|earlier|both)\b")
NEGATION = re.compile(r"\b(?:not|never|no longer|unable)\b|n['’]t\b")
SUCCESS = re.compile(r"\b(?:successful(?:ly)?|success|succeeded|all\s+(?:done|set)|(?:went|gone)\s+through|"
                     r"(?:is|are|was|has\s+been)\s+(?:now\s+)?complete(?:d)?)\b")
DONE_FORMS = re.compile(r"\b(?:has|have|had)\s+(?:now\s+|just\s+)?been\s+([a-z]+)|\b(?:is|are|was|were|got)\s+"
                        r"(?:now\s+)?([a-z]+)|\bi(?:['’]ve|\s+have)?(?:\s+(?:now|just|gone ahead and|went ahead and|"
                        r"successfully))?\s+([a-z]+(?:ed|en|t))\b")
DONE_CUES = ("success", "done", "all set", "through", "complete", "been", "is ", "are ", "was ", "were ", "got ",
             "i ", "i'", "i’")
# a word for any request: a clause that says one may be about the write ("the request could not be completed")
GENERIC = frozenset(("request", "requests", "action", "change", "changes", "transaction", "operation", "update"))

# statuses a reply may claim of an entity besides those the run's tool results used
STATUSES = ("pending", "processing", "processed", "delivered", "shipped", "cancelled", "canceled", "confirmed",
            "active", "inactive", "suspended", "completed", "complete", "open", "closed", "refunded", "returned",
            "exchanged", "approved", "rejected", "declined", "failed", "expired", "scheduled", "booked", "paid",
            "unpaid", "on hold", "resolved", "in progress", "enabled", "disabled")
# a status claimed, one or two words: a status only when ``STATUSES`` holds it or a tool result used it
STATUS_CLAIM = re.compile(
    r"\b(?:status\s+(?:has\s+been\s+|was\s+|is\s+)?(?:changed|updated|set|moved)\s+to|"
    r"status\s+(?:is|was|of\s+[^.]{0,60}?\s+is|:)|(?:marked|set|changed|updated|moved|switched)\s+(?:as|to)|"
    r"(?:shows?|showing|listed|appears)\s+as|"
    r"(?:is|are)(?:\s+(?:now|currently))?(?!\s+(?:marked|set|changed|updated|moved|switched|listed|showing)\b))"
    r"\s+\**([a-z]+)(?:[ -]([a-z]+))?")
STATUS_CUES = (" is ", " are ", "status", " as ", " to ")

# an amount as written: $1,234.50 / USD 1234.50 / 1,234.50 USD / 1234.5 dollars / $1.3k (a bare number: MONEY_BARE)
NUMBER = r"(\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d{1,12}(?:\.\d{1,2})?)"
THOUSANDS = r"(?:\s?(k|thousand)\b)?"
# money as written, read at a currency sign or word found by a literal search (``money_at``): the amount after a sign
# ("$1,300.00", "USD 1300"), or before a word ("1,300 dollars", "1300 USD")
MONEY = re.compile(rf"(?:\$|usd|€|£)\s?-?{NUMBER}{THOUSANDS}(?![\d,]*\.?\d)")
MONEY_BEFORE = re.compile(rf"(?<![\d.,]){NUMBER}{THOUSANDS}\s?$")
CURRENCY_WORDS = re.compile(r"(?:usd|dollars?|bucks|eur|euros?)\b")
MONEY_SIGNS = ("$", "usd", "€", "£")
MONEY_WORDS = ("usd", "dollar", "buck", "eur")
MONEY_CUES = ("$", "usd", "dollar", "buck", "€", "£", "eur")
MONEY_BARE = re.compile(rf"\s*(?:is|was|of|=|:|will\s+be|comes\s+to|totals?)\s*\**\s*{NUMBER}\b(?![.,]?\d)(?!\s*%)")
MONEY_KEY_ENDS = ("amount", "charge", "price", "balance", "total", "refund", "cost", "fee", "fare", "paid")
# what an amount is of, by the words of its clause: money back to the user, or money taken
REFUND_WORDS = re.compile(r"\b(?:refund(?:ed|s)?|back|credited|reimburs\w*|returned to)\b")
CONCEPT_CUES = ("refund", "back", "credit", "reimburs", "returned", "charg", "paid", "pay", "bill", "cost")
CHARGE_WORDS = re.compile(r"\b(?:charg(?:e|ed|es)|paid|pay|payment|billed|cost)\b")
# an amount after one of these is the agent's own figure (an estimate, a sum, a part, a bound)
# a clause that sums ("the total refund across your orders") states the agent's own figure
SUMS = frozenset(("total", "overall", "combined", "across", "altogether", "together", "sum", "all"))
PER_UNIT = frozenset(("per", "each", "apiece"))  # after an amount: a unit's figure
QUALIFIERS = frozenset(("total", "new", "additional", "extra", "remaining", "overall", "combined", "difference",
                        "estimated", "original", "old", "previous", "former", "per", "each", "average", "net",
                        "about", "around", "approximately", "roughly", "nearly", "almost", "up", "over", "under",
                        "least", "than", "most", "another", "other", "saved", "savings", "balance", "worth"))


def verb_forms(words: tuple[str, ...]) -> tuple[str, ...]:
    """What the tool's name words match a participle by: each word's first five letters (``cancellation``, ``cancelled``
    for ``cancel``), the word itself when shorter, and its irregular past forms."""
    out = [w[:5] for w in words]
    for w in words:
        out.extend(IRREGULAR.get(w, ()))
    return tuple(out)


def is_participle(word: str) -> bool:
    return word.endswith(("ed", "en")) or word in ("sent", "made", "paid", "set", "put", "done")


def _value(number: str, scale: str | None) -> float:
    value = float(number.replace(",", ""))
    return value * 1000 if scale else value


def money_at(low: str) -> list[tuple[int, int, float]]:
    """Each amount of money in ``low`` (lower-cased): (start, end, how much; "k" / "thousand": times 1,000), found
    from each currency sign or word (literal searches) and read there, never by a scan of the whole text."""
    out = []
    for sign in MONEY_SIGNS:
        at = low.find(sign)
        while at != -1:
            if not (sign == "usd" and at > 0 and low[at - 1].isalnum()):
                m = MONEY.match(low, at)
                if m is not None:
                    out.append((at, m.end(), _value(m.group(1), m.group(2))))
            at = low.find(sign, at + 1)
    for word in MONEY_WORDS:
        at = low.find(word)
        while at != -1:
            if (at == 0 or not low[at - 1].isalpha()) and CURRENCY_WORDS.match(low, at) is not None:
                m = MONEY_BEFORE.search(low, max(0, at - 24), at)
                if m is not None and not any(s <= m.start() < e for s, e, _ in out):
                    out.append((m.start(), at, _value(m.group(1), m.group(2))))
            at = low.find(word, at + 1)
    return sorted(out)


def money_value(m: re.Match[str]) -> float:
    """The amount a ``MONEY`` or ``MONEY_BARE`` match says."""
    return _value(m.group(1), m.group(2) if m.re is MONEY else None)
