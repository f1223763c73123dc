"""`Plan`: what one verification will run and cost, known before any rollout is paid for."""

from __future__ import annotations

import random
from dataclasses import dataclass

from evoharness.errors import BudgetExhausted
from evoharness.harness_repo.models import Candidate
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.cost import is_cost_signal
from evoharness.verification.anchors import Anchor
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import (
    SEEDS_PER_ROUND,
    VerificationConfig,
    check_seed_room,
    control_seeds,
    sequential_looks,
)
from evoharness.verification.noise import composite_sigma, resolvable_difference, rollouts_needed
from evoharness.verification.selection import Selection, SelectionStrategy

GAIN_GATES = {"gain", "paired_gain"}  # the gates a sequential verification replaces by `sequential_gain`

# fresh seeds of round r: 1000*(r+1) + i, i < SEEDS_PER_ROUND (check_seed_room holds a round's k to it), disjoint
# from the anchor's seeds 0..k-1 and, up to run.max_rounds (998), below round 1's anchor seeds (1,000,000 + i)
FRESH_SEED_BASE = SEEDS_PER_ROUND


@dataclass
class Plan:
    candidate: Candidate
    anchor: Anchor
    strategy: SelectionStrategy
    round: int
    k: int
    fresh: bool = True
    selection: Selection | None = None
    baseline_requests: list[RolloutRequest] | None = None
    candidate_requests: list[RolloutRequest] | None = None
    sigma: float = 0.0
    resolvable: float = 0.0
    predicted_effect: float = 0.0
    rollouts_needed: int | None = None
    k_asked: int | None = None  # the k asked for (a sequential plan's k is its last look's)
    looks: list[int] | None = None  # sequential: seeds per task after each look (the last is the most)
    focus: list[str] | None = None  # sequential_focus: the targeted tasks later looks add seeds to (None: all)
    focus_looks: list[int] | None = None  # seeds per focus task after each look (None: ``looks``)
    control_seeds: int | None = None  # sequential: seeds a control task runs, all at the first look (None: looks[0])

    @property
    def sequential(self) -> bool:
        return bool(self.looks) and len(self.looks) > 1

    def look_cuts(self) -> dict[str, list[int]]:
        """Seeds per targeted task after each look (a focus task's ``focus_looks``): which look added a pair."""
        focus = set(self.focus or ())
        return {t: list(self.focus_looks if t in focus else self.looks) for t in self.selection.targeted}

    def look_requests(self, look: int) -> tuple[list[RolloutRequest], list[RolloutRequest]]:
        """The baseline and candidate requests a sequential look adds.

        Look 1 runs every selected task on the first seeds; later looks add seeds on the targeted tasks,
        where the gain is measured, and the guard tasks (a guard vetoes only when every rollout fails,
        so it needs as many as the targeted tasks get); control tasks run their ``control_seeds`` at the
        first look (`config.control_seeds`: as many whatever the number of looks) and no more.
        With a focus (``sequential_focus``) later looks add seeds on the focus tasks only, as many as
        they would have added on every targeted task (``focus_looks``); the other targeted tasks keep
        the first look's seeds, as control tasks do.
        """
        gain_tasks = self.selection.targeted if self.focus is None else self.focus
        keep = set(self.selection.tasks if look == 1 else [*gain_tasks, *self.selection.guard])
        focus, control = set(self.focus or ()), set(self.selection.control)
        n_control = self.control_seeds or self.looks[0]

        def window(task: str) -> tuple[int, int]:
            looks = self.focus_looks if task in focus else self.looks
            if task in control:  # its seeds at the first look (a control task that is also a guard: later ones too)
                looks = [max(n, n_control) for n in looks]
            return (looks[look - 2] if look > 1 else 0), looks[look - 1]

        def part(reqs: list[RolloutRequest]) -> list[RolloutRequest]:
            out = []
            for r in reqs:
                if r.task_id in keep:
                    lo, hi = window(r.task_id)
                    if lo <= r.rollout < hi:
                        out.append(r)
            return out

        return part(self.baseline_requests), part(self.candidate_requests)

    def sides(self) -> tuple[list[RolloutRequest], list[RolloutRequest]]:
        """The baseline and candidate requests this plan may run (a sequential plan: its looks' requests up to
        the last look, control tasks on the first look only)."""
        if not self.sequential:
            return self.baseline_requests, self.candidate_requests
        looks = [self.look_requests(i + 1) for i in range(len(self.looks))]
        return [r for b, _ in looks for r in b], [r for _, c in looks for r in c]

    def requests(self) -> list[RolloutRequest]:
        """Every request this plan may run, both sides."""
        base, cand = self.sides()
        return [*base, *cand]

    def max_spend(self) -> int:
        """Rollouts this plan runs at most (before cache hits)."""
        return len(self.requests())

    @property
    def compared(self) -> list[str]:
        return [*self.selection.targeted, *self.selection.control]

    def summary(self) -> str:
        """One line for the operator, printed before anything is spent."""
        s = self.selection
        need = "-" if self.rollouts_needed is None else str(self.rollouts_needed)
        warn = " (UNDERPOWERED)" if self.rollouts_needed and self.rollouts_needed > self.k else ""
        k = f"k={self.k}" if not self.sequential else \
            f"sequential: looks at k={'/'.join(map(str, self.looks))}, at most"
        n_base, n_cand = (len(side) for side in self.sides())
        return (f"plan: {self.strategy.name}, {len(s.targeted)} targeted + {len(s.control)} control + "
                f"{len(s.guard)} guard tasks, {k} {n_base} baseline + {n_cand} candidate rollouts; "
                f"sigma={self.sigma:.4f}, "
                f"resolvable={self.resolvable:.4f}; predicted effect {self.predicted_effect:.4f} needs "
                f"k>={need}{warn}")


def make_plan(cfg: VerificationConfig, candidate: Candidate, anchor: Anchor, strategy: SelectionStrategy,
              guards: list[str], ledger: BudgetLedger | None, round: int, k: int | None, seed: int) -> Plan:
    """Select tasks (capped by what the ledger can pay), choose seeds, estimate power."""
    fresh = strategy.fresh_baseline and cfg.fresh_baseline
    k = k_asked = k or cfg.rollouts
    if not fresh:
        k = min(k, anchor.k)  # paired with the anchor's own seeds
    looks = sequential_looks(cfg, k) if fresh and cfg.sequential and GAIN_GATES & set(strategy.gates) else None
    n_control = control_seeds(cfg, k) if looks else None
    k = looks[-1] if looks else k  # a sequential plan reserves seeds (and budget) for its last look
    if fresh and k > SEEDS_PER_ROUND:  # a library caller's k (settings and `verify --rollouts` are checked when read)
        check_seed_room(cfg, k_asked, "k")
    dev = anchor.dev_tasks()
    guards = [t for t in guards if t in set(dev)]
    affordable = ledger.affordable_rollouts() if ledger is not None else 10**9
    # a sequential plan runs its control tasks on their first-look seeds only: the cheapest task it selects
    per_task = 2 * n_control if looks else k * (2 if fresh else 1)
    max_tasks = min(cfg.max_tasks, int((affordable - len(guards) * k) // per_task))
    if max_tasks < 1:
        unit = ledger.units_per_rollout if ledger is not None else 1.0
        raise BudgetExhausted((per_task + len(guards) * k) * unit, ledger.left if ledger is not None else 0.0)

    def select(n: int, targeted: int | None = None) -> Plan:
        return _select(cfg, candidate, anchor, strategy, guards, round, k, k_asked, fresh, looks, seed, n, targeted)

    while True:  # the most tasks whose plan fits what the ledger can pay
        plan = select(max_tasks)
        if looks and plan.max_spend() > affordable and len(plan.selection.targeted) > 1:
            # the targeted tasks ranked last go first: the control tasks (the harm check's sample) stay
            lo, hi = 1, len(plan.selection.targeted) - 1  # the most targeted tasks that fit lies in [lo, hi]
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if select(max_tasks, mid).max_spend() <= affordable else (lo, mid - 1)
            plan = select(max_tasks, lo)
        if plan.max_spend() <= affordable or max_tasks == 1:
            break
        max_tasks -= 1
    sel = plan.selection
    plan.sigma = composite_sigma(anchor.per_task(), sel.targeted, cfg.sigma_floor, dev)
    plan.resolvable = resolvable_difference(plan.sigma, k, cfg.z)
    plan.predicted_effect = predicted_effect(cfg, candidate, anchor, sel)
    plan.rollouts_needed = rollouts_needed(plan.predicted_effect, plan.sigma, cfg.z) if sel.targeted else None
    return plan


def _select(cfg: VerificationConfig, candidate: Candidate, anchor: Anchor, strategy: SelectionStrategy,
            guards: list[str], round: int, k: int, k_asked: int, fresh: bool, looks: list[int] | None, seed: int,
            max_tasks: int, targeted: int | None = None) -> Plan:
    """Select at most ``max_tasks`` tasks and choose their seeds and requests (no power estimate yet); with
    ``targeted``, only the first that many targeted tasks (the strategy's order) are kept."""
    dev = anchor.dev_tasks()
    rng = random.Random(f"{seed}:{round}:{candidate.branch}")
    sel = strategy.select(anchor, candidate.targets, max_tasks, rng)
    if targeted is not None:
        sel = sel.model_copy(update={"targeted": sel.targeted[:targeted]})
    sel = sel.model_copy(update={"guard": guards})  # a guard may also be a targeted or control task
    stray = [t for t in sel.tasks if t not in set(dev)]
    if stray:  # held-out (or unmeasured) tasks must never be selected
        raise ValueError(f"strategy {strategy.name} selected non-dev tasks: {stray}")
    plan = Plan(candidate=candidate, anchor=anchor, strategy=strategy, round=round, k=k, fresh=fresh,
                selection=sel, looks=looks, k_asked=k_asked,
                control_seeds=control_seeds(cfg, k_asked) if looks else None)
    per_anchor = anchor.per_task()
    fresh_seeds = [FRESH_SEED_BASE * (round + 1) + i for i in range(k)]
    seeds = {t: fresh_seeds if fresh else sorted({o.seed for o in per_anchor[t]})[:k] for t in plan.compared}
    if looks and 0 < cfg.sequential_focus < len(sel.targeted) and not is_cost_signal(candidate.targets):
        plan.focus, plan.focus_looks = sel.targeted[:cfg.sequential_focus], focus_looks(
            looks, len(sel.targeted), cfg.sequential_focus)
        focus_seeds = [FRESH_SEED_BASE * (round + 1) + i for i in range(plan.focus_looks[-1])]
        seeds.update({t: focus_seeds for t in plan.focus})
    for g in sel.guard:
        seeds.setdefault(g, fresh_seeds)
    plan.baseline_requests = [RolloutRequest(task_id=t, harness_commit=anchor.commit, seed=s, rollout=i)
                              for t in plan.compared for i, s in enumerate(seeds[t])] if fresh else []
    plan.candidate_requests = [RolloutRequest(task_id=t, harness_commit=candidate.commit, seed=s, rollout=i)
                               for t in sel.tasks for i, s in enumerate(seeds[t])]
    return plan


def focus_looks(looks: list[int], targeted: int, focus: int) -> list[int]:
    """Seeds per focus task after each look: the first look's, then what the later looks would have added on
    all ``targeted`` tasks, shared by the ``focus`` tasks (rounded up; at most a round's `SEEDS_PER_ROUND`)."""
    return [min(SEEDS_PER_ROUND, looks[0] + -(-(n - looks[0]) * targeted // focus)) for n in looks]


def predicted_effect(cfg: VerificationConfig, candidate: Candidate, anchor: Anchor, sel: Selection) -> float:
    """From the candidate's predicted flips among the targeted tasks if any, else the config value."""
    flips = [t for t in candidate.predicted_flips if t in set(sel.targeted)]
    if not flips or not sel.targeted:
        return cfg.predicted_effect
    gain = sum(1.0 - (anchor.mean_on([t]) or 0.0) for t in flips) / len(sel.targeted)
    return gain if gain > 0 else cfg.predicted_effect
