"""Role failures: a role that could not produce a valid reply after its retries."""

from __future__ import annotations

from evoharness.errors import EvoharnessError


class RoleError(EvoharnessError):
    """A role gave up: every attempt was invalid (bad JSON, wrong schema, a rejected edit).

    ``role`` names the role, ``reason`` the last problem, ``attempts`` how many replies were tried
    and ``problems`` one line per failed attempt. The graph drops the candidate and records ``str(e)``.
    """

    def __init__(self, role: str, reason: str, attempts: int = 1, problems: list[str] | None = None) -> None:
        self.role = role
        self.reason = reason
        self.attempts = attempts
        self.problems = list(problems or [])
        super().__init__(f"{role}: {reason} (after {attempts} attempt{'s' if attempts != 1 else ''})")
