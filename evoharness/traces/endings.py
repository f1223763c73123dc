"""Run endings that name an infrastructure fault: the model provider, the route to it or the sandbox failed, not the
agent or its harness.

An importer that reads one of these ends the run with ``Termination.error`` and an ``infra_error`` event at the last
step (``infra_event``); the labeller's ``E.infra_error`` (``diagnosis/environment.py``) reads the event: class E,
routed to neither lever. A status not listed here keeps its importer's own mapping (an unknown exception is an
error that says nothing about who broke the run: ``F3.no_delivery`` as before).

``PROVIDER_EXCEPTIONS``: exception class names, lower-cased, as a runner writes ``type(e).__name__`` of the exception
that ended the run (mini-swe-agent's ``run/extra/swebench.py``: ``exit_status, result = type(e).__name__, str(e)``):

- the OpenAI client's and LiteLLM's API errors (``openai/_exceptions.py``, ``litellm/exceptions.py``): a rate limit,
  a connection or request timeout, the provider's 5xx, a refused key or a missing model -- the request never got an
  answer. Not listed: ``BadRequestError`` (the request the harness built may be what was wrong),
  ``ContextWindowExceededError`` (a context overflow: the harness's control, ``F3.context_overflow``) and
  ``ContentPolicyViolationError`` (the provider judged the conversation);
- the sandbox's start (mini-swe-agent's ``DockerEnvironment``: ``docker run`` under ``subprocess.run(check=True,
  timeout=...)``, ``CalledProcessError`` / ``TimeoutExpired``; a command's own timeout inside the run is
  ``ExecutionTimeoutError``, an observation the agent is shown, never an exit status) and the Docker SDK's
  ``DockerException``.
"""

from __future__ import annotations

from evoharness.traces.models import Event

PROVIDER_EXCEPTIONS = frozenset(name.lower() for name in (
    # openai._exceptions / litellm.exceptions: the provider or the route to it failed
    "RateLimitError", "APIConnectionError", "APITimeoutError", "Timeout", "InternalServerError",
    "ServiceUnavailableError", "BadGatewayError", "APIError", "APIStatusError", "AuthenticationError",
    "PermissionDeniedError", "NotFoundError", "PaymentRequiredError", "MidStreamFallbackError",
    "APIResponseValidationError",
    # the sandbox would not start
    "CalledProcessError", "TimeoutExpired", "DockerException",
))


def provider_exception(status: str) -> bool:
    """Whether ``status`` (an exception class name; case and surrounding white space ignored, a module prefix such
    as ``litellm.`` too) names an infrastructure fault (``PROVIDER_EXCEPTIONS``)."""
    return status.strip().rsplit(".", 1)[-1].lower() in PROVIDER_EXCEPTIONS


def infra_event(step: int, detail: str) -> Event:
    """The event that says the infrastructure ended the run at ``step`` (``detail``: the status and what it said)."""
    return Event(type="infra_error", step=step, detail=detail[:500])
