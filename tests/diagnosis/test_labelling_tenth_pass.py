"""The tenth pass's labelling cuts give the answers of what they replace (docs/benchmarks.md, "tenth session").

The claim check makes the texts of the agent's own writes (``_written``) only when a search first misses the messages:
the grounding holding texts back (``GroundTokens(later=...)``) answers as one holding them all, and the claim check's
signals on random runs are those of the check written out as it was, the writes added at their steps.
"""

from __future__ import annotations

import random

from evoharness.diagnosis import detectors
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import (
    FENCE_ANY,
    EntityStatus,
    GroundTokens,
    UnbackedClaimDetector,
    has_fence,
    id_like_runs,
)
from evoharness.traces.builder import TraceBuilder

WORDS = ["xabc12", "abc1", "HAT069", "hat069", "2024-05-15", "05-15", "mia_li_3668", "li_3668", "zz", "a b",
         "ZQ7781", "AB1234", "12345678"]


def test_the_grounding_holding_texts_back_answers_as_one_holding_them_all():
    # questions past SCAN_LIMIT (the token set), repeated ones (the memory), texts added before and after the held-back
    # ones are made; a held-back text is made once, when a search first misses the others
    rnd = random.Random(17)
    made = 0
    for _ in range(400):
        texts = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 4))) for _ in range(rnd.randint(0, 3))]
        held = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 3))) for _ in range(rnd.randint(0, 3))]
        calls = []

        def later(held=held, calls=calls):
            calls.append(1)
            return list(held)

        lazy, plain = GroundTokens(texts, later=later), GroundTokens(held + texts)
        for _ in range(rnd.randint(0, 150)):
            if rnd.random() < 0.1:
                more = " ".join(rnd.choice(WORDS) for _ in range(3))
                lazy.add(more)
                plain.add(more)
            tok = rnd.choice(WORDS).lower()
            assert (tok in lazy) == (tok in plain), (texts, held, tok, plain.asked)
        assert len(calls) <= 1
        made += len(calls)
    assert 50 < made < 400  # some groundings needed the held-back texts, some never did


def _claim_by_definition(view: TraceView, cfg: DiagnosisConfig) -> list[tuple[int, str]]:
    """The claim check as it was before the tenth pass, every write's arguments added at its step: (step, how its
    evidence starts) of the signal it fires."""
    ground = GroundTokens([view.traj.task or ""])
    statuses = EntityStatus()
    written = detectors._written(view)
    found: tuple[int, str] | None = None  # (step, the evidence's start)
    for i, content in enumerate(view.texts):
        for text in written.get(i, ()):
            ground.add(text)
        if not content:
            continue
        if view.roles[i] != "assistant":
            ground.add(content)
            if view.roles[i] == "tool" and '"status"' in content:
                statuses.read(content)
            continue
        if view.traj.messages[i].get("tool_calls"):
            continue
        prose = FENCE_ANY.sub(" ", content) if has_fence(content) else content
        if statuses.latest and statuses.contradicted(prose):
            found = (i, "contradicts the latest tool result: ")
            break
        ids = id_like_runs(prose)
        missing = detectors._unbacked([t.strip("-_") for t in ids], ground, cfg.unbacked_min_len) if ids else []
        if len(missing) >= cfg.unbacked_min:
            found = (i, f"first claimed here, in no earlier tool result or message: {', '.join(missing[:5])} — ")
            break
    if found:
        return [found]
    tokens = [t for t in detectors.claim_tokens(view.traj.final_answer or "")
              if len(t.strip("-_")) >= cfg.unbacked_min_len]
    missing = detectors._unbacked(tokens, ground, cfg.unbacked_min_len) if tokens else []
    if len(missing) >= cfg.unbacked_min:
        return [(detectors.answer_step(view), f"not in any tool result or the task: {', '.join(missing[:5])} — ")]
    return []


def _random_run(rnd: random.Random):
    b = TraceBuilder("t").user("help with " + rnd.choice(WORDS))
    for _ in range(rnd.randint(1, 8)):
        kind = rnd.random()
        ids = [rnd.choice(WORDS) for _ in range(rnd.randint(1, 3))]
        if kind < 0.3:  # a write that went through, was refused, or has no result
            result = rnd.choice(["ok", "Error: no", None, '{"status": "cancelled", "reservation_id": "AB1234"}'])
            b.call(rnd.choice(["update_reservation", "book_reservation", "cancel_reservation"]),
                   {"reservation_id": ids[0], "note": " ".join(ids)}, result=result)
        elif kind < 0.5:
            b.call("get_reservation_details", {"reservation_id": ids[0]},
                   result=rnd.choice([f'{{"status": "active", "reservation_id": "{ids[0]}"}}', " ".join(ids)]))
        elif kind < 0.7:
            b.user("my id is " + " ".join(ids))
        else:  # a reply; now and then one naming more ids than SCAN_LIMIT questions
            many = rnd.random() < 0.05
            b.say("Done: " + " ".join(rnd.choice(WORDS) for _ in range(70 if many else rnd.randint(1, 4))))
    return b.deliver("Your reservation " + rnd.choice(WORDS) + " is set").build(score=0.0)


def test_the_claim_check_finds_what_it_found_with_every_write_added_at_its_step():
    rnd = random.Random(41)
    cfg = DiagnosisConfig()
    fired = 0
    for _ in range(1_500):
        t = _random_run(rnd)
        got = [(s.step, s.evidence) for s in UnbackedClaimDetector().detect(TraceView.of(t), cfg)]
        want = _claim_by_definition(TraceView.of(t), cfg)
        assert len(got) == len(want), t.messages
        assert [(step, evidence[:len(start)]) for (step, evidence), (_, start) in zip(got, want, strict=True)] == want
        fired += bool(got)
    assert 200 < fired < 1_400


def test_a_run_whose_replies_the_messages_back_never_makes_its_writes_texts(monkeypatch):
    made = []
    real = detectors._written
    monkeypatch.setattr(detectors, "_written", lambda view: made.append(1) or real(view))
    cfg = DiagnosisConfig()
    backed = (TraceBuilder("t").user("change reservation ZQ7781")
              .call("update_reservation", {"reservation_id": "ZQ7781", "note": "AB1234"}, result="ok")
              .say("Reservation ZQ7781 is updated.").deliver("Done: ZQ7781").build(score=0.0))
    assert UnbackedClaimDetector().detect(TraceView.of(backed), cfg) == []
    assert made == []
    # a note only the write itself holds: the writes are made, and back the reply
    own = (TraceBuilder("t").user("change reservation ZQ7781")
           .call("update_reservation", {"reservation_id": "ZQ7781", "note": "AB1234"}, result="ok")
           .say("I noted AB1234 on ZQ7781.").deliver("Done").build(score=0.0))
    assert UnbackedClaimDetector().detect(TraceView.of(own), cfg) == []
    assert made == [1]
