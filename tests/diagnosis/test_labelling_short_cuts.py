"""The ninth pass's labelling short cuts give the answers of what they replace (docs/benchmarks.md, "ninth session").

Each test compares a short cut with its plain definition on random cases built to break it: the affirmative words
found from their own regex (no leading ``\\b``), the grounding's memory of found tokens, ``quote`` made from the
text's head, the missing-entity test of every tool result's head at once, and the labeller leaving out the detectors
that return nothing on a Healthy run. Each fails with its short cut's guard left out (a word character missed, the
memory read past ``SCAN_LIMIT``, the head's fallback dropped, the heads joined without a newline, a flag on a
detector that can fire on a Healthy run).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.diagnosis import consent, environment
from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import GroundTokens, quote
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import iter_files, load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_affirmative_words_are_the_matches_of_the_bounded_regex():
    # words at a word's start and inside a word ("book", "eyes", "unsure"), after every kind of character that is or
    # is not \w (a digit, "_", a letter outside ASCII, a digit outside ASCII, a combining mark)
    pieces = ["yes", "yeah", "yep", "eyes", "confirm", "confirmed", "confirmation", "go ahead", "go", "ahead",
              "proceed", "please do", "please", "do it", "doit", "sure", "unsure", "ok", "okay", "book", "correct",
              "incorrect", " ", "_", "1", "é", "\u00b5", "\u0660", "\u0301", ".", "\n", "'", "-", "x"]
    rnd = random.Random(23)
    matched = 0
    for _ in range(30_000):
        low = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8)))
        want = [m.group(1) for m in consent._AFFIRMATIVE_LOW.finditer(low)]
        assert list(consent._affirmative_words(low)) == want, low
        matched += bool(want)
    assert matched > 3_000


def test_a_message_may_affirm_rules_out_holds_no_yes_nor_request():
    # the cheap test before the user-quit rule's yes (``consent.may_affirm``) is False only where neither a word of
    # assent nor a request to act is read: pieces of every AFFIRMATIVE alternative and request shape, joined by every
    # kind of separator (punctuation, "_", a digit, a letter outside ASCII)
    pieces = ["yes", "Yeah", "yup", "confirmed", "go ahead", "go on", "carry on", "continue", "proceed", "please do",
              "do it", "sure", "OK", "okay", "correct", "alright", "all right", "absolutely", "of course", "agreed",
              "approve", "sounds good", "that works", "works for me", "go for it", "let's do it", "lets do that",
              "by all means", "that's right", "cancel", "book", "change", "swap", "it", "the booking", "can you",
              "could you", "now", "thanks", "not", "no", "bye", "###STOP###", " ", ", ", ". ", "? ", "!", "_", "1",
              "é", "’", "-", ";", ":", "\n", "(", ")", "x"]
    rnd = random.Random(29)
    yes = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 7)))
        said = consent.affirmative(text) or consent.request_kinds(text) is not None
        assert consent.may_affirm(text) or not said, text
        yes += said
    assert yes > 2_000


class _Forgets(set):
    """A memory that never holds anything: the grounding then searches every question."""

    def __contains__(self, item: object) -> bool:
        return False

    def add(self, item: object) -> None:
        pass


def test_the_grounding_answers_a_repeated_question_as_a_search_would():
    # past SCAN_LIMIT a question is answered from the texts' token set, where "abc1" (part of "xabc12") is not found
    # though a search finds it: the memory must not answer there
    words = ["xabc12", "abc1", "HAT069", "hat069", "2024-05-15", "05-15", "mia_li_3668", "li_3668", "zz", "a b"]
    rnd = random.Random(5)
    for _ in range(300):
        texts = [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 4))) for _ in range(rnd.randint(0, 3))]
        kept, plain = GroundTokens(texts), GroundTokens(texts)
        plain.found = _Forgets()
        for _ in range(rnd.randint(0, 150)):
            if rnd.random() < 0.1:
                more = " ".join(rnd.choice(words) for _ in range(3))
                kept.add(more)
                plain.add(more)
            tok = rnd.choice(words).lower()
            assert (tok in kept) == (tok in plain), (texts, tok, kept.asked)


def _quote_by_definition(text: object, limit: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def test_quote_from_the_head_is_the_quote_of_the_whole_text():
    pieces = ["word", "x", " ", "  ", "\n", "\t", "\u00a0", "\u2003", " " * 50, "é", "long" * 30]
    rnd = random.Random(9)
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        limit = rnd.choice([1, 2, 5, 60, 120, 200])
        assert quote(text, limit) == _quote_by_definition(text, limit), (text, limit)
    assert quote(12345, 3) == "12…"


def test_missing_in_the_joined_heads_is_missing_in_one_head():
    # phrases cut across two heads ("no" | " such"), in upper case, with a dotted capital I
    pieces = ["not found", "NOT FOUND", "not", " found", "does not exist", "doesn't exist", "no such", "no", " such",
              "unknown", "unkno", "wn", "İ", "x", " ", "\n", '{"a": 1}']
    rnd = random.Random(31)
    said = 0
    for _ in range(20_000):
        heads = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 3))) for _ in range(rnd.randint(0, 4))]
        joined = environment._says_missing("\n".join(heads).lower())
        assert joined is any(environment._says_missing(h.lower()) for h in heads), heads
        said += joined
    assert said > 1_000


def _insisting_run(result: str):
    return (TraceBuilder("t").user("change reservation ZX9931")
            .call("get_reservation_details", {"reservation_id": "ZX9931"}, result=result)
            .user("But ZX9931 is my reservation!").deliver("sorry").build(score=0.0))


def test_a_missing_entity_said_at_the_end_of_a_results_head_is_still_found():
    # the phrase ends at the head's last character, in upper case; cut at the head's end it is no phrase
    head = "Reservation ZX9931: "
    found = _insisting_run(head + "x" * (environment.MISSING_CHARS - len(head) - 9) + "NOT FOUND")
    assert environment.UnsatisfiableTaskDetector().find(TraceView.of(found))
    cut = _insisting_run(head + "x" * (environment.MISSING_CHARS - len(head) - 8) + "NOT FOUND")
    assert environment.UnsatisfiableTaskDetector().find(TraceView.of(cut)) == []


class _Spy:
    id = "F1.spy"
    failure_class = FailureClass.F1
    skips_healthy = True

    def __init__(self) -> None:
        self.seen: list[str] = []

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        self.seen.append(view.traj.id)
        return []


def test_the_labeller_does_not_call_a_detector_that_skips_healthy_runs_on_one():
    spy = _Spy()
    labeller = Labeller(detectors=[spy])
    healthy = TraceBuilder("t", id="ok").user("x").deliver("done").build(score=1.0)
    failed = TraceBuilder("t", id="bad").user("x").deliver("done").build(score=0.0)
    unscored = TraceBuilder("t", id="unscored").user("x").deliver("done").build()
    for t in (healthy, failed, unscored):
        labeller.label(t)
    assert spy.seen == ["bad", "unscored"]


def _fixture_runs() -> list:
    runs = []
    for root in (FIXTURES / "data" / "tau_bench_airline_gpt4o", FIXTURES / "data" / "mini_swe_agent_sample",
                 FIXTURES / "traces" / "tau_retail", FIXTURES / "traces" / "tau2", FIXTURES / "traces" / "swe_agent"):
        for path in iter_files([root]):
            runs.extend(load_file(path))
    return runs


@pytest.mark.parametrize("detector", [d for d in default_catalogue() if getattr(d, "skips_healthy", False)],
                         ids=lambda d: d.id)
def test_a_detector_flagged_as_skipping_healthy_runs_finds_nothing_on_one(detector):
    # the same runs failed make most of these detectors fire: the flag is what the labeller trusts
    cfg = DiagnosisConfig(entity_claims=True)
    runs = _fixture_runs()
    assert runs
    for t in runs:
        assert detector.detect(TraceView.of(t.model_copy(update={"score": 1.0})), cfg) == [], t.id


@pytest.mark.parametrize("module", ["context", "consent", "invariants", "multiagent", "write_targets", "detectors",
                                    "coding", "stalls", "environment", "claims", "elapsed", "amounts", "catalogue",
                                    "labeller"])
def test_each_diagnosis_module_imports_on_its_own(module):
    # detectors now imports consent, invariants, multiagent and write_targets at load (a function-level import cost
    # ~1 us a call); none of them may import detectors at load, or the module imported first would find the other
    # half-made
    out = subprocess.run([sys.executable, "-c", f"import evoharness.diagnosis.{module}"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr


def test_the_fence_and_patch_tests_are_their_definitions():
    from evoharness.diagnosis.detectors import _looks_like_patch, has_fence

    pieces = ["`", "``", "```", "``x`", "@", "@@", "\n@@ ", "\n@ @", "diff --git", "--- ", " ", "\n", "x", "é"]
    rnd = random.Random(41)
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        assert has_fence(text) is ("```" in text), text
        assert _looks_like_patch(text) is (text.lstrip().startswith(("diff --git", "--- ")) or "\n@@ " in text), text
