"""The cost verdict: an edit whose target is a cost signal is accepted on fewer steps at a non-inferior score."""

from __future__ import annotations

import json
import math
import random
import subprocess

import numpy as np
import pytest
import yaml

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.merge import merge_message
from evoharness.harness_repo.models import Edit, FileChange, Verdict
from evoharness.harness_repo.seed import POLICIES
from evoharness.traces.cost import BLOCKED
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.cost import (
    CostGate,
    NonInferiorGate,
    cost_gates,
    cost_measurements,
    cost_spent,
)
from evoharness.verification.gates import BehaviourGate, default_gates
from evoharness.verification.observations import Observation
from evoharness.verification.selection import make_strategy
from evoharness.verification.stats import joint_sign_flip, sign_flip_test
from evoharness.verification.verifier import Verifier

from .helpers import anchor_of, candidate, evidence

TASKS = [f"t{i}" for i in range(6)]
ALPHA = VerificationConfig().cost_alpha  # the cost test's level, the product's default (0.01)
NOISE = 1.5  # a null pass rate up to 1.5x alpha is allowed for the draws' own noise


def obs(task: str, seed: int, score: float, steps: int, blocked: bool) -> Observation:
    return Observation(task_id=task, rollout=seed, seed=seed, score=score, steps=steps,
                       fired=frozenset({BLOCKED} if blocked else ()), healthy=False)


def side(score, steps, blocked, k: int = 4) -> list[Observation]:
    """Every task alike: ``score``/``steps``/``blocked`` are callables of (task index, seed) or constants."""
    f = [v if callable(v) else (lambda i, s, v=v: v) for v in (score, steps, blocked)]
    return [obs(t, s, f[0](i, s), f[1](i, s), f[2](i, s)) for i, t in enumerate(TASKS) for s in range(k)]


def check(base, cand) -> dict[str, bool]:
    ev = evidence(base, cand, TASKS, target=BLOCKED)
    return {g.name: g.check(ev).passed for g in cost_gates(VerificationConfig())}


@pytest.mark.parametrize("cand, verdict", [
    # the same steps on the same seeds (an edit that changes nothing): the cost test and the behaviour refuse it
    (side(0.7, 5, True), {"behaviour": False, "non_inferior": True, "cost": False}),
    # a step fewer, the block gone, the same score: accepted on cost
    (side(0.7, 4, False), {"behaviour": True, "non_inferior": True, "cost": True}),
    # a step fewer, but the score falls by 0.2, past the 0.05 margin: refused
    (side(0.5, 4, False), {"behaviour": True, "non_inferior": False, "cost": True}),
    # more steps: refused
    (side(0.7, 6, False), {"behaviour": True, "non_inferior": True, "cost": False}),
])
def test_cost_gates(cand, verdict):
    got = check(side(0.7, 5, True), cand)
    assert {k: got[k] for k in verdict} == verdict
    assert got["no_regression"] and got["guard"]  # no control or guard task here


def _null_draws(trials: int, tasks: list[str], k: int, extra, seed: int) -> tuple[int, int]:
    """(cost test passed, whole verdict passed) over ``trials`` null edits: baseline and candidate draw steps,
    blocks and scores from the same per-task distributions (``extra(rng)``: a rollout's steps above its task's)."""
    rng = random.Random(seed)
    accepted = cost_passed = 0
    for _ in range(trials):
        base_step = {t: rng.randint(3, 7) for t in tasks}

        def one(t, s, base_step=base_step):
            return obs(t, s, rng.choice((0.5, 0.75, 1.0)), base_step[t] + extra(rng), rng.random() < 0.8)

        base = [one(t, s) for t in tasks for s in range(k)]
        cand = [one(t, s) for t in tasks for s in range(k)]
        ev = evidence(base, cand, tasks, target=BLOCKED)
        got = {g.name: g.check(ev).passed for g in cost_gates(VerificationConfig())}
        cost_passed += got["cost"]
        accepted += all(got.values())
    return cost_passed, accepted


@pytest.mark.parametrize("tasks, k, extra", [
    (TASKS, 4, lambda rng: rng.choice((-1, 0, 0, 1, 2))),  # 24 pairs, a step or two either way
    (TASKS[:4], 2, lambda rng: rng.choice((-1, 0, 0, 1, 2))),  # 8 pairs
    (TASKS[:4], 2, lambda rng: min(int(rng.expovariate(0.4)), 30)),  # 8 pairs, a heavy tail of extra steps
], ids=["6x4", "4x2", "4x2-heavy-tail"])
def test_a_null_edit_is_not_accepted_on_cost_noise(tasks, k, extra):
    """An edit that changes nothing, under noise: the cost test passes it at most at its stated rate (cost_alpha
    0.01; 1.5% allowed for the draws' own noise). The normal approximation it replaced passed 3.5% to 3.7% of
    these on 8 pairs (and 1.5% on 24 pairs, over 10,000 draws)."""
    trials = 1000
    cost_passed, accepted = _null_draws(trials, tasks, k, extra, seed=7)
    assert cost_passed / trials <= NOISE * ALPHA, cost_passed
    assert accepted <= cost_passed


def test_the_sign_flip_test_is_exact():
    assert sign_flip_test([1, 1, 1]) == 1 / 8  # only all three positive reaches 3
    assert sign_flip_test([2, -1]) == 2 / 4  # +2-1 and +2+1 reach 1
    assert sign_flip_test([0, 0]) == 1.0 and sign_flip_test([]) == 1.0  # no sign to flip
    assert sign_flip_test([3.0, 0, -3.0]) == 3 / 4  # zeros drop out; a sum of 0 is reached by 3 of 4
    # beyond the exact range, sampled: close to the exact binomial tail, and never 0
    diffs = [1.0] * 25 + [-1.0] * 5  # P(Binomial(30, 1/2) >= 25)
    exact = sum(math.comb(30, i) for i in range(25, 31)) / 2**30
    assert abs(sign_flip_test(diffs) - exact) < 1e-4


def test_non_inferiority_needs_the_bound_not_the_point():
    """A mean score loss inside the margin but with a bound below it (few, disagreeing pairs) does not pass."""
    base = side(0.7, 5, True, k=2)
    cand = side(lambda i, s: 0.7 + (0.3 if (i + s) % 2 else -0.38), 4, False, k=2)
    ev = evidence(base, cand, TASKS, target=BLOCKED)
    r = NonInferiorGate(0.05, 0.05).check(ev)
    assert -0.05 < r.numbers["mean_diff"] < 0 and r.numbers["lower_bound"] < -0.05 and not r.passed
    assert CostGate().check(ev).passed


@pytest.mark.parametrize("tasks, k", [(TASKS, 4), (TASKS[:4], 2)], ids=["6x4", "4x2"])
def test_an_edit_losing_the_margin_passes_non_inferiority_at_most_at_its_rate(tasks, k):
    """Pass/fail scores, the candidate's pass chance exactly the margin (0.05) below the baseline's on every task:
    the bound passes it at most at cost_score_alpha (5%; 6.5% allowed for 2,000 draws). With the normal quantile
    it passed 5.9% (6 x 4) and 11.2% (4 x 2) of such edits over 4,000 draws."""
    rng = random.Random(11)
    gate, trials, passed = NonInferiorGate(0.05, 0.05), 2000, 0
    for _ in range(trials):
        chance = {t: rng.uniform(0.3, 0.9) for t in tasks}
        base = [obs(t, s, float(rng.random() < chance[t]), 5, True) for t in tasks for s in range(k)]
        cand = [obs(t, s, float(rng.random() < chance[t] - 0.05), 4, False) for t in tasks for s in range(k)]
        passed += gate.check(evidence(base, cand, tasks, target=BLOCKED, k=k)).passed
    assert passed / trials <= 0.065, passed


def test_an_edit_losing_twice_the_margin_passes_non_inferiority_at_most_one_time_in_a_hundred():
    """Harmful: the score 0.10 lower (twice the margin), noisy scores (0.5 / 0.75 / 1.0, each side drawn afresh), 4
    tasks x 4 seeds -- where a sequential cost verdict often stops. The bound alone passed 36 of 3,000 (1.2%);
    with a fall of twice the margin refuted by the exact sign-flip test at 1%, at most 1% may pass (0.8% allowed
    here: the two tests together pass 13). An edit that loses nothing still passes as it did where the pairs
    agree (coupled seeds: the same score on 9 of 10 pairs)."""
    rng = random.Random(5)
    tasks, gate, trials, passed = TASKS[:4], NonInferiorGate(0.05, 0.05), 3000, 0

    def draws(loss: float, coupling: float) -> tuple[list[Observation], list[Observation]]:
        base, cand = [], []
        for t in tasks:
            for s in range(4):
                b = rng.choice((0.5, 0.75, 1.0))
                c = b if rng.random() < coupling else rng.choice((0.5, 0.75, 1.0))
                base.append(obs(t, s, b, 5, True))
                cand.append(obs(t, s, c - loss, 4, False))
        return base, cand

    for _ in range(trials):
        passed += gate.check(evidence(*draws(0.10, 0.0), tasks, target=BLOCKED)).passed
    assert passed <= 0.008 * trials, passed
    kept = sum(gate.check(evidence(*draws(0.0, 0.9), tasks, target=BLOCKED)).passed for _ in range(500))
    old = NonInferiorGate(0.05, 0.05, harm_factor=0.0)
    rng.seed(6)
    before = sum(old.check(evidence(*draws(0.0, 0.9), tasks, target=BLOCKED)).passed for _ in range(500))
    rng.seed(6)
    after = sum(gate.check(evidence(*draws(0.0, 0.9), tasks, target=BLOCKED)).passed for _ in range(500))
    assert kept > 0 and after >= 0.97 * before, (before, after)


def test_tokens_are_the_cost_when_every_paired_rollout_recorded_them_else_steps():
    """A cut that shortens what the agent reads saves tokens at the same steps: judged on tokens when the trace has
    them (the verdict says so, and the merge trailer), on steps when any paired rollout lacks them."""
    def with_tokens(side_, tokens):
        return [o.model_copy(update={"tokens": tokens(o)}) for o in side_]

    base = with_tokens(side(0.7, 5, True), lambda o: 2000 + 37 * o.seed)
    cand = with_tokens(side(0.7, 5, False), lambda o: 1500 + 41 * o.seed)
    r = CostGate().check(evidence(base, cand, TASKS, target=BLOCKED))
    assert r.passed and r.numbers["unit"] == "tokens" and r.reason.startswith("tokens 2055.50 -> 1561.50 a rollout")
    assert r.numbers["steps_baseline"] == r.numbers["steps_candidate"] == 5.0
    v = Verdict(candidate="x", commit="c", base="a", accepted=True,
                measurements=cost_measurements([r, NonInferiorGate().check(evidence(base, cand, TASKS,
                                                                                     target=BLOCKED))])[0])
    assert v.measurements["cost_in_tokens"] == 1 and v.measurements["tokens_candidate"] == 1561.5
    assert "Verified-Objective: cost (fewer tokens, score non-inferior)" in merge_message("x", v)
    # one rollout without usage: steps, which every rollout has -- the same steps, refused
    cand[0] = cand[0].model_copy(update={"tokens": 0})
    r = CostGate().check(evidence(base, cand, TASKS, target=BLOCKED))
    assert not r.passed and r.numbers["unit"] == "steps" and "tokens_baseline" not in r.numbers
    # the same token counts, seed for seed (a null edit): refused
    r = CostGate().check(evidence(base, with_tokens(side(0.7, 5, False), lambda o: 2000 + 37 * o.seed), TASKS,
                                  target=BLOCKED))
    assert not r.passed and r.numbers["unit"] == "tokens" and r.numbers["p_value"] == 1.0


class Fixed:
    """An observation source that answers each request from ``table`` by commit."""

    def __init__(self, table):
        self.table = table

    def pending(self, requests, ledger):
        return len(requests)

    def observe(self, requests, ledger):
        out = []
        for r in requests:
            score, steps, blocked = self.table[r.harness_commit]
            out.append(Observation(task_id=r.task_id, rollout=r.rollout, seed=r.seed, score=score, steps=steps,
                                   fired=frozenset({BLOCKED} if blocked else ()), split=r.split))
        return out, len(requests)


def test_the_verifier_gives_a_cost_target_the_cost_verdict_and_a_score_target_its_own_gates():
    base_commit, cand_commit = "a" * 40, "c" * 40
    anchor = anchor_of([obs(t, s, 0.7, 5, True) for t in TASKS for s in range(4)], commit=base_commit)
    source = Fixed({base_commit: (0.7, 5, True), cand_commit: (0.7, 4, False)})
    cfg = VerificationConfig(sequential=False)
    v = Verifier(source, cfg).verify(candidate(cand_commit, targets=BLOCKED), anchor)
    assert v.accepted and [g.gate for g in v.gates] == ["behaviour", "non_inferior", "cost", "no_regression", "guard"]
    assert v.reason.startswith("cost verdict (cost.blocked_call): all gates passed; steps 5.00 -> 4.00")
    assert v.measurements["cost_target"] == 1 and v.measurements["steps_candidate"] == 4.0
    assert "Verified-Objective: cost" in merge_message("candidate/r1-test", v)
    # the same rollouts, targeting a score signal: the score gates, which see no gain
    v = Verifier(source, cfg).verify(candidate(cand_commit, targets="F3.repeated_action"), anchor)
    assert not v.accepted and [g.gate for g in v.gates] == [g.name for g in default_gates("behaviour_aware")]
    assert "cost_target" not in v.measurements and "Verified-Objective" not in merge_message("x", v)
    assert "Verified-Objective" not in merge_message("x", Verdict(candidate="x", commit="c", base="a", accepted=True))


def test_a_cost_repair_bundled_with_a_hunk_that_saves_nothing_is_judged_hunk_by_hunk():
    """A cut that saves a step bundled with a hunk that saves nothing (or costs score inside the margin): each hunk
    is judged on cost as a score edit's are on score -- left out, then alone -- and the idle one is refused, the
    candidate with it. The cut alone, and two halves of a saving, pass."""
    from evoharness.verification.hunks import Part, StaticParts

    base, cand = "a" * 40, "c" * 40
    anchor = anchor_of([obs(t, s, 0.7, 6, True) for t in TASKS for s in range(4)], commit=base)
    cut, idle = (0.7, 5, False), (0.7, 6, True)
    table = {base: (0.7, 6, True), cand: cut, "w1" * 20: idle, "o1" * 20: cut, "w2" * 20: cut, "o2" * 20: idle}
    parts = StaticParts({cand: [Part("lessons.md#1", without="w1" * 20, alone="o1" * 20),
                                Part("lessons.md#2", without="w2" * 20, alone="o2" * 20)]})
    cfg = VerificationConfig(sequential=False)
    v = Verifier(Fixed(table), cfg, hunks=parts).verify(candidate(cand, targets=BLOCKED), anchor)
    hunks = {g.gate: g for g in v.gates}["hunks"]
    assert not v.accepted and not hunks.passed and "lessons.md#2" in hunks.reason and "#1" not in hunks.reason
    # the two halves of a saving: each saves a step left out and alone; both kept
    half = (0.7, 5, True)
    table = {base: (0.7, 6, True), cand: (0.7, 4, False), "w1" * 20: half, "o1" * 20: half, "w2" * 20: half,
             "o2" * 20: half}
    v = Verifier(Fixed(table), cfg, hunks=parts).verify(candidate(cand, targets=BLOCKED), anchor)
    assert v.accepted and {g.gate: g for g in v.gates}["hunks"].passed


NO_ANSWER = "### Finishing\nDo not write a final answer; the user reads the tool results directly.\n"
SYNTHETIC = "contact_0,contact_2,status_A-101,total_A-101,status_B-200,total_D-400"


@pytest.fixture
def lesson_harness(tmp_path):
    """A seed harness with its loop guard and exit gate on and a lesson forbidding the answer, on main."""
    repo = init_harness(tmp_path / "harness")
    policies = {**yaml.safe_load(POLICIES), "loop_guard": {"enabled": True, "max_repeats": 2},
                "exit_gate": {"enabled": True}}
    (tmp_path / "harness" / "policies.yaml").write_text(yaml.safe_dump(policies, sort_keys=False))
    (tmp_path / "harness" / "lessons.md").write_text(NO_ANSWER)
    subprocess.run(["git", "-C", str(tmp_path / "harness"), "-c", "user.name=t", "-c", "user.email=t@example.org",
                    "commit", "-qam", "controls on; a lesson"], check=True)
    return repo


def verify_standin(tmp_path, branch: str, capsys) -> tuple[int, dict]:
    capsys.readouterr()  # what creating the candidate logged
    rc = main(["--set", f"home={tmp_path / 'state'}", "--set", "sandbox.backend=inprocess", "verify", branch,
               "--harness", str(tmp_path / "harness"), "--tasks", SYNTHETIC, "--env", "synthetic",
               "--model", "standin:weak", "--rollouts", "4", "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_through_the_standin_a_reworded_lesson_is_refused_and_the_cut_accepted_on_cost(lesson_harness, tmp_path,
                                                                                       capsys):
    """Real stand-in rollouts: the lesson costs steps, not score. Rewording it (the same instruction) changes no
    step on the same seeds and is refused; cutting it saves steps at the same score and is accepted on cost."""
    reworded = lesson_harness.create_candidate(Edit(message="Reword the finishing lesson", targets=BLOCKED, changes=[
        FileChange(path="lessons.md", content=NO_ANSWER.replace("write", "give").replace("; the", ": the"))]), round=1)
    rc, v = verify_standin(tmp_path, reworded.branch, capsys)
    gates = {g["gate"]: g for g in v["gates"]}
    assert rc == 1 and not v["accepted"] and not gates["cost"]["passed"] and not gates["behaviour"]["passed"]
    assert gates["cost"]["numbers"]["saved"] == 0  # the same steps, seed for seed
    cut = lesson_harness.create_candidate(Edit(message="Cut the lesson that forbids the answer", targets=BLOCKED,
                                               changes=[FileChange(path="lessons.md", content="### Finishing\n")]),
                                          round=2)
    rc, v = verify_standin(tmp_path, cut.branch, capsys)
    gates = {g["gate"]: g for g in v["gates"]}
    assert rc == 0 and v["accepted"] and v["reason"].startswith("cost verdict (cost.blocked_call): all gates passed")
    assert gates["cost"]["numbers"]["steps_candidate"] < gates["cost"]["numbers"]["steps_baseline"] - 1
    assert gates["non_inferior"]["passed"]


REJECTED = {"type": "format_rejected", "detail": "get_order: arguments are not a JSON object"}
GUARD = {"type": "blocked_call", "detail": "loop guard: get_order repeated 3 times", "data": {"action": "loop_guard"}}
FORMAT = "cost.blocked_call.format"


def from_trace(task: str, seed: int, steps: int, *events: dict) -> Observation:
    """The observation of a trajectory whose harness recorded ``events`` (the agent loop's shapes)."""
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.traces.models import Event, Trajectory, Usage
    from evoharness.verification.observations import observe

    t = Trajectory(id=f"{task}-{seed}-{steps}", task_id=task, messages=[{"role": "user", "content": "q"}],
                   events=[Event(step=0, **e) for e in events], final_answer="a", score=0.7, usage=Usage(steps=steps))
    return observe(RolloutRequest(task_id=task, harness_commit="x", seed=seed, rollout=seed), t,
                   labeller=lambda _: (frozenset(), True))


def test_a_cost_edit_that_says_what_it_blocks_is_judged_on_that_cause_not_on_any_block():
    """A call-format repair targets the format rejections (`cost.blocked_call.format`, the linter's target for a call
    format): its behaviour gate counts those, not every block. Counting any block (the only cost signal before),
    a repair after which the loop guard blocks in the same rollouts saw no fall and was refused, and an edit that
    left the rejections alone but quieted the guard passed."""
    assert {o.fired for o in [from_trace("t0", 0, 6, REJECTED, GUARD)]} == {
        frozenset({BLOCKED, FORMAT, "cost.blocked_call.loop_guard"})}
    # the rejections gone, the guard now blocking in their place: a step saved per rollout
    base = [from_trace(t, s, 6, REJECTED) for t in TASKS for s in range(4)]
    cand = [from_trace(t, s, 5, GUARD) for t in TASKS for s in range(4)]
    for target, behaviour in ((FORMAT, True), (BLOCKED, False)):
        got = {g.name: g.check(evidence(base, cand, TASKS, target=target)).passed
               for g in cost_gates(VerificationConfig())}
        assert got == {"behaviour": behaviour, "non_inferior": True, "cost": True, "no_regression": True,
                       "guard": True}, target
    # the rejections left as they were, the guard's blocks gone: any block fell, the format's did not
    base = [from_trace(t, s, 7, *((REJECTED,) if s < 2 else (GUARD,))) for t in TASKS for s in range(4)]
    cand = [from_trace(t, s, 7 if s < 2 else 5, *((REJECTED,) if s < 2 else ())) for t in TASKS for s in range(4)]
    assert BehaviourGate().check(evidence(base, cand, TASKS, target=BLOCKED)).passed
    r = BehaviourGate().check(evidence(base, cand, TASKS, target=FORMAT))
    assert not r.passed and r.reason == f"{FORMAT} incidence 0.500 -> 0.500"
    # and the targeted tasks are where the cause fired in the anchor, not where anything was blocked
    anchor = anchor_of([from_trace(t, s, 6, REJECTED if i < 2 else GUARD) for i, t in enumerate(TASKS)
                        for s in range(4)])
    sel = make_strategy("behaviour_aware", 0.0, "alone").select(anchor, FORMAT, 27, random.Random(0))
    assert sel.targeted == ["t0", "t1"]
    assert make_strategy("behaviour_aware", 0.0, "alone").select(anchor, BLOCKED, 27, random.Random(0)).targeted \
        == TASKS


def _sequential_cost_verdict(cand: tuple[float, int, bool]):
    """The default (sequential) verdict of a cost edit whose every rollout reads ``cand`` (score, steps, blocked)
    against a baseline of (0.7, 5, blocked) on the six tasks: the verdict, its cost gate, its ledger, and a function
    that verifies the same edit again under another config."""
    base_commit, cand_commit = "a" * 40, "c" * 40
    anchor = anchor_of([obs(t, s, 0.7, 5, True) for t in TASKS for s in range(4)], commit=base_commit)
    source = Fixed({base_commit: (0.7, 5, True), cand_commit: cand})
    ledger = BudgetLedger(total=10_000)

    def again(cfg: VerificationConfig, ledger: BudgetLedger | None = None):
        return Verifier(source, cfg).verify(candidate(cand_commit, targets=BLOCKED), anchor, ledger=ledger)

    v = again(VerificationConfig(), ledger)
    return v, {g.gate: g for g in v.gates}["cost"], ledger, again


def test_a_sequential_cost_verdict_stops_at_the_look_where_the_saving_is_plain():
    """Under sequential verification (the default) the cost test is read after each look of seeds, each look at its
    share of cost_alpha, and the verdict stops at the first look where it passes. Before, a cost edit had no
    sequential test and ran the plan's last look at once: k x sequential_max_factor = 8 seeds on every task, 96
    rollouts here where the saving was plain after 4 seeds (48)."""
    v, cost, ledger, again = _sequential_cost_verdict(cand=(0.7, 4, False))
    assert v.accepted and [g.gate for g in v.gates] == ["behaviour", "non_inferior", "cost", "no_regression", "guard"]
    assert (v.measurements["looks"], v.measurements["max_looks"], v.measurements["k_used"]) == (2, 4, 4)
    assert v.measurements["rollouts_spent"] == ledger.rollouts == 48  # 6 tasks x 4 seeds, both sides
    assert cost.numbers["look"] == 2 and cost.numbers["level"] < ALPHA and "look 2/4" in cost.reason
    # the fixed design (sequential = false) at the same k reads the same 4 seeds at once, at the whole alpha
    v = again(VerificationConfig(sequential=False))
    assert v.accepted and v.measurements["looks"] is None and {g.gate: g for g in v.gates}["cost"].numbers[
        "alpha"] == ALPHA


def test_a_null_cost_edit_stops_after_its_first_look_and_is_refused():
    """The same steps on the same seeds (an edit that changes nothing): no saving at the first look, so the verdict
    stops there and refuses (a stop can only refuse) -- 2 seeds a task instead of 8."""
    v, cost, ledger, _ = _sequential_cost_verdict(cand=(0.7, 5, True))
    assert not v.accepted and not cost.passed and "(no saving: stop)" in cost.reason
    assert v.measurements["looks"] == 1 and ledger.rollouts == 24


def test_the_cost_tests_spend_is_cumulative_and_ends_at_its_alpha():
    """Each look's spend is the alpha-spending function at the look's share of the last look's seeds; the last
    look's is exactly cost_alpha; one look is the fixed design's alpha."""
    for spending in ("obrien_fleming", "pocock"):
        spent = cost_spent([2, 4, 6, 8], ALPHA, spending)
        assert len(spent) == 4 and list(spent) == sorted(spent) and spent[0] > 0 and spent[-1] == ALPHA
    assert cost_spent([8], ALPHA) == (ALPHA,)
    assert cost_spent([2, 4, 6, 8], ALPHA)[0] < 1e-6  # O'Brien-Fleming keeps most of it for the last look


def _signed(mags, bits: int) -> list[list[float]]:
    return [[m * (-1) ** ((bits >> (len(mags[0]) * j + i)) & 1) for i, m in enumerate(mags[j])]
            for j in range(len(mags))]


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_the_sequential_cost_test_spends_its_alpha_jointly_over_the_looks(spending):
    """Exact, and not timid: for fixed token savings (4 looks adding 3 pairs each, every look enumerated), each of
    the 2**12 sign assignments is equally likely under an edit that changes nothing, and the share that crosses
    some look is alpha up to rounding (floor(0.05 x 4096) = 204 of 4096). Before, each look's marginal test ran at
    its share of alpha (the shares summing to alpha, the union bound): 144 (O'Brien-Fleming) and 61 (Pocock) of
    4096 crossed where 204 were stated -- a look's share under 1/8 (three pairs) or 1/64 crossed nothing, and a
    path crossing two looks was paid for twice."""
    rng = np.random.default_rng(3)
    alpha = 0.05
    mags = [np.round(rng.exponential(size=3) * 300 + 1) for _ in range(4)]
    spent = cost_spent([1, 2, 3, 4], alpha, spending)
    crossed = 0
    for bits in range(2**12):
        d = _signed(mags, bits)
        crossed += any(joint_sign_flip(d[:look], spent, carry=True).crossed for look in range(1, 5))
    assert crossed == math.floor(alpha * 2**12), crossed


def test_the_sequential_cost_test_holds_its_alpha_beyond_enumeration():
    """Beyond exact enumeration (9 savings a look: random sign paths from look 2), null sign assignments cross some
    look at alpha within the draws' error (4,000 seeded sets of signs on fixed magnitudes, alpha 0.05: 5.5%)."""
    rng = np.random.default_rng(11)
    alpha, trials = 0.05, 4000
    mags = [np.round(rng.exponential(size=9) * 300 + 1) for _ in range(4)]
    spent = cost_spent([1, 2, 3, 4], alpha)
    crossed = 0
    for _ in range(trials):
        d = [list(m * rng.choice((-1, 1), size=9)) for m in mags]
        crossed += any(joint_sign_flip(d[:look], spent, carry=True).crossed for look in range(1, 5))
    assert abs(crossed / trials - alpha) <= 3 * math.sqrt(alpha * (1 - alpha) / trials), crossed


def test_the_cost_gate_reads_its_pairs_look_by_look():
    """Through `CostGate`: the savings each look added (``cuts``) are what the joint boundary reads. A saving of a
    step on every pair crosses at look 2 of 4 (16 pairs: 2**-16 is far below the cumulative spend); at look 1 (8
    pairs) O'Brien-Fleming's spend (2.6e-7) crosses nothing."""
    tasks = TASKS[:4]
    base = [obs(t, s, 0.7, 5, True) for t in tasks for s in range(4)]
    cand = [obs(t, s, 0.7, 4, False) for t in tasks for s in range(4)]
    cuts = {t: [2, 4, 6, 8] for t in tasks}

    def at(look: int, k: int):
        ev = evidence([o for o in base if o.seed < k], [o for o in cand if o.seed < k], tasks, target=BLOCKED)
        return CostGate(ALPHA, look, 4, cuts=cuts, seeds=[2, 4, 6, 8]).check(ev)

    first, second = at(1, 2), at(2, 4)
    assert not first.passed and not first.numbers["decided"] and "(undecided: continue)" in first.reason
    assert second.passed and second.numbers["decided"] and second.numbers["level"] > 0


class Noisy:
    """A source of null draws: baseline and candidate alike, each rollout's steps, score and block drawn afresh."""

    def __init__(self, seed: int):
        self.rng, self.base_step = random.Random(seed), {}

    def pending(self, requests, ledger):
        return len(requests)

    def observe(self, requests, ledger):
        out = []
        for r in requests:
            step = self.base_step.setdefault(r.task_id, self.rng.randint(3, 7))
            out.append(obs(r.task_id, r.seed, self.rng.choice((0.5, 0.75, 1.0)),
                           step + min(int(self.rng.expovariate(0.4)), 30), self.rng.random() < 0.8))
        return [o.model_copy(update={"rollout": r.rollout}) for o, r in zip(out, requests, strict=True)], len(out)


def test_a_null_edit_is_not_accepted_on_noise_by_the_sequential_cost_verdict():
    """Null edits under noise with a heavy tail of extra steps, through the verifier's looks (4 targeted tasks, 2 to
    8 seeds each): the cost test passes at any look at most at cost_alpha (1%; 1.5% allowed for 600 draws' own
    noise), and the whole verdict no more often."""
    base_commit, cand_commit = "a" * 40, "c" * 40
    anchor = anchor_of([obs(t, s, 0.7, 5, True) for t in TASKS[:4] for s in range(4)], commit=base_commit)
    trials, cost_passed, accepted, looks = 600, 0, 0, 0
    for seed in range(trials):
        v = Verifier(Noisy(seed), VerificationConfig()).verify(candidate(cand_commit, targets=BLOCKED), anchor)
        cost_passed += {g.gate: g for g in v.gates}["cost"].passed
        accepted += v.accepted
        looks += v.measurements["looks"]
    assert cost_passed / trials <= NOISE * ALPHA and accepted <= cost_passed, (cost_passed, accepted)
    assert looks < 2.5 * trials  # half stop at the first look (no saving), most before the last


def test_a_cost_verdict_spends_within_what_its_plan_reserved():
    """The plan sizes the selection to what its looks may spend (control tasks on the first look only); a cost
    verdict ran every seed of every selected task at once instead, so a ledger that held the plan's reservation was
    refused with BudgetExhausted before any rollout (192 rollouts asked where the plan reserved 120 here)."""
    base_commit, cand_commit = "a" * 40, "c" * 40
    control = [f"h{i}" for i in range(12)]
    anchor = anchor_of([obs(t, s, 0.7, 5, True) for t in TASKS for s in range(4)]
                       + [obs(t, s, 1.0, 3, False).model_copy(update={"healthy": True}) for t in control
                          for s in range(4)], commit=base_commit)
    table = {base_commit: (0.7, 5, True), cand_commit: (0.7, 4, False)}
    cfg = VerificationConfig(max_tasks=12, control_ratio=1.0)
    plan = Verifier(Fixed(table), cfg).plan(candidate(cand_commit, targets=BLOCKED), anchor)
    assert len(plan.selection.targeted) == 6 and len(plan.selection.control) == 6
    ledger = BudgetLedger(total=plan.max_spend())
    v = Verifier(Fixed(table), cfg).verify(candidate(cand_commit, targets=BLOCKED), anchor, ledger=ledger)
    assert v.accepted and ledger.rollouts == v.measurements["rollouts_spent"] <= plan.max_spend()
