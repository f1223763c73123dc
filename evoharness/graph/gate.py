"""The gate: verify candidates against the anchor, settle the round (merge the best, reject the rest).

Verification builds a `Verifier` per call from the run's source, the `[verification]` section and the
round's guard book, and pays from the ledger passed in: nothing is assigned onto a shared object.
"""

from __future__ import annotations

import git

from evoharness.cli_support import counted
from evoharness.errors import BudgetExhausted, MergeRefused
from evoharness.graph.progress import Progress
from evoharness.graph.records import Merged, Rejected
from evoharness.graph.source import GraphSource, RunLedger
from evoharness.graph.state import AnchorEntry
from evoharness.harness_repo.models import SUPERSEDED_BY, Candidate, Verdict
from evoharness.harness_repo.signing import VerdictSigner
from evoharness.harness_repo.static_review import review_change
from evoharness.verification.anchors import Anchor
from evoharness.verification.config import VerificationConfig
from evoharness.verification.guards import GuardBook
from evoharness.verification.hunks import GitParts
from evoharness.verification.verifier import Verifier


def planned(candidate: Candidate, plan) -> str:
    """The progress line of a candidate's verification plan."""
    sel = plan.selection
    line = f"  verifying {candidate.branch} ({candidate.targets}): {len(sel.targeted)} targeted + {len(sel.control)} " \
           "control tasks, "
    if plan.rollouts_needed is None:  # no targeted task (a pattern of production traces only): it said '~None'
        return line + f"no task where {candidate.targets} fired: its behaviour cannot be measured here"
    return line + f"~{counted(plan.rollouts_needed, 'rollout')} needed for the predicted effect"


class Gate:
    def __init__(self, repo, source: GraphSource | None, config: VerificationConfig, progress: Progress, *,
                 rollouts: int, seed: int) -> None:
        self.repo = repo
        self.source = source
        self.config = config
        self.progress = progress
        self.rollouts = rollouts
        self.seed = seed

    def verifier(self, guards: GuardBook | None = None) -> Verifier:
        return Verifier(self.source, self.config, guards=guards or GuardBook(), seed=self.seed,
                        signer=VerdictSigner(self.repo.repo),  # merges need a verdict this verifier signed
                        hunks=GitParts(self.repo))  # each hunk of a candidate must gain

    # -- verification ----------------------------------------------------------------------------
    def verify(self, candidate: Candidate, anchor: AnchorEntry, ledger: RunLedger, round: int,
               guards: GuardBook | None = None) -> Verdict:
        """Verify one candidate against the current anchor; the verdict is also noted on its commit.

        Re-running after a crash re-reads the same cached rollouts, so it reaches the same verdict
        and charges the (rolled back) ledger exactly once.
        """
        try:
            return self._verify(candidate, anchor.measured(), ledger, round, guards)
        except BudgetExhausted as e:
            verdict = Verdict(candidate=candidate.branch, commit=candidate.commit, base=anchor.commit,
                              accepted=False, reason=f"not verified: {e}")
            self.progress.note(f"  {candidate.branch}: not verified ({e})")
            return verdict

    def _verify(self, candidate: Candidate, anchor: Anchor, ledger: RunLedger, round: int,
                guards: GuardBook | None) -> Verdict:
        verifier = self.verifier(guards)
        plan = verifier.plan(candidate, anchor, ledger=ledger, round=round, k=self.rollouts)
        self.progress.note(planned(candidate, plan))
        outcome = verifier.evaluate(candidate, anchor, ledger=ledger, round=round, k=self.rollouts, plan=plan)
        verdict = outcome.verdict
        m = verdict.measurements
        gain = None
        if m.get("targeted_candidate") is not None and m.get("targeted_baseline") is not None:
            gain = m["targeted_candidate"] - m["targeted_baseline"]
        verdict = verdict.model_copy(update={"measurements": {**m, "gain": gain}})
        self.repo.record_verdict(verdict)
        word = "ACCEPT" if verdict.accepted else "undecided" if m.get("needs_rollouts") else "reject"
        self.progress.note(f"  {candidate.branch}: {word} ({verdict.reason})")
        return verdict

    @staticmethod
    def pin_fixed(before: AnchorEntry, after: AnchorEntry, round: int, guards: GuardBook) -> GuardBook:
        """Every task the merge fixed becomes a guard task for later candidates (a new book)."""
        book = guards.model_copy(deep=True)
        book.pin_fixed(before.measured(), after.measured(), round)
        return book

    # -- settling -------------------------------------------------------------------------------
    def settle(self, candidates: list[Candidate], verdicts: list[Verdict], decisions: dict[str, str],
               round: int) -> tuple[list[Merged], list[Rejected]]:
        """Merge the best accepted (and approved) candidate; reject the rest, each with its verdict."""
        by_branch = {v.candidate: v for v in verdicts}
        held = {v.candidate: why for v in by_branch.values() if v.accepted
                and decisions.get(v.candidate) != "approve" and (why := self.needs_human(v))}
        accepted = [v for v in by_branch.values() if v.accepted and decisions.get(v.candidate, "approve") == "approve"
                    and v.candidate not in held]
        accepted.sort(key=lambda v: (-(v.measurements.get("gain") or 0.0), v.candidate))
        merged: list[Merged] = []
        rejected: list[Rejected] = []
        accepted = [_approval(v, decisions) for v in accepted]
        winner = accepted[0] if accepted else None
        refused = None  # why the winner could not be merged (main moved outside the run, its branch moved)
        if winner is not None:
            try:
                sha = self._merge_once(winner.candidate, winner,
                                       human_approved=decisions.get(winner.candidate) == "approve")
            except MergeRefused as e:
                refused = e.reason + self._approval_void(winner, decisions)
                winner = None
                self.progress.note(f"  {e.candidate}: accepted, not merged: {refused}")
        for cand in candidates:
            v = by_branch.get(cand.branch)
            if v is None:
                continue
            if winner is not None and v.candidate == winner.candidate:
                approved = {"approval": winner.approval} if winner.approval else {}  # unset: a dump as before
                merged.append(Merged(branch=v.candidate, commit=v.commit, merge_commit=sha, round=round,
                                     reading=v.measurements.get("reading", 0.0), targets=cand.targets, **approved))
                continue
            if refused is not None and v.candidate in {a.candidate for a in accepted}:
                reason = f"accepted, not merged: {refused}"  # a recorded outcome; the run goes on
                v = _approval(v, decisions).model_copy(update={"accepted": False, "reason": reason})
            elif not v.accepted:
                reason = v.reason
            elif v.candidate in held:
                reason = f"accepted, but {held[v.candidate]}: a human must approve it (run --review)"
                v = v.model_copy(update={"accepted": False, "reason": reason})
            elif decisions.get(v.candidate) == "reject":
                reason = "rejected by reviewer" + (f": {decisions.get(v.candidate + '#reason')}"
                                                   if decisions.get(v.candidate + "#reason") else "")
                v = v.model_copy(update={"accepted": False, "reason": reason, "decided_by": "human"})
            else:
                reason = f"{SUPERSEDED_BY} {winner.candidate} (main moved: re-verify next round)"
                v = v.model_copy(update={"accepted": False, "reason": reason})
            self.repo.reject(v.candidate, v)
            try:
                tree: str | None = self.repo.tree_hash(v.commit)
            except ValueError:  # the commit is gone: its branch deleted, then pruned by git
                tree = None
            rejected.append(Rejected(branch=v.candidate, commit=v.commit, round=round, reason=reason, base=cand.base,
                                     tree=tree,
                                     superseded_by=winner.candidate if reason.startswith(SUPERSEDED_BY) else None))
        return merged, rejected

    def _approval_void(self, verdict: Verdict, decisions: dict[str, str]) -> str:
        """Why a person's approval of ``verdict`` does not hold now that main moved since it was verified ("" when no
        one approved it or main did not move). The approval was of the candidate measured against main at its base:
        against any other main it is unverified, and re-verification there is the rule, so it is not carried over."""
        if decisions.get(verdict.candidate) != "approve":
            return ""
        main = self.repo.main_head()
        try:
            if self.repo.repo.commit(verdict.base).hexsha == main:
                return ""
        except (ValueError, git.BadName):  # a base this repository does not hold: not main either
            pass
        return (f" -- your approval held for main at {verdict.base[:10]}, where it was verified, not for main at "
                f"{main[:10]}, and is spent: this run's next round proposes and verifies its candidates afresh on "
                "main as it is now (this edit again only if the failure it targets still shows there) and asks "
                "for review only of one it accepts (a run with no round left: start another `evoharness run`)")

    def needs_human(self, verdict: Verdict) -> str | None:
        """Why merging this candidate needs a human (its middleware/tools use process-level tricks), or None (also
        where the commit verified is gone: nothing to review or merge)."""
        findings = review_change(self.repo, verdict.base, verdict.commit) if self.repo.holds(verdict.commit) else []
        if not findings:
            return None
        return "static review found " + "; ".join(str(f) for f in findings[:3])

    def _merge_once(self, branch: str, verdict: Verdict, human_approved: bool = False) -> str:
        """Merge, unless a crash came after the merge and before the checkpoint: then find that merge."""
        already = self._merge_commit_of(verdict.commit)
        if already:
            return already
        try:
            return self.repo.merge_verified(branch, verdict, human_approved=human_approved)
        except MergeRefused:
            already = self._merge_commit_of(verdict.commit)
            if already:
                return already
            raise

    def _merge_commit_of(self, commit: str) -> str | None:
        for c in self.repo.repo.iter_commits(self.repo.main_head(), first_parent=True, max_count=200):
            if len(c.parents) > 1 and c.parents[1].hexsha == commit:
                return c.hexsha
        return None


def _approval(verdict: Verdict, decisions: dict[str, str]) -> Verdict:
    """``verdict`` with the reviewer's approval and its reason (``approve --reason``), if a person approved it."""
    if decisions.get(verdict.candidate) != "approve":
        return verdict
    why = decisions.get(verdict.candidate + "#reason")
    return verdict.model_copy(update={"approval": "approved by reviewer" + (f": {why}" if why else "")})
