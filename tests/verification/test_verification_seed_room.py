"""Fresh-baseline seeds of round r are 1,000 x (r + 1) + i: a round that gave a task more than 1,000 seeds ran into
the next round's (run.rollouts = 1,000 under the default sequential_max_factor 2 asked for 2,000 per task), and round
999's ran into round 1's anchor seeds (1,000,000 + i). Every k the settings take now keeps a round's seeds its own;
one past that is one `error:` line naming the key and the most it may be."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.config import load_settings
from evoharness.errors import InputError
from evoharness.verification.config import SEEDS_PER_ROUND, VerificationConfig
from evoharness.verification.selection import BehaviourAware
from evoharness.verification.sim import SimHarness, SimSource, SimTask, SimWorld
from evoharness.verification.verifier import ANCHOR_SEED_BASE, Verifier
from tests.verification.helpers import T, candidate


def _fresh_seeds(settings, rounds):
    """Per round: the seeds one verification at run.rollouts gives the selected tasks (both sides)."""
    tasks = [SimTask(f"d{i}", "dev", 0.9, 0.1, {T: 0.5} if i < 3 else {}) for i in range(6)]
    world = SimWorld(tasks, noise_sd=0.02, common_seeds=True)
    world.add("main", SimHarness())
    world.add("fix", SimHarness(factor={T: 0.3}))
    cfg = VerificationConfig.of(settings.verification, rollouts=settings.run.rollouts, anchor_rollouts=4)
    verifier = Verifier(SimSource(world), cfg)
    anchor = verifier.measure_anchor("main", list(world.tasks), 4)
    out = {}
    for r in rounds:
        plan = verifier.plan(candidate("fix", round=r), anchor, BehaviourAware(1.0), round=r)
        out[r] = {req.seed for req in plan.requests()}
        per_task = max(sum(1 for q in plan.candidate_requests if q.task_id == t) for t in plan.selection.tasks)
        assert per_task <= SEEDS_PER_ROUND
    return out


@pytest.mark.parametrize("factor", [2.0, 4.0, 0.5])
def test_every_k_the_settings_take_keeps_each_rounds_seeds_its_own(factor):
    taken = []
    for k in (1000, 501, 500, 250, 200):
        overrides = [f"run.rollouts={k}", f"verification.sequential_max_factor={factor}", "run.max_rounds=998"]
        try:
            settings = load_settings(environ={}, overrides=overrides)
        except InputError as e:
            assert e.source == "run.rollouts" and f"at most {SEEDS_PER_ROUND // factor:,.0f}" in e.reason, e.reason
            continue
        taken.append(k)
        last = settings.run.max_rounds
        seeds = _fresh_seeds(settings, [1, 2, last])
        assert not seeds[1] & seeds[2], f"k={k}: rounds 1 and 2 share {len(seeds[1] & seeds[2])} seeds"
        assert max(seeds[last]) < ANCHOR_SEED_BASE  # below round 1's anchor seeds
    assert taken and max(taken) == min(1000, int(SEEDS_PER_ROUND / factor))


def test_off_sequential_the_whole_range_of_run_rollouts_is_taken():
    settings = load_settings(environ={}, overrides=["run.rollouts=1000", "verification.sequential=false"])
    seeds = _fresh_seeds(settings, [1, 2])
    assert not seeds[1] & seeds[2]


def test_a_library_caller_past_the_rounds_seeds_is_refused():
    tasks = [SimTask(f"d{i}", "dev", 0.9, 0.1, {T: 0.5} if i < 3 else {}) for i in range(6)]
    world = SimWorld(tasks, noise_sd=0.02)
    world.add("main", SimHarness())
    verifier = Verifier(SimSource(world), VerificationConfig())
    anchor = verifier.measure_anchor("main", list(world.tasks), 4)
    with pytest.raises(InputError, match="1,200 seeds per task in one round"):
        verifier.plan(candidate("main", round=1), anchor, BehaviourAware(1.0), round=1, k=600)


@pytest.mark.parametrize(("args", "line"), [
    (["--set", "run.rollouts=600", "noise"],
     "error: run.rollouts: 600 rollouts per task at verification.sequential_max_factor 2 is 1,200 seeds per task "
     "in one round, past the 1,000 a round has (round r's fresh seeds are 1,000 x (r + 1) + i): at most 500 at "
     "verification.sequential_max_factor 2 (or verification.sequential = false)"),
    (["--set", "verification.sequential_max_factor=1e6", "noise"],
     "error: settings: verification.sequential_max_factor: Input should be less than or equal to 1000"),
    (["--set", "verification.sequential_max_factor=inf", "noise"],  # every float setting (tests/test_config.py)
     "error: settings: verification.sequential_max_factor: Input should be a finite number"),
    (["--set", "run.max_rounds=999", "noise"],
     "error: settings: run.max_rounds: Input should be less than or equal to 998"),
    (["--set", "verification.bootstrap_samples=100000000", "noise"],
     "error: settings: verification.bootstrap_samples: Input should be less than or equal to 100000"),
    (["--set", "verification.retry_attempts=1000000", "noise"],
     "error: settings: verification.retry_attempts: Input should be less than or equal to 100"),
    (["--set", "roles.max_retries=1000000", "noise"],
     "error: settings: roles.max_retries: Input should be less than or equal to 100"),
    (["--set", "sandbox.gateway.retries=1000000", "noise"],
     "error: settings: sandbox.gateway.retries: Input should be less than or equal to 100"),
    (["--set", "run.max_candidates=1000000", "noise"],
     "error: settings: run.max_candidates: Input should be less than or equal to 100"),
])
def test_a_count_that_drives_work_past_its_limit_is_one_error_line(args, line, capsys):
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [line] and out == ""
