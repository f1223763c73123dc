"""Build a run's collaborators, each from its own settings section: repo, rollout chain, book, desk,
gate and stopping rule."""

from __future__ import annotations

import os
from pathlib import Path

from evoharness.config import Settings
from evoharness.datasets.queue import TrainingQueue
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.routing import Router
from evoharness.envs import get_environment
from evoharness.graph.book import Book
from evoharness.graph.desk import Desk
from evoharness.graph.gate import Gate
from evoharness.graph.harness_evidence import HarnessEvidence
from evoharness.graph.planning import RoundPlanner
from evoharness.graph.progress import Progress
from evoharness.graph.services import Services
from evoharness.graph.source import GraphSource, RunLabels
from evoharness.graph.stopping import Stopping
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.roles.factory import make_roles
from evoharness.sandbox.factory import make_executor
from evoharness.traces.store import TrajectoryStore
from evoharness.verification.chain import build_chain
from evoharness.verification.config import VerificationConfig


def check_harness(settings: Settings) -> None:
    """Open the run's harness repo once, before a new run's directory is made: one git cannot open is an
    ``InputError`` and no run exists (a missing one is made later by ``build_services``: init; a link that leads
    nowhere is no missing one: it said 'file exists' after the run's directory was made)."""
    if os.path.lexists(settings.run.harness):
        HarnessRepo(settings.run.harness, settings.harness_repo)


def build_services(settings: Settings, run_dir: Path, progress: Progress, lazy: bool = False) -> Services:
    """The run's services. ``lazy``: only what reading a run's state needs (no executor, roles, queue)."""
    run = settings.run
    harness = Path(run.harness)
    if not harness.exists():
        init_harness(harness)
    repo = HarnessRepo(harness, settings.harness_repo)
    env = get_environment(run.env)
    store = TrajectoryStore(run_dir / "trajectories.jsonl")
    labeller = Labeller(settings.diagnosis)
    # by trajectory id: the source labels each rollout once, the book reads them; a resumed run reads the store's
    labels = RunLabels(labeller, store.labels_path)
    chain = source = queue = roles = None
    if not lazy:
        executor = make_executor(settings.sandbox, repo.path, run.env, run.model)  # executor, backend, batching
        chain = build_chain(executor, settings.verification, settings.home, env_spec=run.env, env=env,
                            model=run.model, tree_of=repo.tree_hash)
        source = GraphSource(chain, store, labeller, progress, labels)
        queue_url = getattr(settings.datasets, "url", None) or f"sqlite:///{Path(settings.home) / 'queue.db'}"
        queue = TrainingQueue(queue_url)
        roles = make_roles(settings.roles.kind, settings.roles)
    verification = VerificationConfig.of(settings.verification, rollouts=run.rollouts, anchor_rollouts=run.rollouts)
    gate = Gate(repo, source, verification, progress, rollouts=run.rollouts, seed=run.seed)
    book = Book(run, env, store, labeller, progress, source=source, verifier=gate.verifier() if source else None,
                queue=queue, labels=labels)
    desk = Desk(book, repo, roles, progress, run_dir=run_dir, max_candidates=run.max_candidates,
                evidence_paths=list(run.evidence), heldout_tasks=list(settings.datasets.heldout_tasks),
                model=settings.roles.model if settings.roles.kind == "llm" else None)
    router = Router.from_config(settings.diagnosis)
    stopping = Stopping(run, router, book.tasks, settings.verification.units_per_rollout)
    evidence = HarnessEvidence(repo, book, run_dir, progress, settings.roles.min_support)
    planner = RoundPlanner(book, settings.roles.min_support, floor=router.ceiling)
    desk.harness_evidence = stopping.harness_evidence = evidence
    desk.planner = stopping.planner = planner
    return Services(repo=repo, book=book, desk=desk, gate=gate, stopping=stopping, progress=progress, chain=chain)
