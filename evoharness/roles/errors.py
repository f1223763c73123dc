"""Role failures: a role that could not produce a valid reply after its retries."""

from __future__ import annotations

from evoharness.errors import EvoharnessError, InfraError


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


class EndpointDown(InfraError):
    """The roles' model endpoint gave no reply: unreachable, an HTTP error status, a reply that is no chat
    completion, or a 404 to every request form (a wrong ``roles.base_url`` or model; a 400 to every form is
    that request refused, a `RoleError`).

    Infrastructure, not the model's answer: `structured.ask` raises it (naming the role) instead of a
    `RoleError`, and the graph lets it through, so the run pauses (a dropped round would spend the run on
    nothing). A missed deadline is not one: the model answered too slowly, which is the role's failure.
    ``status`` is the HTTP status when the endpoint answered one (None: no answer at all).
    """

    def __init__(self, reason: str, retryable: bool = True, status: int | None = None) -> None:
        super().__init__(reason, retryable)
        self.status = status
