"""The desk: analyst -> critic -> engineer over the anchor's process failures and the run's evidence."""

from __future__ import annotations

from pathlib import Path

from evoharness.diagnosis.models import Label, Lever
from evoharness.errors import EditRejected, EvoharnessError, InfraError, InputError
from evoharness.graph.book import Book
from evoharness.graph.evidence import balanced, ensure_evidence, usable
from evoharness.graph.progress import Progress
from evoharness.graph.records import Dropped, Rejected
from evoharness.graph.state import Typed
from evoharness.harness_repo.leaks import LeakGuard
from evoharness.harness_repo.models import Candidate, Verdict
from evoharness.roles.models import HarnessView, Pattern, Review
from evoharness.traces.models import Trajectory


class Desk:
    def __init__(self, book: Book, repo, roles, progress: Progress, *, run_dir: Path, max_candidates: int,
                 evidence_paths: list[Path], heldout_tasks: list[str], model: str | None = None) -> None:
        self.book = book
        self.repo = repo
        self.analyst, self.critic, self.engineer_role = roles if roles else (None, None, None)
        self.progress = progress
        self.run_dir = run_dir
        self.max_candidates = max_candidates
        self.evidence_paths = evidence_paths
        self.heldout_tasks = heldout_tasks
        self.model = model  # the LLM roles' model (None: playbook roles), said before each call: they take minutes
        self._evidence: list[Trajectory] | None = None
        self.harness_evidence = None  # graph.harness_evidence.HarnessEvidence (set by the wiring)
        self.planner = None  # graph.planning.RoundPlanner (set by the wiring)
        self.unplanned: list[Dropped] = []

    def _asking(self, role: str, what: str) -> None:
        if self.model:
            self.progress.note(f"{role}: asking {self.model} {what}")

    def harness_view(self) -> HarnessView:
        """Main's head, with the harness evidence (linter findings, culprit commits) once computed."""
        if self.harness_evidence is not None:
            return self.harness_evidence.view()
        return HarnessView.from_repo(self.repo, self.repo.main_head())

    def hold_back(self, state: Typed, ledger) -> bool:
        """Compute the harness evidence for main's head; True while some of it is untried against this
        anchor: the anchor's content failures may be the harness's, so they wait for the queue."""
        if self.harness_evidence is None or self.planner is None:
            return False
        self.harness_evidence.compute(state.anchor, ledger, state.get("round", 0))
        suspect = self.planner.open_evidence(state, self.harness_evidence)
        if suspect:
            self.progress.note(f"content failures held back from the training queue: the harness is suspect "
                               f"({len(suspect)} finding(s)/culprit(s) to try first)")
        return bool(suspect)

    def evidence(self) -> list[Trajectory]:
        """The run's extra evidence (production traces, `run.evidence`) the analyst may read, read once.

        Held-out trajectories and ids the run already has are left out (see `evidence.usable`).
        """
        if self._evidence is None:
            snapshot = ensure_evidence(self.run_dir, self.evidence_paths)
            heldout = {t.id for t in self.book.env.list_tasks("heldout")} | set(self.heldout_tasks)
            self._evidence, left_out = usable(snapshot, heldout, self.book.store)
            if snapshot:
                self.progress.note(f"analyst evidence: {len(self._evidence)} trajectories from outside the run"
                                   + (f" ({left_out} held-out or already in the run, left out)" if left_out else ""))
        return self._evidence

    def analysed(self, ids: list[str]) -> tuple[list[Trajectory], list[Label]]:
        """What the analyst and critic read: the anchor's trajectories and the run's evidence, balanced."""
        anchor = self.book.load(ids)
        extra = self.evidence()
        trajs = balanced([anchor, extra], self.book.labels) if extra else anchor
        return trajs, self.book.labels(trajs)

    def analyse(self, ids: list[str], feedback: list[Review],
                state: Typed | None = None) -> tuple[list[Pattern], list[str]]:
        """Patterns of the process failures in the anchor (``ids``) and the run's evidence and of the harness
        evidence, and the reasons the analyst failed (a malformed reply that survived the role's retries).
        With ``state``, the round planner keeps the patterns not yet tried against this anchor
        (`graph.planning`) and ``self.unplanned`` gets the signals the analyst had none for."""
        self.unplanned = []
        trajs, labels = self.analysed(ids)
        process = [(t, lab) for t, lab in zip(trajs, labels, strict=True) if lab.lever == Lever.harness]
        view = self.harness_view()
        if not process and not view.findings and not view.culprits:
            return [], []
        plan = state is not None and self.planner is not None and not feedback
        self._asking("analyst", f"about {len(process)} process failure(s)")
        try:
            patterns = self.analyst.analyse([t for t, _ in process], [lab for _, lab in process], view,
                                            self.max_candidates + (8 if plan else 0),
                                            [r.model_dump(mode="json") for r in feedback] or None)
        except InfraError:  # the roles' endpoint down (roles.errors.EndpointDown): the run pauses, no round is lost
            raise
        except EvoharnessError as e:
            self.progress.note(f"analyst failed: {e}")
            return [], [f"analyst failed: {e}"]
        out = list(patterns)
        if not plan:
            return out[: self.max_candidates], []
        self.unplanned = self.planner.unplanned(out, state)
        kept = self.planner.filter(out, state, self.max_candidates)
        if len(kept) < len(out[: self.max_candidates]):
            self.progress.note(f"planning: {len(out) - len(kept)} pattern(s) already tried against this anchor; "
                               f"trying {', '.join(p.signal for p in kept) or 'nothing new'}")
        return kept, []

    def critique(self, patterns: list[Pattern], ids: list[str], previous: dict[str, Review]) -> list[Review]:
        """The critic's reviews. It checks the attribution against everything the analyst read; predicted
        flips are kept only for the anchor's tasks (the only tasks verification rolls out)."""
        trajs, labels = self.analysed(ids)
        rolled_out = {t.task_id for t in self.book.load(ids)}
        view = self.harness_view()
        out = []
        for p in patterns:
            self._asking("critic", f"about {p.signal}")
            try:
                review = self.critic.review(p, view, trajs, labels)
                review = review.model_copy(update={"predicted_flips": [t for t in review.predicted_flips
                                                                       if t in rolled_out]})
            except InfraError:
                raise
            except EvoharnessError as e:
                self.progress.note(f"critic failed: {e}")
                review = Review(pattern_id=p.id, approved=False, accommodation=False, send_back=False,
                                notes=f"critic failed: {e}")
            before = previous.get(p.id)
            if before is not None and (before.send_back or before.was_sent_back):  # at most once per pattern
                review = review.model_copy(update={"send_back": False, "was_sent_back": True})
            out.append(review)
        return out

    def engineer(self, patterns: list[Pattern], reviews: list[Review], round: int,
                 rejected: list[Rejected] | None = None) -> tuple[list[Candidate], list[Dropped]]:
        """Candidates for the approved patterns; drops (with the reason) what cannot or need not be verified.

        A change whose tree was already rejected against the same anchor is not verified again:
        re-rolling the same edit until noise lets it through is how noise-fitting edits get merged.
        """
        view = self.harness_view()
        by_id = {r.pattern_id: r for r in reviews}
        candidates: list[Candidate] = []
        dropped: list[Dropped] = []
        for p in patterns:
            review = by_id.get(p.id)
            if review is None or not review.approved:
                dropped.append(Dropped(pattern=p.id, round=round,
                                       reason="critic: " + (review.notes if review else "not approved")))
                continue
            cand = self._existing_candidate(round, p)
            if cand is None:
                cand = self._propose(p, review, view, round, dropped)
                if cand is None:
                    continue
            tree = self.repo.tree_hash(cand.commit)
            twin = next((r for r in rejected or [] if r.tree == tree and r.base == cand.base), None)
            if twin is not None:
                why = f"same change as {twin.branch}, already rejected against this anchor"
                self.repo.reject(cand.branch, Verdict(candidate=cand.branch, commit=cand.commit, base=cand.base,
                                                      accepted=False, reason=why + ": not re-verified"))
                dropped.append(Dropped(pattern=p.id, round=round, branch=cand.branch, reason=why))
                continue
            candidates.append(cand)
        return candidates[: self.max_candidates], dropped

    def _leak_guard(self):

        if getattr(self, "_leaks", None) is None:
            self._leaks = LeakGuard(self.book.env)
        return self._leaks

    def _propose(self, p: Pattern, review: Review, view: HarnessView, round: int,
                 dropped: list[Dropped]) -> Candidate | None:
        self._asking("engineer", f"for an edit for {p.signal}")
        try:
            edit = self.engineer_role.propose(p, review, view)
            if edit is None:
                dropped.append(Dropped(pattern=p.id, round=round, reason="engineer: no fix to propose"))
                return None
            edit = edit.model_copy(update={"targets": p.signal, "critic": review.line()})
            self._leak_guard().check(edit)  # no task text, expected answer or scorer code in a harness
            return self.repo.create_candidate(edit, round=round)
        except (EditRejected, InputError) as e:
            dropped.append(Dropped(pattern=p.id, round=round, reason=f"edit rejected: {e}"))
        except InfraError:
            raise
        except EvoharnessError as e:  # a role that failed after its retries
            self.progress.note(f"engineer failed: {e}")
            dropped.append(Dropped(pattern=p.id, round=round, reason=f"engineer failed: {e}"))
        return None

    def _existing_candidate(self, round: int, pattern: Pattern) -> Candidate | None:
        """A candidate this round already created for this pattern (a node re-run after a crash)."""
        return self.repo.open_candidate(round, pattern.signal)
