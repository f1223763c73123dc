"""``gate_text``: a word test on ``text.lower()`` is sound for a case-blind regex unless the text holds a character that
re folds onto an ASCII letter; ``FOLDS_TO_ASCII`` must be every such character, found by asking re and str.lower about
every code point."""

from __future__ import annotations

import random
import re
import sys

from evoharness.traces.patterns import FOLDS_TO_ASCII, gate_text


def test_folds_to_ascii_is_every_character_outside_ascii_that_re_or_lower_takes_for_an_ascii_letter():
    letter = re.compile(r"[a-zA-Z]", re.IGNORECASE).fullmatch
    chars = [chr(c) for c in range(128, sys.maxunicode + 1)]
    folding = {ch for ch in chars if letter(ch) or (ch.lower() != ch and any(x.isascii() for x in ch.lower()))}
    assert folding == set(FOLDS_TO_ASCII)
    # str.lower keeps every other character one character long (what keeps a match's place in the lower-cased text)
    assert [ch for ch in chars if len(ch.lower()) != 1] == ["\u0130"]
    # and every character's lower case is a word character (\w) exactly when it is: \b falls at the same places in the
    # lower-cased text (what lets a case-sensitive twin of a case-blind regex read it)
    word = re.compile(r"\w").match
    assert [ch for ch in map(chr, range(sys.maxunicode + 1)) if ch != "\u0130"
            and (word(ch) is None) != (word(ch.lower()) is None)] == []


def test_gate_text_is_the_lower_cased_text_unless_a_folding_character_is_there():
    assert gate_text("Access DENIED") == "access denied"
    assert gate_text("Zugriff verweigert: ACCESS DENIED — é") == "zugriff verweigert: access denied — é"
    for f in FOLDS_TO_ASCII:
        assert gate_text("captcha " + f) is None


def test_a_word_missing_from_the_gate_text_means_the_case_blind_regex_finds_nothing():
    words = ["captcha", "denied", "final answer:", "skip", "kelvin"]
    pieces = [*words, "CAPTCHA", "Final Answer:", "é", "ü", "\u00b5", "\u03c3", "\u03a3", "x", " ", "\n",
              *FOLDS_TO_ASCII, "capt\u0131", "\u017fkip", "\u212aelvin", "F\u0130NAL ANSWER:"]
    patterns = [re.compile(re.escape(w), re.IGNORECASE) for w in words]
    rnd = random.Random(11)
    skipped = ran = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        low = gate_text(text)
        for word, pattern in zip(words, patterns, strict=True):
            if low is not None and word not in low:
                skipped += 1
                assert pattern.search(text) is None, (word, text)
            else:
                ran += 1
    assert skipped and ran


def test_the_who_and_when_final_answer_is_the_regexs_also_where_the_gate_skips_it():
    from pathlib import Path

    from evoharness.traces.importers.who_when import FINAL, convert

    pieces = ["FINAL ANSWER: 7", "final answer:  Paris", "F\u0130NAL ANSWER: x", "FINAL AN\u017fWER: y", "FINAL ANSWER",
              "Final Answer: z", "answer: 3", "ERROR: 4", ":", "a:b", "é", "\n", "done", "TERMINATE"]
    rnd = random.Random(13)
    from_regex = 0
    for _ in range(3_000):
        history = [{"name": "Solver", "role": "assistant",
                    "content": "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 3)))}
                   for _ in range(rnd.randint(1, 4))]
        want = None
        for h in history:
            found = FINAL.findall(h["content"])
            if found:
                want = found[-1].strip()
        got = convert(Path("Algorithm-Generated/1.json"), {"question": "q?", "history": history}).final_answer
        if want is not None:  # (else the answer is the last reply's text: not the regex's)
            from_regex += 1
            assert got == want, history
    assert from_regex > 1_000
