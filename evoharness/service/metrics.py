"""Prometheus metrics: read from durable state at scrape time, plus per-process request counters.

Counters that must survive a restart (trajectories ingested, rounds, rollouts) are computed
from the stores when Prometheus scrapes, so they never reset; the request counters and the
ingest latency histogram are per process.
"""

from __future__ import annotations

import json
from collections import Counter as Tally
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from evoharness.logging import get_logger

log = get_logger("evoharness.service")

VERDICTS = ("pending", "verified", "merged", "rejected", "superseded")


class ServiceCollector:
    """Collects from the app's ingest store, daemon, training queue and harness repo."""

    def __init__(self, app_state) -> None:
        self.s = app_state
        self._queue = None
        self._done: dict[str, dict[str, Any]] = {}  # finished runs' numbers (their summary never changes)

    def _runs(self) -> dict[str, dict[str, Any]]:
        from evoharness.graph.runner import runs_dir
        from evoharness.service.runs import budget_of

        daemon, settings = self.s.daemon, self.s.settings
        out: dict[str, dict[str, Any]] = {}
        names = set(daemon.snapshots) | set(daemon.history())
        for run_id in sorted(names):
            summary = runs_dir(settings) / run_id / "summary.json"
            if run_id in self._done:
                out[run_id] = self._done[run_id]
            elif summary.is_file():
                data = json.loads(summary.read_text())
                b = data.get("budget") or {}
                out[run_id] = self._done[run_id] = {"rounds": len(data.get("rounds", [])),
                                                    "rollouts": b.get("rollouts", 0), "left": b.get("left")}
            elif run_id in daemon.snapshots:
                snap = daemon.snapshots[run_id]
                b = budget_of(snap)
                out[run_id] = {"rounds": len(snap.get("rounds", [])), "rollouts": b["rollouts"], "left": b["left"]}
        return out

    def _candidates(self) -> Tally:
        from pathlib import Path

        from evoharness.harness_repo.repo import HarnessRepo
        from evoharness.harness_repo.review import list_candidates

        path = Path(self.s.settings.run.harness)
        if not (path / ".git").exists():
            return Tally()
        return Tally(c.status for c in list_candidates(HarnessRepo(path, self.s.settings.harness_repo)))

    def collect(self):
        ingest = self.s.ingest
        stats = ingest.stats()
        c = CounterMetricFamily("evoharness_trajectories_ingested", "Trajectories stored by POST /trajectories "
                                "(unique ids, durable)")
        c.add_metric([], stats["total"])
        yield c
        c = CounterMetricFamily("evoharness_ingested_queued_for_training", "Ingested content failures moved "
                                "into the training queue")
        c.add_metric([], stats["queued_for_training"])
        yield c
        g = GaugeMetricFamily("evoharness_ingested_by_class", "Ingested trajectories by failure class",
                              labels=["failure_class"])
        for cls, n in ingest.composition(top=0).counts.items():
            g.add_metric([cls], n)
        yield g
        try:
            if self._queue is None:
                from evoharness.datasets.queue import queue_from_settings

                self._queue = queue_from_settings(self.s.settings)
            g = GaugeMetricFamily("evoharness_training_queue_depth", "Content failures in the training queue")
            g.add_metric([], len(self._queue))
            yield g
        except Exception as e:  # a scrape must not fail because one source is down
            log.warning("metrics.queue_unavailable", error=str(e))
        runs = self._runs()
        rounds = CounterMetricFamily("evoharness_rounds", "Rounds completed", labels=["run_id"])
        rollouts = CounterMetricFamily("evoharness_rollouts", "Rollouts paid from the budget", labels=["run_id"])
        left = GaugeMetricFamily("evoharness_budget_left", "Budget units left", labels=["run_id"])
        for run_id, r in runs.items():
            rounds.add_metric([run_id], r["rounds"])
            rollouts.add_metric([run_id], r["rollouts"] or 0)
            if r["left"] is not None:
                left.add_metric([run_id], r["left"])
        yield rounds
        yield rollouts
        yield left
        phase = GaugeMetricFamily("evoharness_run_phase", "1 for the phase each known run is in",
                                  labels=["run_id", "phase"])
        for run_id, p in dict(self.s.daemon.phase).items():
            phase.add_metric([run_id, p], 1)
        yield phase
        try:
            tally = self._candidates()
            g = GaugeMetricFamily("evoharness_candidates", "Candidate branches by verdict status", labels=["verdict"])
            for v in VERDICTS:
                g.add_metric([v], tally.get(v, 0))
            yield g
        except Exception as e:
            log.warning("metrics.candidates_unavailable", error=str(e))
        up = GaugeMetricFamily("evoharness_loop_up", "1 while the background loop thread is alive")
        up.add_metric([], 1 if self.s.daemon.alive else 0)
        yield up


class RequestMetrics:
    """Per-process counters, registered on the app's own registry (several apps may live in one process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ingest_requests = Counter("evoharness_ingest_requests", "POST /trajectories requests by outcome",
                                       ["outcome"], registry=registry)
        self.ingest_duplicates = Counter("evoharness_ingest_duplicates", "Posted trajectories whose id was "
                                         "already stored with the same content (a retry: ignored)",
                                         registry=registry)
        self.ingest_conflicts = Counter("evoharness_ingest_conflicts", "Posted trajectories whose id was already "
                                        "stored with other content (not stored; listed in the answer)",
                                        registry=registry)
        self.ingest_seconds = Histogram("evoharness_ingest_seconds", "Time to validate, label and durably store "
                                        "one POST /trajectories", registry=registry,
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.unauthorized = Counter("evoharness_unauthorized_requests", "Requests refused with 401",
                                    registry=registry)
