"""Anchors and the anchor book survive a checkpoint; optimism is recorded per round."""

from __future__ import annotations

import pytest

from evoharness.verification.anchors import Anchor, AnchorBook
from evoharness.verification.guards import GuardBook
from tests.verification.helpers import T, anchor_of, cell


def test_anchor_round_trips_through_json_for_checkpoints():
    anchor = anchor_of(cell("d0", [0.2, 0.4], [True, False]) + cell("h0", [1.0, 1.0], split="heldout"), k=2)
    restored = Anchor.model_validate_json(anchor.model_dump_json())
    assert restored == anchor
    assert restored.observations[0].fired == frozenset({T})
    assert restored.dev_tasks() == ["d0"]  # held-out tasks are measured but never dev
    assert restored.mean == pytest.approx(0.3)  # the anchor's mean is over dev rollouts only


def test_book_records_optimism_each_round_and_the_bar_follows_the_fresh_anchor():
    book = AnchorBook()
    book.start(anchor_of(cell("d0", [0.5, 0.5]) + cell("d1", [0.5, 0.5]), k=2))
    fresh1 = anchor_of(cell("d0", [0.6, 0.6]) + cell("d1", [0.8, 0.8]), k=2).model_copy(update={"round": 1})
    rec1 = book.record_fresh(fresh1, "candidate/r1-a", reading=0.75, tasks=["d0"])
    assert rec1.fresh == pytest.approx(0.6) and rec1.optimism == pytest.approx(0.15)  # on the tasks it read
    assert book.bar() == pytest.approx(0.7)
    fresh2 = fresh1.model_copy(update={"round": 2})
    book.record_fresh(fresh2, "candidate/r2-b", reading=0.7)
    assert [r.round for r in book.optimism] == [1, 2]
    assert AnchorBook.model_validate(book.model_dump()).bar() == pytest.approx(0.7)


def test_empty_book_has_no_bar():
    with pytest.raises(LookupError):
        AnchorBook().bar()


def test_guard_book_pins_only_failures_that_were_fixed():
    before = anchor_of(cell("d0", [0.0, 0.0], [True, True]) + cell("d1", [0.0, 0.0], [True, True])
                       + cell("d2", [0.9, 0.9]), k=2)
    after = anchor_of(cell("d0", [0.9, 0.9]) + cell("d1", [0.0, 0.9], [True, False]) + cell("d2", [0.9, 0.9]),
                      k=2)
    guards = GuardBook()
    assert guards.pin_fixed(before, after, round=3) == ["d0", "d1"]
    assert guards.pinned == {"d0": 3, "d1": 3}
