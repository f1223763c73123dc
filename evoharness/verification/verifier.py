"""`Verifier`: the service object the graph calls to anchor main and verify candidates.

    verifier = Verifier(runner_or_source, config)
    anchor = verifier.measure_anchor(commit, tasks, k, round=0, ledger=ledger)
    verdict = verifier.verify(candidate, anchor, strategy, gates, ledger, round)

Procedure (DESIGN.md, "Verification"): plan -- select tasks with the strategy, capped by the
budget, and estimate the rollouts needed to resolve the predicted effect; check the whole cost fits
the ledger (else `BudgetExhausted` before any rollout); re-measure a baseline on the selection when
the strategy chose tasks from the anchor's own outcomes; run the candidate on the same tasks and
seeds; apply every gate. An `InfraError` that survives the runner's retries propagates: no verdict
is produced from partial evidence, and nothing is charged for the failed batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evoharness.harness_repo.models import Candidate, GateResult, Verdict
from evoharness.logging import get_logger
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.cost import is_cost_signal
from evoharness.verification.anchors import Anchor, AnchorBook, OptimismRecord
from evoharness.verification.budget import BudgetLedger
from evoharness.verification.config import VerificationConfig
from evoharness.verification.cost import OBJECTIVE_COST, CostGate, cost_gates, cost_measurements
from evoharness.verification.evidence import Evidence
from evoharness.verification.gates import Gate, SequentialGainGate, default_gates
from evoharness.verification.guards import GuardBook
from evoharness.verification.hunks import HunkSource, judge_parts
from evoharness.verification.observations import Labeller, Observation, by_task, mean_score
from evoharness.verification.plan import GAIN_GATES, Plan, make_plan
from evoharness.verification.selection import Selection, SelectionStrategy, make_strategy
from evoharness.verification.source import ObservationSource, RunnerSource

log = get_logger(__name__)

ANCHOR_SEED_BASE = 1_000_000  # anchor of round r: seeds 1e6*r + i (fresh-baseline seeds are 1000*(r+1) + i)


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
    """``source`` is an `ObservationSource` or a `RolloutRunner` (wrapped with ``labeller``).

    ``hunks`` splits a candidate into its hunks (`GitParts` in a run); with it, a candidate that
    passed every gate is also judged hunk by hunk (`evoharness.verification.hunks`).
    """

    def __init__(self, source: ObservationSource | object, config: VerificationConfig | None = None,
                 labeller: Labeller | None = None, guards: GuardBook | None = None, seed: int = 0,
                 signer: Callable[[Verdict], Verdict] | None = None, hunks: HunkSource | None = None) -> None:
        if not hasattr(source, "pending"):
            source = RunnerSource(source, labeller)  # type: ignore[arg-type]
        self.source: ObservationSource = source  # type: ignore[assignment]
        self.config = config or VerificationConfig()
        self.guards = guards if guards is not None else GuardBook()
        self.seed = seed
        self.signer = signer  # signs each verdict (harness_repo/signing.py): merges need a signed one
        self.hunks = hunks

    def _measure(self, requests: list[RolloutRequest], ledger: BudgetLedger | None, round: int,
                 candidate: str, purpose: str) -> list[Observation]:
        if ledger is not None:
            ledger.check(self.source.pending(requests, ledger))
        obs, paid = self.source.observe(requests, ledger)
        if ledger is not None:
            ledger.charge(paid, round, candidate, purpose, tokens=sum(o.tokens for o in obs))
        return obs

    def measure_anchor(self, commit: str, tasks: Sequence[str | tuple[str, str]], k: int | None = None,
                       round: int = 0, ledger: BudgetLedger | None = None) -> Anchor:
        """Main's measurement: ``k`` rollouts per task (str = dev task, or (task, split)).

        Seeds are ``ANCHOR_SEED_BASE * round + i``: an anchor measured after a merge uses seeds no
        earlier reading used, so it is fresh even when the rollout cache holds the candidate's rollouts
        of the same tree.
        """
        k = k or self.config.anchor_rollouts
        base = ANCHOR_SEED_BASE * round
        reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=base + i, rollout=i, split=split)
                for t, split in _task_refs(tasks) for i in range(k)]
        obs = self._measure(reqs, ledger, round, "anchor", "anchor")
        anchor = Anchor.from_observations(commit, obs, k, round, sigma_floor=self.config.sigma_floor)
        log.info("anchor measured", commit=commit[:10], mean=_r(anchor.mean), sigma=_r(anchor.sigma), k=k)
        return anchor

    def _resolve(self, strategy: SelectionStrategy | str | None) -> SelectionStrategy:
        if strategy is None or isinstance(strategy, str):
            return make_strategy(strategy or self.config.strategy, self.config.control_ratio,
                                 self.config.targeted_rank)
        return strategy

    def plan(self, candidate: Candidate, anchor: Anchor, strategy: SelectionStrategy | str | None = None,
             ledger: BudgetLedger | None = None, round: int | None = None, k: int | None = None) -> Plan:
        """What verifying ``candidate`` would run and cost, with the power estimate; spends nothing."""
        rnd = candidate.round if round is None else round
        return make_plan(self.config, candidate, anchor, self._resolve(strategy), self.guards.tasks, ledger,
                         rnd, k, self.seed)

    def verify(self, candidate: Candidate, anchor: Anchor, strategy: SelectionStrategy | str | None = None,
               gates: Sequence[Gate] | None = None, ledger: BudgetLedger | None = None,
               round: int | None = None, k: int | None = None) -> Verdict:
        """Verify ``candidate`` against ``anchor``; `evaluate` returns the evidence as well."""
        return self.evaluate(candidate, anchor, strategy, gates, ledger, round, k).verdict

    def evaluate(self, candidate: Candidate, anchor: Anchor, strategy: SelectionStrategy | str | None = None,
                 gates: Sequence[Gate] | None = None, ledger: BudgetLedger | None = None,
                 round: int | None = None, k: int | None = None, plan: Plan | None = None) -> Outcome:
        cfg = self.config
        plan = plan or self.plan(candidate, anchor, strategy, ledger, round, k)
        cost = is_cost_signal(candidate.targets)  # a cost target: the cost verdict (verification/cost.py)
        if gates is not None:
            gates = list(gates)
        elif cost:
            gates = cost_gates(cfg)
        else:
            gates = default_gates(plan.strategy, cfg.attribution_min_share, cfg.bootstrap_samples,
                                  cfg.no_regression_alpha)
        log.info("power estimate", candidate=candidate.branch, predicted_effect=_r(plan.predicted_effect),
                 sigma=_r(plan.sigma), rollouts_needed=plan.rollouts_needed, k=plan.k)
        # a sequential plan's looks decide a score edit's gain test, or a cost edit's cost test
        sequential = plan.sequential and any(g.name in GAIN_GATES or g.name == "cost" for g in gates)
        if ledger is not None:  # what the plan may run: a sequential one, its looks (control tasks: the first)
            reqs = plan.requests() if sequential else [*plan.baseline_requests, *plan.candidate_requests]
            ledger.check(self.source.pending(reqs, ledger))
        spent_before = ledger.rollouts if ledger is not None else 0
        sel = plan.selection
        if sequential:
            ev, results, cand_reqs, looked = self._sequential(candidate, anchor, plan, gates, ledger)
        else:
            if plan.fresh:
                baseline = self._measure(plan.baseline_requests, ledger, plan.round, candidate.branch, "baseline")
            else:
                wanted = {(r.task_id, r.seed) for r in plan.candidate_requests}
                baseline = [o for o in anchor.observations if (o.task_id, o.seed) in wanted]
            cand_obs = self._measure(plan.candidate_requests, ledger, plan.round, candidate.branch, "candidate")
            ev = Evidence(target=candidate.targets, k=plan.k, selection=sel, anchor=anchor, baseline=baseline,
                          candidate=cand_obs, z=cfg.z, sigma_floor=cfg.sigma_floor)
            results = [g.check(ev) for g in gates]
            cand_reqs, looked = plan.candidate_requests, None
        # each hunk judged as the whole was: by its score gain, or for a cost edit by its saving (left out or alone)
        if self.hunks is not None and cfg.judge_hunks and all(r.passed for r in results):
            parts = self.hunks.parts(candidate)
            if len(parts) > 1:
                # a sequential verification judges each part by a one-look paired test at its own alpha
                part_gain = SequentialGainGate(1, 1, cfg.sequential_alpha, cfg.sequential_spending,
                                               cfg.sequential_futility_z, cfg.sigma_floor,
                                               test=cfg.sequential_test) if looked else None
                part_gates = [g for g in gates if g.name != "guard"] if cost else None
                if cost:
                    part_gain = next((g for g in gates if g.name == "cost"), part_gain)
                gate, refused = judge_parts(parts, ev, cand_reqs, lambda reqs: self._measure(
                    reqs, ledger, plan.round, candidate.branch, "hunks"), cfg.max_hunks, cfg.attribution_min_share,
                    part_gain, cfg.no_regression_alpha, part_gates)
                results.append(gate)
                reduced = self.hunks.reduce(candidate, refused) if cfg.drop_refused_hunks and refused and len(
                    refused) < len(parts) else None
                if reduced is not None:  # verify what is left, as the branch's new head
                    inner = self.evaluate(reduced, anchor, plan.strategy, gates, ledger, plan.round,
                                          plan.k_asked or plan.k)
                    return with_dropped(inner, candidate, gate)
        failed = [r.gate for r in results if not r.passed]
        needs = undecided_need(results, plan, cfg.sequential_max_factor)
        reading = task_mean(ev.side("candidate", plan.compared)) or 0.0
        measurements = {
            "reading": reading, "baseline_mean": task_mean(ev.side("baseline", plan.compared)),
            "anchor_mean": anchor.mean, "targeted_candidate": ev.mean("candidate", sel.targeted),
            "targeted_baseline": ev.mean("baseline", sel.targeted), "sigma": plan.sigma, "k": plan.k,
            "resolvable": plan.resolvable, "predicted_effect": plan.predicted_effect,
            "rollouts_needed": plan.rollouts_needed, "targeted_tasks": len(sel.targeted),
            "control_tasks": len(sel.control), "guard_tasks": len(sel.guard),
            "rollouts_spent": (ledger.rollouts - spent_before) if ledger is not None else None,
            "looks": looked, "max_looks": len(plan.looks) if looked else None, "k_used": ev.k,
            "needs_rollouts": needs[0] if needs else None, "suggested_k": needs[1] if needs else None,
        }
        line = ""
        if cost:
            figures, line = cost_measurements(results)
            measurements.update(figures)
        reason = "all gates passed" if not failed else "failed: " + ", ".join(failed)
        if cost:
            reason = f"{OBJECTIVE_COST} verdict ({candidate.targets}): {reason}" + (f"; {line}" if line else "")
        if needs:
            reason = (f"undecided: the targeted gain did not cross its boundary but is positive; about {needs[0]} "
                      f"more rollouts on the {len(sel.targeted)} targeted tasks would give 80% power at the gain "
                      f"seen (re-verify with k >= {needs[1]}; not accepted meanwhile)")
        verdict = Verdict(candidate=candidate.branch, commit=candidate.commit, base=anchor.commit,
                          accepted=not failed, strategy=plan.strategy.name, gates=results,
                          measurements=measurements, reason=reason)
        if self.signer is not None:
            verdict = self.signer(verdict)
        log.info("verdict", candidate=candidate.branch, accepted=verdict.accepted, reason=verdict.reason)
        return Outcome(verdict=verdict, selection=sel, evidence=ev, reading=reading)

    def _sequential(self, candidate: Candidate, anchor: Anchor, plan: Plan, gates: list[Gate],
                    ledger: BudgetLedger | None) -> tuple[Evidence, list[GateResult], list[RolloutRequest], int]:
        """Measure look by look until the sequential test is decided, then apply every gate.

        Each look adds fresh seeds, baseline and candidate alike (paired by seed): the first on every selected
        task, later ones on the targeted and guard tasks only (``Plan.look_requests``);
        the gain gate(s) are replaced by `SequentialGainGate` at the look where it stopped -- for a cost verdict
        (no gain gate), the ``cost`` gate by `CostGate` at that look (its joint sign-flip boundary). The other
        gates read the evidence gathered up to that look.
        """
        cfg, looks = self.config, plan.looks
        cost_test = next((g for g in gates if g.name == "cost"), None)
        if cost_test is not None and not any(g.name in GAIN_GATES for g in gates):
            # the cost verdict: the running saving against its joint sign-flip boundary over the looks
            replaces = {"cost"}

            def decider(look: int) -> Gate:
                return CostGate(cost_test.alpha, look, len(looks), cfg.sequential_spending, plan.look_cuts(), looks)
        else:
            replaces = GAIN_GATES

            def decider(look: int) -> Gate:
                return SequentialGainGate(look, len(looks), cfg.sequential_alpha, cfg.sequential_spending,
                                          cfg.sequential_futility_z, cfg.sigma_floor, test=cfg.sequential_test,
                                          cuts=plan.look_cuts())
        baseline: list[Observation] = []
        cand_obs: list[Observation] = []
        for look in range(1, len(looks) + 1):
            b_req, c_req = plan.look_requests(look)
            baseline += self._measure(b_req, ledger, plan.round, candidate.branch, "baseline")
            cand_obs += self._measure(c_req, ledger, plan.round, candidate.branch, "candidate")
            ev = Evidence(target=candidate.targets, k=looks[look - 1], selection=plan.selection, anchor=anchor,
                          baseline=baseline, candidate=cand_obs, z=cfg.z, sigma_floor=cfg.sigma_floor)
            seq = decider(look).check(ev)
            log.info("sequential look", candidate=candidate.branch, look=look, reason=seq.reason)
            if seq.numbers["decided"]:
                break
            stop = [g.name for g in gates if g.name in cfg.stop_gates() and not g.check(ev).passed]
            if stop:  # a gate that already fails: reject here rather than pay for the later looks
                seq = seq.model_copy(update={
                    "reason": seq.reason.replace("(undecided: continue)", f"(stopped: {', '.join(stop)} failed)"),
                    "numbers": {**seq.numbers, "decided": True, "stopped_by": ",".join(stop)}})
                log.info("sequential stop", candidate=candidate.branch, look=look, failed=stop)
                break
        results, replaced = [], False
        for g in gates:
            if g.name in replaces:
                if not replaced:
                    results.append(seq)
                replaced = True
            else:
                results.append(g.check(ev))
        # the candidate requests the looks ran (control tasks: the first look's seeds only), which a per-hunk
        # judgement reuses: a seed the candidate never ran has nothing to pair with
        used = [r for i in range(1, look + 1) for r in plan.look_requests(i)[1]]
        return ev, results, used, look

    def reanchor(self, book: AnchorBook, outcome: Outcome, merged_commit: str,
                 tasks: Sequence[str | tuple[str, str]], round: int, k: int | None = None,
                 ledger: BudgetLedger | None = None) -> OptimismRecord:
        """Measure the merged harness afresh, make it the bar, record the optimism, pin fixed tasks."""
        before = book.current
        fresh = self.measure_anchor(merged_commit, tasks, k, round=round, ledger=ledger)
        tasks_read = [*outcome.selection.targeted, *outcome.selection.control]
        rec = book.record_fresh(fresh, outcome.verdict.candidate, outcome.reading, tasks_read)
        pinned = self.guards.pin_fixed(before, fresh, round)
        log.info("fresh anchor", mean=_r(fresh.mean), optimism=_r(rec.optimism), pinned=len(pinned))
        return rec


def with_dropped(inner: Outcome, candidate: Candidate, gate: GateResult) -> Outcome:
    """``inner`` (the verdict on the candidate less its refused hunks) noting what was dropped and why."""
    note = gate.model_copy(update={"gate": "hunks_dropped", "passed": True,
                                   "reason": f"dropped from {candidate.commit[:10]}: {gate.reason}"})
    v = inner.verdict
    verdict = v.model_copy(update={"gates": [*v.gates, note],
                                   "reason": f"{v.reason} (after dropping {gate.numbers.get('refused')} of "
                                   f"{gate.numbers.get('hunks')} hunks with no attributable gain)"})
    return Outcome(verdict=verdict, selection=inner.selection, evidence=inner.evidence, reading=inner.reading)


def undecided_need(results: list[GateResult], plan: Plan, max_factor: float) -> tuple[int, int] | None:
    """(more rollouts, the k to re-verify with) when the sequential gain test is the only gate that failed
    and it is undecided (`SequentialGainGate`); None when the verdict is decided.

    The k: a sequential plan runs up to ``k * max_factor`` seeds per targeted task, so the k whose plan
    reaches the pairs the gate asks for (`stats.pairs_needed`) on as many targeted tasks.
    """
    failed = [r for r in results if not r.passed]
    if len(failed) != 1 or failed[0].gate != "sequential_gain" or not failed[0].numbers.get("undecided"):
        return None
    pairs, tasks = failed[0].numbers["needs_pairs"], max(1, len(plan.selection.targeted))
    return failed[0].numbers["needs_rollouts"], math.ceil(pairs / tasks / max_factor)


def task_mean(observations: list[Observation]) -> float | None:
    """The mean over tasks of each task's mean score: every task weighs the same, as in an anchor, however
    many rollouts it got (a sequential verification gives its targeted tasks more than its control tasks)."""
    means = [m for obs in by_task(observations).values() if (m := mean_score(obs)) is not None]
    return sum(means) / len(means) if means else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
