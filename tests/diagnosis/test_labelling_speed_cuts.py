"""The twenty-second session's labelling short cuts give the answers of what they replace (docs/benchmarks.md,
"the twenty-second session").

Each test compares a short cut with its plain definition on random cases built to break it: the look-up gate of
``consent.no_action_offered`` (whole words, as bytes) against the same function with the gate always open, over
words cut by punctuation, "_", digits, letters outside ASCII, the Kelvin sign (which lower-cases to "k") and a
right quote (outside ASCII, no word character). It fails with the text's characters outside ASCII dropped instead of
made "?" ("check’s" read as "checks"), or with the punctuation left in the words ("check?" no word of the gate).
"""

from __future__ import annotations

import random
import re

import pytest

from evoharness.diagnosis import consent

_PIECES = ["Would you like me to ", "Do you want me to ", "Shall I ", "Should we ", "Let me know and I'll ",
           "Once you confirm, I will ", "would you like me to just ", "Which flight should I ", "check", "Check",
           "CHECK", "chec\u212a", "look", "find", "search", "read", "see", "cancel", "proceed", "book", "go ahead",
           "checked", "recheck", "rechecks", "your other orders", "the flights", "Is there anything else", "any",
           "other questions", "?", ".", "!", ":", " ", "\n", "_", "1", "é", "’", "’s", "'", "-", "*", "x"]


def test_the_look_up_gate_lets_through_every_reply_the_ungated_function_answers(monkeypatch: pytest.MonkeyPatch):
    rnd = random.Random(41)
    replies = ["".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 12))) for _ in range(8_000)]
    gated = [consent.no_action_offered(r) for r in replies]
    monkeypatch.setattr(consent, "_look_words", lambda low: list(consent._LOOK_BYTES))  # the gate always open
    plain = [consent.no_action_offered(r) for r in replies]
    assert gated == plain
    assert sum(a == "a look-up" for a in plain) > 200 and sum(a == "another matter" for a in plain) > 15


def test_every_whole_word_of_the_look_verbs_is_a_gate_word():
    rnd = random.Random(43)
    found = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 12)))
        words = {w.lower() for w in re.findall(r"\w+", text)} & consent._LOOK
        gate = {w.decode() for w in consent._look_words(text[-400:].lower())}
        assert words <= gate, text
        found += bool(words)
    assert found > 3_000


_LEAVE_PIECES = [*_PIECES, "SHALL I ", "Would You Like Me To ", "PLEASE CONFIRM", "Is That OK", "If you agree, I'LL ",
                 "Can I go ahead", "PROCEED?", "all right with you", "cancel the booking", "change the flight",
                 "Let Me Know and We'll ", "upgrade", "İ", "ſhall I ", "ı", "return it", "What would you like me to "]


def test_the_lower_cased_asking_regex_finds_what_the_case_blind_one_finds(monkeypatch: pytest.MonkeyPatch):
    """``consent._leave_asks`` matches an ASCII tail lower-cased, without ``re.I``: ``leave_asked`` and
    ``no_action_offered`` answer as with the case-blind regex on every reply (fails with the tail not lower-cased:
    "SHALL I" and "Would You Like Me To" are then no asking)."""
    rnd = random.Random(47)
    replies = ["".join(rnd.choice(_LEAVE_PIECES) for _ in range(rnd.randint(0, 14))) for _ in range(8_000)]
    fast = [(consent.leave_asked(r), consent.no_action_offered(r)) for r in replies]
    monkeypatch.setattr(consent, "_leave_asks", lambda tail, low=None: consent._asks_leave_re()[0].finditer(tail))
    plain = [(consent.leave_asked(r), consent.no_action_offered(r)) for r in replies]
    assert fast == plain
    asked = [r for r, (kinds, _) in zip(replies, plain, strict=True) if kinds is not None]
    assert len(asked) > 2_000 and sum(r.isascii() and r != r.lower() for r in asked) > 1_000
