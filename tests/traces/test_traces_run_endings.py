"""Each run-ending status a supported format can carry, as upstream writes it, gets the class and lever of issue 13's
definitions: a provider, sandbox or simulator fault is class E (neither lever); a budget the harness sets is F3 (the
harness); the agent's own format failures are F2 (the harness). docs/traces.md "Run endings" holds the tables."""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Termination


def _label(path, score=0.0):
    """The one run at ``path``, scored ``score`` (a failed verdict: the labeller says nothing of an unscored delivery),
    and its label."""
    [t] = list(load_paths([path]))
    t = t.model_copy(update={"score": score})
    label = Labeller().label(t)
    return t, label


def _mini_swe(tmp_path, status, submission="", v2=False):
    """A mini-swe-agent v1 run as its batch runner saves it (``info.exit_status`` / ``submission``; for an exception
    the runner writes ``type(e).__name__`` and ``str(e)``), or v2's with the closing ``exit`` message."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "<pr_description>Fix the crash in a.py</pr_description>"},
        {"role": "assistant", "content": "Let me look.\n\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"}]
    info = {"exit_status": status, "submission": submission}
    if v2:
        messages.append({"role": "exit", "content": "", "extra": dict(info)})
        info = {}
    path = tmp_path / "x__y-1.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1" if v2 else "mini-swe-agent-1",
                                "info": info, "messages": messages}))
    return path


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize(("status", "said"), [
    ("RateLimitError", "litellm.RateLimitError: AnthropicException - rate_limit_error"),
    ("APIConnectionError", "litellm.APIConnectionError: Connection error."),
    ("APITimeoutError", "Request timed out."),
    ("Timeout", "litellm.Timeout: Connection timed out after 600.0 seconds."),
    ("InternalServerError", "litellm.InternalServerError: OpenAIException - 500"),
    ("ServiceUnavailableError", "litellm.ServiceUnavailableError: 503 overloaded"),
    ("BadGatewayError", "502 Bad Gateway"),
    ("APIError", "litellm.APIError: APIError: OpenAIException - Connection reset"),
    ("AuthenticationError", "litellm.AuthenticationError: invalid x-api-key"),
    ("NotFoundError", "litellm.NotFoundError: model: claude-x not found"),
    ("CalledProcessError", "Command '['docker', 'run', ...]' returned non-zero exit status 125."),
    ("TimeoutExpired", "Command '['docker', 'run', ...]' timed out after 120 seconds"),
])
def test_mini_swe_agent_provider_and_sandbox_faults_are_class_e(tmp_path, status, said, v2):
    """The batch runner (``run/extra/swebench.py``) writes the class name of the exception that ended the run: a
    provider's or the sandbox's fault is the environment's, not the harness's (it was ``F3.no_delivery``, harness)."""
    t, label = _label(_mini_swe(tmp_path, status, said, v2))
    assert t.termination == Termination.error and t.final_answer is None
    assert (label.failure_class, label.first_signal.id, label.lever) == ("E", "E.infra_error", "none")
    assert status in label.first_signal.evidence and said[:40] in label.first_signal.evidence


@pytest.mark.parametrize(("status", "termination", "first", "lever"), [
    ("Submitted", Termination.delivered, "F4.poor_delivery", "weights"),
    ("Submitted ", Termination.delivered, "F4.poor_delivery", "weights"),  # stray white space: still Submitted
    (" limitsexceeded\n", Termination.step_budget, "F3.step_budget_exhausted", "harness"),
    ("LimitsExceeded", Termination.step_budget, "F3.step_budget_exhausted", "harness"),
    ("TimeExceeded", Termination.timeout, "F3.timeout", "harness"),
    ("ExecutionTimeoutError", Termination.timeout, "F3.timeout", "harness"),
    ("ContextWindowExceededError", Termination.context_overflow, "F3.context_overflow", "harness"),
    ("ContextWindowExceeded", Termination.context_overflow, "F3.context_overflow", "harness"),
    ("UserInterruption", Termination.aborted, "F3.no_delivery", "harness"),
    ("RuntimeError", Termination.error, "F3.no_delivery", "harness"),  # says nothing of who broke it
    ("BadRequestError", Termination.error, "F3.no_delivery", "harness"),  # the harness may have built it wrong
    ("", Termination.aborted, "F3.no_delivery", "harness"),
])
def test_mini_swe_agent_own_ends_keep_their_harness_labels(tmp_path, status, termination, first, lever):
    t, label = _label(_mini_swe(tmp_path, status, "diff --git a/a.py b/a.py\n" if "ubmitted" in status else ""))
    assert t.termination == termination
    assert (label.first_signal.id, label.lever) == (first, lever)
    assert not any(e.type == "infra_error" for e in t.events)

