"""A simulated world with known ground truth: tasks x behaviours, harnesses as effects on them.

Shipped in the package (not only in tests) so the benchmark, the tests and a demo share it.
A task has a healthy score ``quality``, a failing score ``fail`` and, per behaviour (signal id), the
probability that the behaviour fires in one rollout; when any fires the rollout fails. A harness
multiplies firing probabilities (``factor``) and shifts scores (``offset``) per task. Outcomes are
deterministic in (harness, task, seed), like a cached rollout.

Observation is partial, as with real detectors: a behaviour that fired is reported with probability
``recall``, and one of the task's prone behaviours that did not fire is reported anyway with
probability ``false_fire``. The score follows what truly fired; ``Observation.fired`` is what was
reported. The defaults (1.0, 0.0) observe exactly.

``common_seeds``: a rollout's random draws depend on (task, seed) only, not on the harness, as for
an agent and environment that are deterministic given the seed (the stand-in model, a local model
with seeded sampling): two harnesses on the same seed behave alike except where an edit acts (a
behaviour whose firing probability fell stops firing on some of the seeds where it fired). Off, each
harness draws afresh (an API model sampling at temperature).

``coupling`` (with ``common_seeds``): the share of rollouts that keep the common draws; the others
draw their own, as when any change to the prompt makes a deterministic agent's trajectory diverge
from the same seed's under another harness. Two harnesses' rollouts on one seed then share their
draws with probability ``coupling ** 2``. At 1.0 (the default) an edit that changes nothing
reproduces its base's rollouts exactly, so a test on paired differences cannot accept it.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from dataclasses import dataclass, field

from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.models import Split, Termination, Trajectory, Usage
from evoharness.verification.observations import Observation


@dataclass
class SimTask:
    id: str
    split: str
    quality: float
    fail: float
    prone: dict[str, float] = field(default_factory=dict)


@dataclass
class SimHarness:
    factor: dict[str, float] = field(default_factory=dict)
    offset: dict[str, float] = field(default_factory=dict)

    def child(
        self, factor: dict[str, float] | None = None, offset: dict[str, float] | None = None
    ) -> SimHarness:
        """This harness with an edit's effects composed on top."""
        f = dict(self.factor)
        for b, m in (factor or {}).items():
            f[b] = f.get(b, 1.0) * m
        o = dict(self.offset)
        for t, d in (offset or {}).items():
            o[t] = o.get(t, 0.0) + d
        return SimHarness(f, o)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class SimWorld:
    def __init__(self, tasks: list[SimTask], noise_sd: float = 0.03, recall: float = 1.0,
                 false_fire: float = 0.0, common_seeds: bool = False, coupling: float = 1.0) -> None:
        self.tasks = {t.id: t for t in tasks}
        self.common_seeds = common_seeds
        self.coupling = coupling
        self.recall = recall
        self.false_fire = false_fire
        self.harnesses: dict[str, SimHarness] = {}
        self.noise_sd = noise_sd
        self._rng = random.Random(0)
        self.names: dict[str, str] = {}

    @classmethod
    def generate(
        cls,
        seed: int,
        n_dev: int = 80,
        n_heldout: int = 80,
        behaviours: tuple[str, ...] = (),
        prone_share: float = 0.25,
        spurious: str | None = None,
        spurious_p: float = 0.04,
        recall: float = 1.0,
        false_fire: float = 0.0,
        common_seeds: bool = False,
        coupling: float = 1.0,
    ) -> SimWorld:
        rng = random.Random(seed)
        tasks = []
        for split, n in (("dev", n_dev), ("heldout", n_heldout)):
            for i in range(n):
                prone = {b: rng.uniform(0.3, 0.9) for b in behaviours if rng.random() < prone_share}
                if spurious:
                    prone[spurious] = spurious_p
                tasks.append(
                    SimTask(f"{split}-{i:03d}", split, rng.uniform(0.6, 0.9), rng.uniform(0.05, 0.25), prone)
                )
        return cls(tasks, recall=recall, false_fire=false_fire, common_seeds=common_seeds, coupling=coupling)

    def add(self, commit: str, harness: SimHarness, name: str | None = None) -> None:
        """Register ``commit``; ``name`` (default the commit) seeds its noise, for reproducible tests."""
        self.harnesses[commit] = harness
        self.names[commit] = name or commit

    def fire_prob(self, commit: str, task_id: str, behaviour: str) -> float:
        h, t = self.harnesses[commit], self.tasks[task_id]
        return min(1.0, t.prone.get(behaviour, 0.0) * h.factor.get(behaviour, 1.0))

    def expected(self, commit: str, task_id: str) -> float:
        """The true expected score of one rollout (no noise, clipping ignored)."""
        h, t = self.harnesses[commit], self.tasks[task_id]
        ok = 1.0
        for b in t.prone:
            ok *= 1.0 - self.fire_prob(commit, task_id, b)
        return ok * t.quality + (1 - ok) * t.fail + h.offset.get(task_id, 0.0)

    def expected_mean(self, commit: str, split: str) -> float:
        ids = [t for t, task in self.tasks.items() if task.split == split]
        return sum(self.expected(commit, t) for t in ids) / len(ids)

    def outcome(self, commit: str, task_id: str, seed: int, rollout: int = 0) -> Observation:
        h, t = self.harnesses[commit], self.tasks[task_id]
        rng = self._rng
        name = self.names.get(commit, commit)
        who = "" if self.common_seeds and self._coupled(name, task_id, seed) else name
        rng.seed(zlib.crc32(f"{who}|{task_id}|{seed}".encode()))
        fired = frozenset(b for b in sorted(t.prone) if rng.random() < self.fire_prob(commit, task_id, b))
        base = t.fail if fired else t.quality
        score = _clip(base + h.offset.get(task_id, 0.0) + rng.gauss(0.0, self.noise_sd))
        if self.recall < 1.0 or self.false_fire > 0.0:  # what the detectors report (extra draws only then)
            fired = frozenset(b for b in sorted(t.prone) if (
                rng.random() < self.recall if b in fired else rng.random() < self.false_fire))
        return Observation.model_construct(
            task_id=task_id,
            rollout=rollout,
            seed=seed,
            score=score,
            fired=fired,
            healthy=not fired and score >= 0.5,
            split=t.split,
            trajectory_id=None,
            tokens=0,
        )


    def _coupled(self, name: str, task_id: str, seed: int) -> bool:
        """Whether this rollout keeps the common draws (``coupling``; deterministic per rollout)."""
        if self.coupling >= 1.0:
            return True
        digest = hashlib.blake2b(f"{name}|{task_id}|{seed}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.coupling * 2**64  # crc32 here: draws correlated by name


def null_world(seed: int, target: str = "F3.repeated_action") -> SimWorld:
    """A world for null edits: 10 dev tasks prone to ``target``, 14 healthy; detectors at recall 0.8 and false fires
    0.05; every harness draws afresh (an API model at temperature), so an edit that changes nothing (``null``) gives
    baseline (``main``) and candidate exchangeable rollouts. What `scripts/null_accepts.py` and the sequential
    verdict's null test draw."""
    rng = random.Random(seed)
    tasks = [SimTask(f"d{i}", "dev", rng.uniform(0.6, 0.9), rng.uniform(0.05, 0.25),
                     {target: rng.uniform(0.3, 0.9)} if i < 10 else {}) for i in range(24)]
    w = SimWorld(tasks, recall=0.8, false_fire=0.05, common_seeds=False)
    w.add("main", SimHarness(), name=f"main{seed}")
    w.add("null", SimHarness(), name=f"null{seed}")
    return w


class SimSource:
    """An `ObservationSource` over a `SimWorld`; a memo plays the rollout cache (hits are free)."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self.memo: dict[tuple[str, str, int], Observation] = {}

    def pending(self, requests: list[RolloutRequest], ledger=None) -> int:
        return len({(r.harness_commit, r.task_id, r.seed) for r in requests} - self.memo.keys())

    def observe(self, requests: list[RolloutRequest], ledger=None) -> tuple[list[Observation], int]:
        paid, out = 0, []
        for r in requests:
            key = (r.harness_commit, r.task_id, r.seed)
            if key not in self.memo:
                self.memo[key] = self.world.outcome(*key, rollout=r.rollout)
                paid += 1
            o = self.memo[key]
            out.append(o if o.rollout == r.rollout else o.model_copy(update={"rollout": r.rollout}))
        return out, paid


class ScriptedRunner:
    """A `RolloutRunner` over a `SimWorld` that returns real `Trajectory`s.

    A rollout in which any behaviour fires is not delivered (the diagnosis labeller then reports
    ``F3.no_delivery``, unless its score reaches the healthy threshold: a Healthy run fires no
    ``F3.no_delivery``); otherwise it delivers an answer with the task's score (the labeller calls it
    healthy only at its healthy threshold, 1.0 by default). ``calls`` counts batches.
    """

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self.calls = 0
        self.rollouts = 0

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        self.calls += 1
        self.rollouts += len(requests)
        out = []
        for r in requests:
            o = self.world.outcome(r.harness_commit, r.task_id, r.seed, r.rollout)
            failed = bool(o.fired)
            msgs = [
                {"role": "user", "content": f"solve {r.task_id}"},
                {"role": "assistant", "content": "working" if failed else "done: 42"},
            ]
            out.append(
                Trajectory(
                    id=f"{r.harness_commit[:8]}-{r.task_id}-{r.seed}",
                    task_id=r.task_id,
                    split=Split(r.split) if r.split in Split.__members__ else Split.unknown,
                    harness_commit=r.harness_commit,
                    rollout=r.rollout,
                    messages=msgs,
                    final_answer=None if failed else "42",
                    score=round(o.score, 6),
                    termination=Termination.aborted if failed else Termination.delivered,
                    usage=Usage(steps=1, prompt_tokens=100, completion_tokens=20),
                )
            )
        return out
