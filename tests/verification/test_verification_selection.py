"""Table tests for the task selection strategies."""

from __future__ import annotations

import random

import pytest

from evoharness.errors import InputError
from evoharness.verification.selection import BehaviourAware, Coreset, FixedSplit, RandomSplit, make_strategy
from tests.verification.helpers import T, anchor_of, cell


def world_anchor():
    """d0-d3 fire T (d0 most often); d4-d7 always healthy; d8 flaky without T; h0-h1 held-out, firing T."""
    obs = []
    obs += cell("d0", [0.1] * 4, [True] * 4)
    obs += cell("d1", [0.1, 0.1, 0.9, 0.9], [True, True, False, False])
    obs += cell("d2", [0.1, 0.9, 0.9, 0.9], [True, False, False, False])
    obs += cell("d3", [0.1, 0.9, 0.9, 0.9], [True, False, False, False])
    for t in ("d4", "d5", "d6", "d7"):
        obs += cell(t, [0.9] * 4)
    obs += cell("d8", [0.0, 1.0, 0.0, 1.0])
    obs += cell("h0", [0.1] * 4, [True] * 4, split="heldout")
    obs += cell("h1", [0.0, 1.0, 0.0, 1.0], [True, False, True, False], split="heldout")
    return anchor_of(obs)


def pick(strategy, max_tasks=24, seed=0):
    return strategy.select(world_anchor(), T, max_tasks, random.Random(seed))


CASES = [
    # strategy, max_tasks, targeted, control size, note
    (BehaviourAware(0.5), 24, ["d0", "d1", "d2", "d3"], 2, "fired, most often first; half as many controls"),
    (BehaviourAware(0.5), 3, ["d0", "d1"], 1, "capped by the budget, keeps the strongest signal"),
    (BehaviourAware(0.0), 24, ["d0", "d1", "d2", "d3"], 0, "no control asked for"),
    (FixedSplit(), 5, ["d0", "d1", "d2", "d3", "d4"], 0, "first dev tasks by id"),
    (Coreset(), 2, ["d1", "d8"], 0, "highest-variance dev tasks"),
]


@pytest.mark.parametrize("strategy, max_tasks, targeted, n_control, note", CASES, ids=[c[4] for c in CASES])
def test_strategy_table(strategy, max_tasks, targeted, n_control, note):
    sel = pick(strategy, max_tasks)
    assert sel.targeted == targeted, note
    assert len(sel.control) == n_control
    assert set(sel.control) <= {"d4", "d5", "d6", "d7"}  # controls are tasks where the anchor was healthy
    assert len(sel.targeted) + len(sel.control) <= max_tasks


def test_alone_rank_takes_first_the_tasks_where_only_the_target_fails():
    """d0 fires T on every rollout, but another behaviour fires beside it each time (an edit to T cannot
    rescue those rollouts); d1 fires T alone twice, d2 and d3 once. Capped at two targeted tasks, "fired"
    keeps d0 and d1, "alone" d1 and d2 (d0 comes last)."""
    obs = [o for o in world_anchor().observations if o.task_id != "d0"]
    obs += [o.model_copy(update={"fired": frozenset({T, "F2.format_rejected"})})
            for o in cell("d0", [0.1] * 4, [True] * 4)]
    anchor = anchor_of(obs)
    fired = BehaviourAware(0.5).select(anchor, T, 3, random.Random(0))
    alone = BehaviourAware(0.5, rank="alone").select(anchor, T, 3, random.Random(0))
    assert fired.targeted == ["d0", "d1"] and alone.targeted == ["d1", "d2"]
    every = BehaviourAware(0.5, rank="alone").select(anchor, T, 24, random.Random(0))
    assert every.targeted == ["d1", "d2", "d3", "d0"]
    assert make_strategy("behaviour_aware", 0.5, "alone").rank == "alone"
    with pytest.raises(ValueError, match="targeted rank"):
        BehaviourAware(rank="vibes")


def test_random_split_samples_dev_tasks_and_varies_with_seed():
    picks = {tuple(pick(RandomSplit(), 4, seed=s).targeted) for s in range(10)}
    assert len(picks) > 3 and all(len(p) == 4 for p in picks)
    assert pick(RandomSplit(), 4, seed=1).targeted == pick(RandomSplit(), 4, seed=1).targeted


@pytest.mark.parametrize("strategy", [BehaviourAware(), FixedSplit(), RandomSplit(), Coreset()],
                         ids=lambda s: s.name)
@pytest.mark.parametrize("seed", range(5))
def test_heldout_tasks_are_never_selected(strategy, seed):
    sel = pick(strategy, 100, seed)
    assert not {"h0", "h1"} & set(sel.tasks)
    assert sel.tasks  # and something was selected


def test_fixed_split_is_the_same_every_round_whatever_the_behaviour():
    anchor = world_anchor()
    a = FixedSplit().select(anchor, T, 3, random.Random(0))
    b = FixedSplit().select(anchor, "F2.format_rejected", 3, random.Random(9))
    assert a.targeted == b.targeted


def test_behaviour_aware_selects_nothing_for_a_behaviour_that_never_fired():
    sel = BehaviourAware().select(world_anchor(), "F2.never", 24, random.Random(0))
    assert sel.targeted == [] and sel.control == []


def test_unknown_strategy_is_a_clear_input_error():
    with pytest.raises(InputError, match="unknown strategy 'nope'"):
        make_strategy("nope")
