"""The one rollout chain: executor -> retry -> content cache.

Runs, reports (`reports.measure.Measurer`) and the `verify` CLI all build it here, so they share one
cache file and one rollout identity: `cache.cache_key` (harness tree, task, seed, rollout index,
model spec, environment version). A rollout a run cached is reused by `verify` and by reports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evoharness.sandbox.api import RolloutRequest, RolloutRunner
from evoharness.traces.models import Trajectory
from evoharness.verification.cache import CachingRunner, RolloutCache
from evoharness.verification.config import VerificationSettings
from evoharness.verification.retry import RetryingRunner


def env_version(env_spec: str, env) -> str:
    """The environment part of a rollout's identity: the spec and the environment's own version."""
    return f"{env_spec}@{getattr(env, 'version', '')}"


def cache_file(home: Path | str, cfg: VerificationSettings) -> Path:
    """``verification.cache_path``, else ``<home>/rollout-cache.sqlite``."""
    return Path(cfg.cache_path) if cfg.cache_path else Path(home) / "rollout-cache.sqlite"


class RolloutChain:
    """A `RolloutRunner`: answers from the cache, runs the misses through the retrying executor.

    ``close()`` closes the executor (its exported checkouts) and the cache.
    """

    def __init__(self, executor: RolloutRunner, cfg: VerificationSettings, cache: RolloutCache, *, model: str,
                 env_version: str, tree_of: Callable[[str], str] | None = None) -> None:
        self.executor = executor
        self.cache = cache
        retrying = RetryingRunner(executor, cfg.retry_attempts, cfg.retry_wait_s, cfg.retry_max_wait_s)
        self.caching = CachingRunner(retrying, cache, model=model, env_version=env_version, tree_of=tree_of)

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        return self.caching.run(requests)

    def misses(self, requests: list[RolloutRequest]) -> list[RolloutRequest]:
        return self.caching.misses(requests)

    def key(self, req: RolloutRequest) -> str:
        return self.caching.key(req)

    @property
    def hits(self) -> int:
        return self.caching.hits

    @property
    def paid(self) -> int:
        return self.caching.paid

    def close(self) -> None:
        close = getattr(self.executor, "close", None)
        if callable(close):
            close()
        self.cache.close()


def build_chain(executor: RolloutRunner, cfg: VerificationSettings, home: Path | str, *, env_spec: str, env,
                model: str, tree_of: Callable[[str], str] | None = None) -> RolloutChain:
    return RolloutChain(executor, cfg, RolloutCache(cache_file(home, cfg)), model=model,
                        env_version=env_version(env_spec, env), tree_of=tree_of)
