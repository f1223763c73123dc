"""Measure harness commits and compare two of them beyond run-to-run noise.

`Measurer` runs k rollouts of a commit on a split's tasks through the same chain a run uses
(sandbox executor -> retries -> content-keyed rollout cache), so rollouts a run already paid for
are reused and nothing is computed twice. `compare` measures a baseline and a candidate on the
same tasks and seeds and reports the difference against the noise model's resolvable threshold.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from evoharness.agent.runner import make_model
from evoharness.config import Settings
from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.envs import get_environment
from evoharness.errors import InputError
from evoharness.graph.progress import Progress
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.config import SandboxConfig
from evoharness.sandbox.factory import make_executor
from evoharness.verification.chain import build_chain
from evoharness.verification.config import VerificationSettings
from evoharness.verification.noise import pooled_within_sd, resolvable_difference, table_value

Split = Literal["dev", "heldout"]


class Arm(BaseModel):
    """One harness commit measured on one split: k rollouts per task."""

    rev: str = Field(description="the revision as asked for (branch, sha, 'seed', 'main')")
    commit: str
    mean: float | None = Field(description="mean score over all rollouts (unscored count as 0)")
    composition: dict[str, Any] = Field(description="Composition.to_dict() of the rollouts' labels")
    per_task: dict[str, list[float]] = Field(description="scores per task, in seed order")

    @property
    def n(self) -> int:
        return sum(len(v) for v in self.per_task.values())


class Evaluation(BaseModel):
    """Baseline vs candidate on the same tasks and seeds, with the noise model's threshold."""

    harness: str
    env: str
    model: str
    split: str
    k: int
    seeds: list[int]
    tasks: list[str]
    baseline: Arm
    candidate: Arm
    difference: float | None = Field(description="candidate mean - baseline mean")
    sigma: float = Field(description="per-rollout SD of the composite score (pooled within-task, both arms)")
    z: float
    resolvable: float = Field(description="z * sigma / sqrt(k): the smallest difference beyond noise")
    resolvable_table: float = Field(description="resolvable, rounded up to 0.005 as in the papers' table")
    verdict: Literal["better", "worse", "within noise"]

    def line(self) -> str:
        b, c = self.baseline, self.candidate
        diff = "-" if self.difference is None else f"{self.difference:+.3f}"
        return (f"{self.split}: {b.rev} ({b.commit[:10]}) {_num(b.mean)} -> {c.rev} ({c.commit[:10]}) "
                f"{_num(c.mean)}  diff {diff}, resolvable {self.resolvable:.3f} (k={self.k}): {self.verdict}")


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def noise_of(baseline: Arm, candidate: Arm, k: int, z: float, floor: float) -> tuple[float, float]:
    """(sigma, resolvable): pooled within-task SD of both arms over sqrt(tasks), then z*sigma/sqrt(k)."""
    groups = list(baseline.per_task.values()) + list(candidate.per_task.values())
    sd, _df = pooled_within_sd(groups)
    tasks = max(len(baseline.per_task), 1)
    sigma = max(sd / math.sqrt(tasks), floor)
    return sigma, resolvable_difference(sigma, k, z)


def verdict_of(diff: float | None, resolvable: float) -> Literal["better", "worse", "within noise"]:
    if diff is None or abs(diff) <= resolvable:
        return "within noise"
    return "better" if diff > 0 else "worse"


class Measurer:
    """Rollouts of one harness repo on one environment with one model, cached by content.

    Built from its own sections: ``sandbox`` (executor, backend, limits), ``verification`` (retries, the
    cache file), ``diagnosis`` (the labeller's thresholds), ``harness_repo``, and ``home`` (where the
    rollout cache lives: the same file runs use); `Measurer.of` takes them from whole settings. Call
    ``close()`` when done.
    """

    def __init__(self, harness: Path | str, env: str, model: str, *, home: Path | str, sandbox: SandboxConfig,
                 verification: VerificationSettings, diagnosis: DiagnosisConfig, harness_repo: HarnessRepoConfig,
                 progress: Progress | None = None, runner=None) -> None:
        self.home, self.sandbox, self.verification = Path(home), sandbox, verification
        self.repo = HarnessRepo(harness, harness_repo)
        self.env_spec, self.model = env, model
        self.env = get_environment(env)
        self.progress = progress or Progress(quiet=True)
        self.labeller = Labeller(diagnosis)
        self._runner = runner
        self._live_progress = False  # True when the executor reports each finished rollout
        self._closers: list[Any] = []
        self._memo: dict[tuple[str, str, int, int, tuple[str, ...]], Arm] = {}

    @classmethod
    def of(cls, settings: Settings, harness: Path | str, env: str, model: str, progress: Progress | None = None,
           runner=None) -> Measurer:
        """A measurer from whole settings: its own sections, nothing else."""
        return cls(harness, env, model, home=settings.home, sandbox=settings.sandbox,
                   verification=settings.verification, diagnosis=settings.diagnosis,
                   harness_repo=settings.harness_repo, progress=progress, runner=runner)

    # -- the runner chain (built on first use) ----------------------------------------------
    def _build_runner(self):
        make_model(self.model, 0)  # an unknown model spec is bad input, not N failed rollouts
        chain = build_chain(self._executor(), self.verification, self.home,  # as runs do
                            env_spec=self.env_spec, env=self.env, model=self.model, tree_of=self.repo.tree_hash)
        self._closers.append(chain)
        return chain

    def _executor(self):
        """The executor the settings ask for (local pool or Ray, sandbox backend), reporting each rollout."""
        self._live_progress = True
        return make_executor(self.sandbox, self.repo.path, self.env_spec, self.model,
                             on_result=lambda _i, _t: self.progress.advance(1))

    @property
    def runner(self):
        if self._runner is None:
            self._runner = self._build_runner()
        return self._runner

    def close(self) -> None:
        for c in self._closers:
            close = getattr(c, "close", None)
            if callable(close):
                close()
        self._closers = []

    # -- measuring ------------------------------------------------------------------------------
    def tasks(self, split: str, limit: int = 0) -> list[str]:
        ids = [t.id for t in self.env.list_tasks(split)]
        if not ids:
            raise InputError(self.env_spec, f"no tasks in split {split!r}")
        return ids[:limit] if limit else ids

    def resolve(self, rev: str) -> str:
        if rev == "seed":
            return self.seed_commit()
        if rev == "main":
            return self.repo.main_head()
        try:
            return self.repo.repo.commit(rev).hexsha
        except Exception:  # noqa: BLE001 -- gitpython raises several types for a bad revision
            raise InputError(rev, f"unknown revision in {self.repo.path}") from None

    def seed_commit(self) -> str:
        """The first commit on main (the root of its first-parent chain)."""
        out = self.repo.repo.git.rev_list("--first-parent", "--max-parents=0", self.repo.main_head())
        return out.split()[-1]

    def measure(self, rev: str, split: str, tasks: list[str], k: int, seed: int, commit: str | None = None) -> Arm:
        """k rollouts (seeds seed..seed+k-1) of ``rev`` on ``tasks``; memoised per (commit, split, k, seed)."""
        commit = commit or self.resolve(rev)
        key = (commit, split, k, seed, tuple(tasks))
        if key in self._memo:
            return self._memo[key].model_copy(update={"rev": rev})
        reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=seed + r, rollout=r, split=split)
                for t in tasks for r in range(k)]
        runner = self.runner
        misses = runner.misses(reqs) if hasattr(runner, "misses") else reqs
        self.progress.plan(len(reqs), f"{rev} ({commit[:10]}) on {split}")
        if len(reqs) > len(misses):
            self.progress.advance(len(reqs) - len(misses))  # answered from the cache
        trajs = runner.run(reqs)
        if not self._live_progress:
            self.progress.advance(len(misses))
        per_task: dict[str, list[float]] = {t: [] for t in tasks}
        for req, traj in zip(reqs, trajs, strict=True):
            per_task[req.task_id].append(traj.score if traj.score is not None else 0.0)
        comp = Composition.from_labels(self.labeller.label(t) for t in trajs).to_dict()
        scores = [s for v in per_task.values() for s in v]
        arm = Arm(rev=rev, commit=commit, mean=(sum(scores) / len(scores)) if scores else None,
                  composition=comp, per_task=per_task)
        self._memo[key] = arm
        return arm


def compare(measurer: Measurer, baseline: str, candidate: str, split: str, k: int, seed: int, *,
            tasks: list[str], z: float, sigma_floor: float, baseline_commit: str | None = None,
            candidate_commit: str | None = None) -> Evaluation:
    """Measure both revisions on the same tasks and seeds; the difference against z*sigma/sqrt(k)."""
    if k < 1:
        raise InputError("--rollouts", "must be >= 1")
    b = measurer.measure(baseline, split, tasks, k, seed, commit=baseline_commit)
    c = measurer.measure(candidate, split, tasks, k, seed, commit=candidate_commit)
    sigma, resolvable = noise_of(b, c, k, z, sigma_floor)
    diff = None if b.mean is None or c.mean is None else c.mean - b.mean
    return Evaluation(harness=str(measurer.repo.path), env=measurer.env_spec, model=measurer.model, split=split,
                      k=k, seeds=[seed + r for r in range(k)], tasks=tasks, baseline=b, candidate=c,
                      difference=diff, sigma=sigma, z=z, resolvable=resolvable,
                      resolvable_table=table_value(resolvable), verdict=verdict_of(diff, resolvable))
