"""The service object behind the graph's nodes: rollouts, anchors, roles, verification, merges.

It owns the collaborators (harness repo, rollout runner with its cache, verifier,
roles, training queue, trajectory store) and keeps every side effect idempotent so a
node that re-runs after a crash repeats nothing that already happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from evoharness.config import Settings
from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import Label, Lever
from evoharness.diagnosis.routing import Router
from evoharness.errors import EditRejected, EvoharnessError, InputError, MergeRefused
from evoharness.graph.progress import Progress
from evoharness.harness_repo.models import Candidate, Verdict
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.models import Trajectory
from evoharness.traces.store import TrajectoryStore

log = structlog.get_logger("evoharness.graph")


class Services:
    def __init__(self, settings: Settings, run_dir: Path, progress: Progress, *, repo, runner, verifier,
                 roles, queue, env, source=None) -> None:
        self.settings = settings
        self.run = settings.run
        self.run_dir = run_dir
        self.progress = progress
        self.repo = repo
        self.runner = runner
        self.verifier = verifier
        self.analyst, self.critic, self.engineer_role = roles if roles else (None, None, None)
        self.queue = queue
        self.env = env
        self.source = source
        if source is not None:
            source.progress = progress
        self.store = source.store if source is not None else TrajectoryStore(run_dir / "trajectories.jsonl")
        self.labeller = Labeller(settings.diagnosis)
        self.router = Router.from_config(settings.diagnosis)
        self._cache: dict[str, Trajectory] | None = None
        self.role_failures: list[dict[str, str]] = []
        self._labels: dict[str, Label] = {}
        self._evidence: list[Trajectory] | None = None

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def build(cls, settings: Settings, run_dir: Path, progress: Progress, lazy: bool = False) -> Services:
        from evoharness.graph.wiring import build_collaborators

        return cls(settings, run_dir, progress, **build_collaborators(settings, run_dir, lazy=lazy))

    def close(self) -> None:
        """Close the runner chain (cache -> retries -> executor: removes the exported checkouts)."""
        runner, seen = self.runner, 0
        while runner is not None and seen < 5:
            close = type(runner).__dict__.get("close")
            if close:
                close(runner)
            runner, seen = runner.__dict__.get("runner"), seen + 1

    # -- tasks, ledger, trajectories -------------------------------------------------------
    def tasks(self, split: str) -> list[str]:
        ids = [t.id for t in self.env.list_tasks(split)]
        limit = self.run.dev_tasks if split == "dev" else self.run.heldout_tasks
        return ids[:limit] if limit else ids

    def ledger(self, state: dict[str, Any]):
        from evoharness.graph.wiring import RunLedger

        if state.get("ledger"):
            return RunLedger.model_validate(state["ledger"])
        return RunLedger(total=self.run.budget)

    def load(self, ids: list[str]) -> list[Trajectory]:
        if self._cache is None:
            self._cache = {t.id: t for t in self.store}
        missing = [i for i in ids if i not in self._cache]
        if missing:
            self._cache = {t.id: t for t in self.store}
            missing = [i for i in ids if i not in self._cache]
            if missing:
                raise EvoharnessError(f"trajectories missing from the store: {missing[:3]}")
        return [self._cache[i] for i in ids]

    def labels(self, trajs: list[Trajectory]) -> list[Label]:
        """Labels, memoised by trajectory id (ids are content-determined: commit, split, task, seed)."""
        out = []
        for t in trajs:
            lab = self._labels.get(t.id)
            if lab is None:
                lab = self._labels[t.id] = self.labeller.label(t)
            out.append(lab)
        return out

    def composition_of(self, ids: list[str]) -> dict[str, Any]:
        return Composition.from_labels(self.labels(self.load(ids))).to_dict()

    # -- anchors and evaluation --------------------------------------------------------------
    def measure_anchor(self, commit: str, ledger, round: int) -> dict[str, Any]:
        """main's k-rollout measurement on the dev tasks (through the verifier, paid from the ledger)."""
        self.source.ledger = ledger
        self.progress.note(f"measuring anchor of {commit[:10]} (round {round})")
        anchor = self.verifier.measure_anchor(commit, self.tasks("dev"), k=self.run.rollouts, round=round,
                                              ledger=ledger)
        ids = [o.trajectory_id for o in anchor.observations]
        return {
            "commit": commit, "round": round, "k": anchor.k, "tasks": anchor.dev_tasks(),
            "trajectory_ids": ids, "mean": anchor.mean, "sigma": anchor.sigma,
            "composition": self.composition_of(ids),
            "anchor": anchor.model_dump(mode="json"),
        }

    def evaluate(self, commit: str, split: str, ledger, round: int) -> dict[str, Any] | None:
        """Composition of ``commit`` on a split (held-out included: measured, never selected or exported)."""
        tasks = self.tasks(split)
        if not tasks:
            return None
        reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=self.run.seed + r, rollout=r, split=split)
                for t in tasks for r in range(self.run.rollouts)]
        self.source.ledger = ledger
        self.progress.note(f"evaluating {commit[:10]} on {split} ({len(reqs)} rollouts)")
        ledger.check(self.source.pending(reqs))
        obs, paid = self.source.observe(reqs)
        ledger.charge(paid, round, f"eval:{split}", "evaluation", tokens=sum(o.tokens for o in obs))
        return self.composition_of([o.trajectory_id for o in obs])

    # -- content failures --------------------------------------------------------------------
    def enqueue_content(self, ids: list[str], run_id: str, round: int) -> list[str]:
        out = []
        trajs = self.load(ids)
        for t, lab in zip(trajs, self.labels(trajs), strict=True):
            if lab.lever == Lever.weights:
                self.queue.enqueue(t, lab, run_id=run_id, round=round)
                out.append(t.id)
        return out

    # -- roles -----------------------------------------------------------------------------
    def harness_view(self):
        from evoharness.roles.models import HarnessView

        return HarnessView.from_repo(self.repo, self.repo.main_head())

    def evidence(self) -> list[Trajectory]:
        """The run's extra evidence (production traces, `graph.evidence`) the analyst may read, read once.

        Held-out trajectories and ids the run already has are left out (see `evidence.usable`).
        """
        if self._evidence is None:
            from evoharness.graph.evidence import ensure_evidence, usable

            snapshot = ensure_evidence(self.run_dir, self.settings)
            heldout = {t.id for t in self.env.list_tasks("heldout")} | set(self.settings.datasets.heldout_tasks)
            self._evidence, left_out = usable(snapshot, heldout, self.store)
            if snapshot:
                self.progress.note(f"analyst evidence: {len(self._evidence)} trajectories from outside the run"
                                   + (f" ({left_out} held-out or already in the run, left out)" if left_out else ""))
        return self._evidence

    def analysed(self, ids: list[str]) -> tuple[list[Trajectory], list[Label]]:
        """What the analyst and critic read: the anchor's trajectories and the run's evidence, balanced."""
        from evoharness.graph.evidence import balanced

        anchor = self.load(ids)
        extra = self.evidence()
        trajs = balanced([anchor, extra], self.labels) if extra else anchor
        return trajs, self.labels(trajs)

    def analyse(self, ids: list[str], feedback: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Patterns of the process failures in the anchor (``ids``) and in the run's evidence."""
        trajs, labels = self.analysed(ids)
        process = [(t, lab) for t, lab in zip(trajs, labels, strict=True) if lab.lever == Lever.harness]
        if not process:
            return []
        try:
            patterns = self.analyst.analyse([t for t, _ in process], [lab for _, lab in process],
                                            self.harness_view(), self.run.max_candidates, feedback or None)
        except EvoharnessError as e:  # a malformed reply that survived the role's retries
            self.progress.note(f"analyst failed: {e}")
            self.role_failures.append({"role": "analyst", "reason": str(e)})
            return []
        return [p.model_dump(mode="json") for p in patterns]

    def critique(self, patterns: list[dict[str, Any]], ids: list[str], previous: dict[str, dict]) -> list[dict]:
        """The critic's reviews. It checks the attribution against everything the analyst read; predicted
        flips are kept only for the anchor's tasks (the only tasks verification rolls out)."""
        from evoharness.roles.models import Pattern

        trajs, labels = self.analysed(ids)
        rolled_out = {t.task_id for t in self.load(ids)}
        view = self.harness_view()
        out = []
        for p in patterns:
            try:
                review = self.critic.review(Pattern.model_validate(p), view, trajs, labels).model_dump(mode="json")
                review["predicted_flips"] = [t for t in review["predicted_flips"] if t in rolled_out]
            except EvoharnessError as e:
                review = {"pattern_id": p["id"], "approved": False, "accommodation": False, "send_back": False,
                          "notes": f"critic failed: {e}"}
            if previous.get(p["id"], {}).get("send_back") or previous.get(p["id"], {}).get("was_sent_back"):
                review["send_back"] = False  # at most once per pattern
                review["was_sent_back"] = True
            out.append(review)
        return out

    def engineer(self, patterns: list[dict], reviews: list[dict], round: int,
                 rejected: list[dict] | None = None) -> tuple[list[dict], list[dict]]:
        """Candidates for the approved patterns; drops (with the reason) what cannot or need not be verified.

        A change whose tree was already rejected against the same anchor is not verified again:
        re-rolling the same edit until noise lets it through is how noise-fitting edits get merged.
        """
        from evoharness.roles.models import Pattern, Review

        view = self.harness_view()
        by_id = {r["pattern_id"]: r for r in reviews}
        candidates, dropped = [], []
        for p in patterns:
            review = by_id.get(p["id"])
            if review is None or not review.get("approved"):
                dropped.append({"pattern": p["id"], "round": round,
                                "reason": "critic: " + (review or {}).get("notes", "not approved")})
                continue
            cand = self._existing_candidate(round, p)
            if cand is None:
                try:
                    edit = self.engineer_role.propose(Pattern.model_validate(p), Review.model_validate(review), view)
                    if edit is None:
                        dropped.append({"pattern": p["id"], "round": round, "reason": "engineer: no fix to propose"})
                        continue
                    critic = Review.model_validate(review).line()
                    edit = edit.model_copy(update={"targets": p["signal"], "critic": critic})
                    cand = self.repo.create_candidate(edit, round=round)
                except (EditRejected, InputError) as e:
                    dropped.append({"pattern": p["id"], "round": round, "reason": f"edit rejected: {e}"})
                    continue
                except EvoharnessError as e:  # a role that failed after its retries
                    dropped.append({"pattern": p["id"], "round": round, "reason": f"engineer failed: {e}"})
                    continue
            tree = self.repo.tree_hash(cand.commit)
            twin = next((r for r in rejected or [] if r.get("tree") == tree and r.get("base") == cand.base), None)
            if twin is not None:
                why = f"same change as {twin['branch']}, already rejected against this anchor: not re-verified"
                self.repo.reject(cand.branch, Verdict(candidate=cand.branch, commit=cand.commit, base=cand.base,
                                                      accepted=False, reason=why))
                dropped.append({"pattern": p["id"], "round": round, "branch": cand.branch,
                                "reason": f"same change as {twin['branch']}, already rejected against this anchor"})
                continue
            candidates.append(cand.model_dump(mode="json"))
        return candidates[: self.run.max_candidates], dropped

    def _existing_candidate(self, round: int, pattern: dict) -> Candidate | None:
        """A candidate this round already created for this pattern (a node re-run after a crash)."""
        prefix = f"candidate/r{round}-"
        for branch in self.repo.branches():
            if branch.startswith(prefix):
                cand = self.repo.candidate(branch)
                if cand.targets == pattern["signal"]:
                    return cand
        return None

    # -- verification and merge ----------------------------------------------------------------
    def verify(self, cand: dict, anchor: dict, ledger, round: int, guards: dict | None = None) -> dict[str, Any]:
        """Verify one candidate against the current anchor; the verdict is also noted on its commit.

        Re-running after a crash re-reads the same cached rollouts, so it reaches the same verdict
        and charges the (rolled back) ledger exactly once.
        """
        from evoharness.errors import BudgetExhausted
        from evoharness.verification.guards import GuardBook

        candidate = Candidate.model_validate(cand)
        self.source.ledger = ledger
        self.verifier.guards = GuardBook.model_validate(guards or {})
        try:
            return self._verify(candidate, anchor, ledger, round)
        except BudgetExhausted as e:
            verdict = Verdict(candidate=candidate.branch, commit=candidate.commit, base=anchor["commit"],
                              accepted=False, reason=f"not verified: {e}")
            self.progress.note(f"  {candidate.branch}: not verified ({e})")
            return verdict.model_dump(mode="json")

    def _verify(self, candidate: Candidate, anchor: dict, ledger, round: int) -> dict[str, Any]:
        from evoharness.verification.anchors import Anchor

        plan = self.verifier.plan(candidate, Anchor.model_validate(anchor["anchor"]), ledger=ledger, round=round,
                                  k=self.run.rollouts)
        self.progress.note(f"  verifying {candidate.branch} ({candidate.targets}): "
                           f"{len(plan.selection.targeted)} targeted + {len(plan.selection.control)} control tasks, "
                           f"~{plan.rollouts_needed} rollouts needed for the predicted effect")
        outcome = self.verifier.evaluate(candidate, Anchor.model_validate(anchor["anchor"]), ledger=ledger,
                                         round=round, k=self.run.rollouts, plan=plan)
        verdict = outcome.verdict
        m = verdict.measurements
        gain = None
        if m.get("targeted_candidate") is not None and m.get("targeted_baseline") is not None:
            gain = m["targeted_candidate"] - m["targeted_baseline"]
        verdict = verdict.model_copy(update={"measurements": {**m, "gain": gain}})
        self.repo.record_verdict(verdict)
        self.progress.note(f"  {candidate.branch}: {'ACCEPT' if verdict.accepted else 'reject'} ({verdict.reason})")
        return verdict.model_dump(mode="json")

    def pin_fixed(self, before: dict, after: dict, round: int, guards: dict | None) -> dict:
        """Every task the merge fixed becomes a guard task for later candidates."""
        from evoharness.verification.anchors import Anchor
        from evoharness.verification.guards import GuardBook

        book = GuardBook.model_validate(guards or {})
        book.pin_fixed(Anchor.model_validate(before["anchor"]), Anchor.model_validate(after["anchor"]), round)
        return book.model_dump(mode="json")

    def settle(self, candidates: list[dict], verdicts: list[dict], decisions: dict[str, str],
               round: int) -> tuple[list[dict], list[dict]]:
        """Merge the best accepted (and approved) candidate; reject the rest, each with its verdict."""
        by_branch = {v["candidate"]: Verdict.model_validate(v) for v in verdicts}
        accepted = [v for v in by_branch.values() if v.accepted and decisions.get(v.candidate, "approve") == "approve"]
        accepted.sort(key=lambda v: (-(v.measurements.get("gain") or 0.0), v.candidate))
        merged, rejected = [], []
        winner = accepted[0] if accepted else None
        for cand in candidates:
            v = by_branch.get(cand["branch"])
            if v is None:
                continue
            if winner is not None and v.candidate == winner.candidate:
                sha = self._merge_once(cand["branch"], v)
                merged.append({"branch": v.candidate, "commit": v.commit, "merge_commit": sha, "round": round,
                               "reading": v.measurements.get("reading", 0.0), "targets": cand["targets"]})
                continue
            if not v.accepted:
                reason = v.reason
            elif decisions.get(v.candidate) == "reject":
                reason = "rejected by reviewer" + (f": {decisions.get(v.candidate + '#reason')}"
                                                   if decisions.get(v.candidate + "#reason") else "")
                v = v.model_copy(update={"accepted": False, "reason": reason, "decided_by": "human"})
            else:
                reason = f"accepted but superseded by {winner.candidate} (main moved: re-verify next round)"
                v = v.model_copy(update={"accepted": False, "reason": reason})
            self.repo.reject(v.candidate, v)
            rejected.append({"branch": v.candidate, "commit": v.commit, "round": round, "reason": reason,
                             "base": cand.get("base"), "tree": self.repo.tree_hash(v.commit),
                             "superseded_by": winner.candidate if reason.startswith("accepted but") else None})
        return merged, rejected

    def _merge_once(self, branch: str, verdict: Verdict) -> str:
        """Merge, unless a crash came after the merge and before the checkpoint: then find that merge."""
        already = self._merge_commit_of(verdict.commit)
        if already:
            return already
        try:
            return self.repo.merge_verified(branch, verdict)
        except MergeRefused:
            already = self._merge_commit_of(verdict.commit)
            if already:
                return already
            raise

    def _merge_commit_of(self, commit: str) -> str | None:
        g = self.repo.repo
        for c in g.iter_commits(self.repo.main_head(), first_parent=True, max_count=200):
            if len(c.parents) > 1 and c.parents[1].hexsha == commit:
                return c.hexsha
        return None

    # -- stopping ------------------------------------------------------------------------------
    def round_cost(self) -> float:
        """Worst case of one round: each candidate and its fresh baseline on every dev task, and a fresh anchor."""
        return self.run.rollouts * len(self.tasks("dev")) * (2 * self.run.max_candidates + 1)

    def reserve_for_finish(self) -> float:
        return self.run.rollouts * len(self.tasks("heldout"))

    def should_stop(self, state: dict[str, Any]) -> bool:
        return self.stop_reason(state)["reason"] is not None

    def stop_reason(self, state: dict[str, Any]) -> dict[str, Any]:
        ledger = self.ledger(state)
        comp = state.get("composition") or (state.get("anchor") or {}).get("composition") or {}
        shares = comp.get("composition", {})
        if state.get("round", 1) > self.run.max_rounds:
            return {"reason": f"round limit ({self.run.max_rounds}) reached", "recommendation": None}
        ceiling = self.router.stop_reason(shares)
        if ceiling is not None:
            return {"reason": ceiling[0], "recommendation": ceiling[1]}
        if state.get("no_accept_streak", 0) >= self.run.patience:
            return {"reason": f"ceiling: {state['no_accept_streak']} rounds in a row with nothing accepted",
                    "recommendation": self.router.weights_advice(shares)}
        if ledger.left < self.round_cost() + self.reserve_for_finish():
            return {"reason": f"budget: {ledger.left:g} units left, a round needs {self.round_cost():g}",
                    "recommendation": None}
        return {"reason": None, "recommendation": None}
