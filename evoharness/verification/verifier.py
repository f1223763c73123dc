"""`Verifier`: the service object the graph calls to anchor main and verify candidates.

    verifier = Verifier(runner_or_source, config)
    anchor = verifier.measure_anchor(commit, tasks, k)
    verdict = verifier.verify(candidate, anchor, strategy, gates, ledger, round)

Procedure (DESIGN.md, "Verification"): select tasks with the strategy, capped by the budget;
print/log the power estimate; check the whole cost fits the ledger (else `BudgetExhausted` before
any rollout); re-measure a baseline on the selection when the strategy chose tasks from the anchor's
own outcomes; run the candidate on the same tasks and seeds; apply every gate. An `InfraError` that
survives the runner's retries propagates: no verdict is produced from partial evidence.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from evoharness.errors import BudgetExhausted
from evoharness.harness_repo.models import Candidate, Verdict
from evoharness.logging import get_logger
from evoharness.sandbox.api import RolloutRequest
from evoharness.verification.anchors import Anchor, AnchorBook, OptimismRecord
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.evidence import Evidence
from evoharness.verification.gates import Gate, default_gates
from evoharness.verification.guards import GuardBook
from evoharness.verification.noise import composite_sigma, resolvable_difference, rollouts_needed
from evoharness.verification.observations import Labeller, Observation, mean_score
from evoharness.verification.selection import Selection, SelectionStrategy, make_strategy
from evoharness.verification.source import ObservationSource, RunnerSource

log = get_logger(__name__)

FRESH_SEED_BASE = 1000  # fresh-baseline seeds of round r: 1000*(r+1) + i, disjoint from anchor seeds 0..k-1


@dataclass
class Outcome:
    """A verdict with the evidence behind it (the selection, both sides' observations)."""

    verdict: Verdict
    selection: Selection
    evidence: Evidence
    reading: float


def _task_refs(tasks: Sequence[str | tuple[str, str]]) -> list[tuple[str, str]]:
    return [(t, "dev") if isinstance(t, str) else (t[0], t[1]) for t in tasks]


class Verifier:
    def __init__(
        self,
        source: ObservationSource | object,
        config: VerificationConfig | None = None,
        labeller: Labeller | None = None,
        guards: GuardBook | None = None,
        seed: int = 0,
    ) -> None:
        if not hasattr(source, "pending"):
            source = RunnerSource(source, labeller)  # a RolloutRunner
        self.source: ObservationSource = source  # type: ignore[assignment]
        self.config = config or VerificationConfig()
        self.guards = guards if guards is not None else GuardBook()
        self.seed = seed

    # ---- measuring ------------------------------------------------------------------------

    def _measure(
        self,
        requests: list[RolloutRequest],
        ledger: BudgetLedger | None,
        round: int,
        candidate: str,
        purpose: str,
    ) -> list[Observation]:
        if ledger is not None:
            ledger.check(self.source.pending(requests))
        obs, paid = self.source.observe(requests)
        if ledger is not None:
            ledger.charge(paid, round, candidate, purpose, tokens=sum(o.tokens for o in obs))
        return obs

    def measure_anchor(
        self,
        commit: str,
        tasks: Sequence[str | tuple[str, str]],
        k: int | None = None,
        round: int = 0,
        ledger: BudgetLedger | None = None,
    ) -> Anchor:
        """Main's measurement: ``k`` rollouts (seeds 0..k-1) on each task (str = dev, or (task, split))."""
        k = k or self.config.anchor_rollouts
        reqs = [
            RolloutRequest(task_id=t, harness_commit=commit, seed=i, rollout=i, split=split)
            for t, split in _task_refs(tasks)
            for i in range(k)
        ]
        if ledger is not None:
            ledger.check(self.source.pending(reqs))
        obs = self._measure(reqs, ledger, round, "anchor", "anchor")
        anchor = Anchor.from_observations(commit, obs, k, round, sigma_floor=self.config.sigma_floor)
        log.info(
            "anchor measured", commit=commit[:10], mean=round_(anchor.mean), sigma=round_(anchor.sigma), k=k
        )
        return anchor

    # ---- verifying ------------------------------------------------------------------------

    def verify(
        self,
        candidate: Candidate,
        anchor: Anchor,
        strategy: SelectionStrategy | str | None = None,
        gates: Sequence[Gate] | None = None,
        ledger: BudgetLedger | None = None,
        round: int | None = None,
        k: int | None = None,
    ) -> Verdict:
        """Verify ``candidate`` against ``anchor``; see `evaluate` for the evidence as well."""
        return self.evaluate(candidate, anchor, strategy, gates, ledger, round, k).verdict

    def evaluate(
        self,
        candidate: Candidate,
        anchor: Anchor,
        strategy: SelectionStrategy | str | None = None,
        gates: Sequence[Gate] | None = None,
        ledger: BudgetLedger | None = None,
        round: int | None = None,
        k: int | None = None,
    ) -> Outcome:
        cfg = self.config
        if strategy is None or isinstance(strategy, str):
            strategy = make_strategy(strategy or cfg.strategy, cfg.control_ratio)
        gates = (
            list(gates)
            if gates is not None
            else default_gates(strategy.name, cfg.attribution_min_share, cfg.bootstrap_samples)
        )
        rnd = candidate.round if round is None else round
        fresh = strategy.fresh_baseline and cfg.fresh_baseline
        k = k or cfg.rollouts
        if not fresh:
            k = min(k, anchor.k)  # paired with the anchor's own seeds
        dev = set(anchor.dev_tasks())
        guards = [t for t in self.guards.tasks if t in dev]
        affordable = ledger.affordable_rollouts() if ledger is not None else 10**9
        per_task = k * (2 if fresh else 1)
        max_tasks = min(cfg.max_tasks, (affordable - len(guards) * k) // per_task)
        if max_tasks < 1:
            raise BudgetExhausted(
                float(per_task + len(guards) * k) * (ledger.units_per_rollout if ledger else 1),
                ledger.left if ledger else 0.0,
            )
        rng = random.Random(f"{self.seed}:{rnd}:{candidate.branch}")
        sel = strategy.select(anchor, candidate.targets, max_tasks, rng)
        sel = sel.model_copy(update={"guard": [g for g in guards if g not in sel.targeted + sel.control]})
        stray = [t for t in sel.tasks if t not in dev]
        if stray:
            raise ValueError(f"strategy {strategy.name} selected non-dev tasks: {stray}")

        anchor_tasks = anchor.per_task()
        sigma_t = composite_sigma(anchor_tasks, sel.targeted, cfg.sigma_floor, anchor.dev_tasks())
        effect = self._predicted_effect(candidate, anchor, sel)
        needed = rollouts_needed(effect, sigma_t, cfg.z) if sel.targeted else None
        log.info(
            "power estimate",
            candidate=candidate.branch,
            predicted_effect=round_(effect),
            sigma=round_(sigma_t),
            rollouts_needed=needed,
            k=k,
            underpowered=bool(needed and needed > k),
        )

        compared = [*sel.targeted, *sel.control]
        if fresh:
            seeds = {t: [FRESH_SEED_BASE * (rnd + 1) + i for i in range(k)] for t in compared}
        else:
            seeds = {t: sorted({o.seed for o in anchor_tasks[t]})[:k] for t in compared}
        for g in sel.guard:
            seeds[g] = [FRESH_SEED_BASE * (rnd + 1) + i for i in range(k)]
        split = "dev"
        base_reqs = (
            [
                RolloutRequest(task_id=t, harness_commit=anchor.commit, seed=s, rollout=i, split=split)
                for t in compared
                for i, s in enumerate(seeds[t])
            ]
            if fresh
            else []
        )
        cand_reqs = [
            RolloutRequest(task_id=t, harness_commit=candidate.commit, seed=s, rollout=i, split=split)
            for t in sel.tasks
            for i, s in enumerate(seeds[t])
        ]
        if ledger is not None:
            ledger.check(self.source.pending(base_reqs) + self.source.pending(cand_reqs))
        spent_before = ledger.rollouts if ledger is not None else 0
        if fresh:
            baseline = self._measure(base_reqs, ledger, rnd, candidate.branch, "baseline")
        else:
            wanted = {(t, s) for t in compared for s in seeds[t]}
            baseline = [o for o in anchor.observations if (o.task_id, o.seed) in wanted]
        cand_obs = self._measure(cand_reqs, ledger, rnd, candidate.branch, "candidate")

        ev = Evidence(
            target=candidate.targets,
            k=k,
            selection=sel,
            anchor=anchor,
            baseline=baseline,
            candidate=cand_obs,
            z=cfg.z,
            sigma_floor=cfg.sigma_floor,
        )
        results = [g.check(ev) for g in gates]
        failed = [r.gate for r in results if not r.passed]
        reading = mean_score(ev.side("candidate", compared)) or 0.0
        measurements = {
            "reading": reading,
            "baseline_mean": mean_score(ev.side("baseline", compared)),
            "anchor_mean": anchor.mean,
            "targeted_candidate": ev.mean("candidate", sel.targeted),
            "targeted_baseline": ev.mean("baseline", sel.targeted),
            "sigma": sigma_t,
            "k": k,
            "resolvable": resolvable_difference(sigma_t, k, cfg.z),
            "predicted_effect": effect,
            "rollouts_needed": needed,
            "targeted_tasks": len(sel.targeted),
            "control_tasks": len(sel.control),
            "guard_tasks": len(sel.guard),
            "rollouts_spent": (ledger.rollouts - spent_before) if ledger is not None else None,
        }
        verdict = Verdict(
            candidate=candidate.branch,
            commit=candidate.commit,
            base=anchor.commit,
            accepted=not failed,
            strategy=strategy.name,
            gates=results,
            measurements=measurements,
            reason="all gates passed" if not failed else "failed: " + ", ".join(failed),
        )
        log.info("verdict", candidate=candidate.branch, accepted=verdict.accepted, reason=verdict.reason)
        return Outcome(verdict=verdict, selection=sel, evidence=ev, reading=reading)

    def _predicted_effect(self, candidate: Candidate, anchor: Anchor, sel: Selection) -> float:
        """From the candidate's predicted flips on targeted tasks when it has any, else the config value."""
        flips = [t for t in candidate.predicted_flips if t in set(sel.targeted)]
        if not flips or not sel.targeted:
            return self.config.predicted_effect
        gain = sum(1.0 - (anchor.mean_on([t]) or 0.0) for t in flips) / len(sel.targeted)
        return gain if gain > 0 else self.config.predicted_effect

    # ---- after a merge --------------------------------------------------------------------

    def reanchor(
        self,
        book: AnchorBook,
        outcome: Outcome,
        merged_commit: str,
        tasks: Sequence[str | tuple[str, str]],
        round: int,
        k: int | None = None,
        ledger: BudgetLedger | None = None,
    ) -> OptimismRecord:
        """Measure the merged harness afresh, make it the bar, record the optimism, pin fixed tasks."""
        before = book.current
        fresh = self.measure_anchor(merged_commit, tasks, k, round=round, ledger=ledger)
        tasks_read = [*outcome.selection.targeted, *outcome.selection.control]
        rec = book.record_fresh(fresh, outcome.verdict.candidate, outcome.reading, tasks_read)
        pinned = self.guards.pin_fixed(before, fresh, round)
        log.info("fresh anchor", mean=round_(fresh.mean), optimism=round_(rec.optimism), pinned=pinned)
        return rec


def round_(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
