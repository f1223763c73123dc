"""Infrastructure failures: retried with backoff, never counted as the agent's failure.

`RetryingRunner` retries a batch on a retryable `InfraError` with exponential backoff and gives up
at once on a non-retryable one. When retries run out the `InfraError` propagates: the run pauses and
no verdict is produced from partial rollouts.
"""

from __future__ import annotations

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from evoharness.errors import InfraError
from evoharness.logging import get_logger
from evoharness.sandbox.api import RolloutRequest, RolloutRunner
from evoharness.traces.models import Trajectory

log = get_logger(__name__)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, InfraError) and exc.retryable


class RetryingRunner:
    def __init__(
        self, runner: RolloutRunner, attempts: int = 4, wait_s: float = 1.0, max_wait_s: float = 30.0
    ) -> None:
        self.runner = runner
        self.attempts, self.wait_s, self.max_wait_s = attempts, wait_s, max_wait_s

    def __getattr__(self, name: str):  # expose the wrapped runner's extras (e.g. CachingRunner.misses)
        return getattr(self.runner, name)

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        def _log(state) -> None:
            log.warning(
                "rollout infra failure, retrying",
                attempt=state.attempt_number,
                error=str(state.outcome.exception()),
            )

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.wait_s, max=self.max_wait_s),
            reraise=True,
            before_sleep=_log,
        )
        return retrying(self.runner.run, requests)
