"""Evidence about the harness itself, for the roles: the linter's findings and the culprit commits.

`HarnessEvidence.view()` is main's `HarnessView` with ``findings`` (the harness linter on main's
files, the tools the agent is given, the anchor's trajectories and labels) and ``culprits`` (commits on
main after which a signal of the anchor rose: a bisect over main's first-parent history, measured on
the tasks where the signal fired, with the anchor's own seeds, through the rollout cache and paid from
the ledger under the purpose ``history``; the mean score on those tasks must have fallen there too:
a signal that rose with a commit that made the tasks better -- a loop guard's blocks -- is no defect).
Both are computed once per main head.

A signal qualifies for the bisect (`evoharness.graph.culprit_signals`) when it fired (anywhere in the trajectory,
not only first) in at least ``min_support`` of the anchor's failed rollouts and a ``MIN_SHARE`` of them: content
signals too, because a content failure that appeared with a harness commit is the harness's, not the weights'.
Counted among the failed rollouts, not all of them: a commit is a culprit only where the tasks got worse, so its
signal is one that explains failures, and a signal that also fires on healthy rollouts (a loop guard's blocks that
the run got past) neither adds to nor dilutes the count -- a defect that fails 8 of 56 rollouts is 8 of the 19
failures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evoharness.graph.culprit_signals import bisect_signals, culprit_hits
from evoharness.graph.state import AnchorEntry
from evoharness.harness_repo.history import bisect, main_history, revert_changes
from evoharness.roles.config import RolesConfig
from evoharness.roles.lint import declared_tools, lint_harness
from evoharness.roles.models import Culprit, Evidence, HarnessView
from evoharness.roles.playbook import evidence_patterns
from evoharness.sandbox.api import RolloutRequest
from evoharness.traces.cost import cost_signals, is_cost_signal

MIN_RISE = 0.25  # incidence (share of rollouts) a signal must have risen by at the culprit
MIN_SCORE_DROP = 0.1  # and the mean score on those tasks must have fallen by this much at the culprit
HISTORY_LIMIT = 16


class HarnessEvidence:
    """Computed in the enqueue node (``compute``: it may pay for history rollouts) and kept per main head
    in ``<run dir>/harness_evidence.json``, so the critic and engineer -- and a resumed run -- read the
    same evidence (``view``). ``compute`` re-measures (from the rollout cache) each time it runs, so
    the ledger pays for the history once even when a crash lost the node that paid."""

    def __init__(self, repo: Any, book: Any, run_dir: Path, progress: Any, min_support: int = 2) -> None:
        self.repo, self.book, self.run_dir, self.progress = repo, book, Path(run_dir), progress
        self.min_support = min_support
        self._views: dict[str, HarnessView] = {}

    @property
    def path(self) -> Path:
        return self.run_dir / "harness_evidence.json"

    def _stored(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    # -- the linter ---------------------------------------------------------------------------
    def tools(self, view: HarnessView) -> list[dict[str, str]]:
        """The tools the agent is given: the environment's (for its first dev task) and the harness's own
        (names read with ``ast``: harness code is never run on the host)."""
        tasks = self.book.env.list_tasks("dev")
        out = [{"name": t.get("function", {}).get("name", ""), "description": t.get("function", {}).get(
            "description", "")} for t in (self.book.env.tools(tasks[0]) if tasks else [])]
        return out + [{"name": n, "description": ""} for path, text in view.files.items()
                      if path.startswith("tools/") and path.endswith(".py") for n in declared_tools(text)]

    def task_text(self) -> str:
        tasks = self.book.env.list_tasks("dev")
        return tasks[0].prompt if tasks else ""

    def compute(self, anchor: AnchorEntry, ledger: Any, round: int) -> HarnessView:
        """Lint main's head against the anchor and bisect its history (once per head); the view."""
        head = self.repo.main_head()
        stored = self._stored()
        if anchor.commit == head:
            # measured every time the node runs: the rollouts come from the cache, and the run's ledger
            # (which remembers what it paid for) charges them exactly once, also when a crash lost the
            # node's first run after the file was written
            culprits = self.culprits(anchor, ledger, round)
            stored[head] = {"anchor_ids": anchor.trajectory_ids,
                            "culprits": [c.model_dump(mode="json") for c in culprits]}
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(stored))
            tmp.replace(self.path)
        return self.view()

    def known(self) -> bool:
        return self.repo.main_head() in self._stored()

    def view(self) -> HarnessView:
        """Main's view, with the findings and culprits computed for its head (none before ``compute``)."""
        base = HarnessView.from_repo(self.repo, self.repo.main_head())
        key = base.commit or ""
        if key not in self._views:
            entry = self._stored().get(key)
            if entry is None:
                return base
            trajs = self.book.load(entry["anchor_ids"])
            findings = lint_harness(base, self.tools(base), trajs, self.book.labels(trajs), self.task_text())
            culprits = [Culprit.model_validate(c) for c in entry["culprits"]]
            self._views[key] = base.model_copy(update={"findings": findings, "culprits": culprits})
        return self._views[key]

    def patterns(self) -> list[Any]:
        """The evidence patterns the playbook analyst would write for the head (to plan and to hold the queue)."""
        view = self.view()
        return evidence_patterns(view, RolesConfig(min_support=self.min_support), max(len(view.findings), 1))

    def cost_explained(self, ids: list[str]) -> frozenset[str]:
        """Of the trajectories ``ids``, those where the cost signal of a supported linter finding on main fired: a
        harness cause is named for what they cost (`evoharness.traces.cost`), so they are not queued for training."""
        targets = {f.target for f in self.view().findings if is_cost_signal(f.target) and f.support >= self.min_support}
        out = frozenset(t.id for t in self.book.load(ids) if targets & cost_signals(t)) if targets else frozenset()
        if out:
            self.progress.note(f"{len(out)} trajectories kept from the training queue: a harness cause is named for "
                               f"what they cost ({', '.join(sorted(targets))})")
        return out

    # -- history --------------------------------------------------------------------------------
    def culprits(self, anchor: AnchorEntry, ledger: Any, round: int) -> list[Culprit]:
        repo = self.repo
        head = anchor.commit
        commits = main_history(repo.repo, head, HISTORY_LIMIT)
        if len(commits) < 2:
            return []
        trajs = self.book.load(anchor.trajectory_ids)
        labels = self.book.labels(trajs)
        out: list[Culprit] = []
        obs = anchor.anchor["observations"]
        for sig in bisect_signals(labels, self.min_support):
            tasks = sorted({lab.task_id for lab in labels if any(s.id == sig for s in lab.signals)})
            refs = [(o["task_id"], o["seed"], o.get("rollout", 0)) for o in obs
                    if o["task_id"] in tasks and o.get("split", "dev") == "dev"]
            head_fired = [sig in set(o.get("fired") or ()) for o in obs
                          if o["task_id"] in tasks and o.get("split", "dev") == "dev"]
            head_value = sum(head_fired) / max(len(head_fired), 1)

            scores: dict[str, float] = {}

            def measure(commit: str, refs=refs, sig=sig, scores=scores) -> float:
                reqs = [RolloutRequest(task_id=t, harness_commit=commit, seed=seed, rollout=r, split="dev")
                        for t, seed, r in refs]
                ledger.check(self.book.source.pending(reqs, ledger))
                got, paid = self.book.source.observe(reqs, ledger)
                ledger.charge(paid, round, f"history:{commit[:10]}", "history", tokens=sum(o.tokens for o in got))
                scores[commit] = sum(o.score for o in got) / max(len(got), 1)
                return sum(sig in o.fired for o in got) / max(len(got), 1)

            culprit, seen = bisect(commits, measure, head_value, MIN_RISE)
            if culprit is None:
                continue
            parent_sha = repo.repo.commit(culprit).parents[0].hexsha if repo.repo.commit(culprit).parents else None
            if culprit != head and culprit not in scores:
                measure(culprit)
            head_score = sum(o["score"] for o in obs if o["task_id"] in tasks and o.get("split", "dev") == "dev") \
                / max(len(refs), 1)
            after_score = scores.get(culprit, head_score)
            if parent_sha not in scores or scores[parent_sha] - after_score < MIN_SCORE_DROP:
                continue  # the signal rose but the tasks did not get worse: not a defect
            changes = revert_changes(repo.repo, culprit, head)
            if not changes:
                continue
            c = repo.repo.commit(culprit)
            parent = c.parents[0].hexsha if c.parents else None
            before = seen.get(parent) if parent else None
            if before is None:
                before = min(seen.values())
            paths = sorted({d.b_path or d.a_path for d in c.parents[0].diff(c)}) if c.parents else []
            hits = culprit_hits(labels, sig)
            out.append(Culprit(commit=culprit, subject=c.summary, signal=sig, before=round_(before),
                               after=round_(seen[culprit] if culprit in seen else head_value), paths=paths,
                               measured=list(seen), task_ids=tasks, changes=changes,
                               evidence=[Evidence(trajectory_id=lab.trajectory_id, task_id=lab.task_id, step=s.step,
                                                  quote=(s.evidence or "")[:200]) for lab, s in hits]))
            self.progress.note(f"history: {out[-1].line()}")
        return _dedupe(out)


def round_(x: float) -> float:
    return round(x, 4)


def _dedupe(culprits: list[Culprit]) -> list[Culprit]:
    """One entry per commit: the signal that rose most."""
    best: dict[str, Culprit] = {}
    for c in culprits:
        if c.commit not in best or c.after - c.before > best[c.commit].after - best[c.commit].before:
            best[c.commit] = c
    return list(best.values())
