"""The LLM roles through the real langchain-openai client, against a loopback OpenAI-compatible stub."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evoharness.roles import RoleError, make_roles
from evoharness.roles.config import RolesConfig
from evoharness.roles.errors import EndpointDown
from tests.http_fakes import replying
from tests.roles import replies as R
from tests.roles.scenario import scenario, seed_view


@pytest.fixture
def stub():
    """A /v1/chat/completions server that answers with queued message contents and records requests."""
    state = {"replies": [], "requests": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["requests"].append(body)
            content = state["replies"].pop(0) if state["replies"] else "{}"
            out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": content}}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(out.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()


def test_chat_openai_json_schema_reply_is_parsed_and_a_bad_one_retried(stub):
    stub["replies"] = ["not json at all", R.ANALYST_OK]
    cfg = RolesConfig(model="openai:stub-model", base_url=stub["url"], max_retries=1)
    analyst, _, _ = make_roles("llm", cfg)
    trajs, labels = scenario()
    patterns = analyst.analyse(trajs, labels, seed_view(), 2)
    assert patterns[0].signal == "F3.repeated_action"
    first, second = stub["requests"]
    assert first["response_format"]["type"] == "json_schema" and first["model"] == "stub-model"
    assert "could not be used" in second["messages"][-1]["content"]


def test_an_unreachable_endpoint_is_the_endpoints_failure_not_the_roles():
    """A RoleError drops the round and the run goes on to the next: with the endpoint down, every round."""
    cfg = RolesConfig(model="openai:m", base_url="http://127.0.0.1:9/v1", max_retries=1, deadline_s=2)
    analyst, _, _ = make_roles("llm", cfg)
    trajs, labels = scenario()
    with pytest.raises(EndpointDown, match=r"^analyst: model call failed: .*127.0.0.1:9/v1.* \(after 2 attempts\)$"):
        analyst.analyse(trajs, labels, seed_view(), 2)


def test_an_endpoint_that_refuses_every_method_names_the_settings_to_check():
    """A wrong roles.base_url (no /v1): 404 to every request form."""
    with replying(lambda: (404, {"Content-Type": "application/json"}, b'{"detail":"Not Found"}')) as url:
        analyst, _, _ = make_roles("llm", RolesConfig(model="openai:m", base_url=url.removesuffix("/v1")))
        trajs, labels = scenario()
        with pytest.raises(EndpointDown, match="analyst: the endpoint refused every method .* check roles.base_url"):
            analyst.analyse(trajs, labels, seed_view(), 2)


def test_a_model_that_answers_badly_after_the_endpoint_failed_is_the_roles_failure():
    """The last attempt decides: a reply came, so the model was reached and its answer was the problem."""
    from evoharness.roles.llm import AnalystReply
    from evoharness.roles.scripted import ScriptedChatModel
    from evoharness.roles.structured import ask

    model = ScriptedChatModel(replies=[EndpointDown("HTTP 503: busy"), "not json"])
    with pytest.raises(RoleError, match="not json|JSON"):
        ask(model, [], AnalystReply, role="analyst", methods=["json_text"], max_retries=1)


def test_a_request_refused_in_every_form_with_a_400_is_the_roles_failure_not_a_pause():
    """A prompt past the model's context is refused with a 400 in every form, the plain one too: that request's
    failure (the pattern is dropped, the run goes on). Paused, the run met the same refusal on every resume, told to
    check roles.base_url; only a 404 to every form (no endpoint at that URL, or no such model) pauses."""
    too_long = (b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, you '
                b'requested 9000 tokens.", "type": "BadRequestError", "code": 400}}')
    with replying(lambda: (400, {"Content-Type": "application/json"}, too_long)) as url:
        analyst, _, _ = make_roles("llm", RolesConfig(model="openai:m", base_url=url))
        trajs, labels = scenario()
        with pytest.raises(RoleError, match=r"^analyst: the endpoint refused every method .*maximum context length"):
            analyst.analyse(trajs, labels, seed_view(), 2)


def test_a_request_too_large_for_the_endpoint_413_is_the_roles_failure_not_a_pause():
    """A 413 (a proxy's body limit) is the prompt's fault as a 400 is: it paused the run, and every resume sent the
    same prompt and met the same 413."""
    with replying(lambda: (413, {"Content-Type": "text/html"}, b"<html>413 Request Entity Too Large</html>")) as url:
        analyst, _, _ = make_roles("llm", RolesConfig(model="openai:m", base_url=url))
        trajs, labels = scenario()
        with pytest.raises(RoleError, match=r"^analyst: the endpoint refused every method .*HTTP 413"):
            analyst.analyse(trajs, labels, seed_view(), 2)


def _fails_on_long_prompts(request: dict):
    from tests.http_fakes import completion

    if sum(len(m["content"] or "") for m in request["messages"]) > 200:
        return 500, {"Content-Type": "application/json"}, b'{"error": {"message": "tokenizer: index out of range"}}'
    return completion("OK")


def test_a_500_to_this_prompt_in_every_form_while_a_short_one_is_answered_is_the_roles_failure():
    """A server that fails on this prompt (the same 500 to every form) paused the run, and every resume met it again:
    now the role asks the endpoint a one-line request, and when that is answered the 500 is this request's failure."""
    from tests.http_fakes import replying_to

    with replying_to(_fails_on_long_prompts) as url:
        analyst, _, _ = make_roles("llm", RolesConfig(model="openai:m", base_url=url))
        trajs, labels = scenario()
        with pytest.raises(RoleError, match=r"^analyst: the endpoint answered every attempt .*HTTP 500: .*index out "
                                            r"of range.* while it answers a one-line request"):
            analyst.analyse(trajs, labels, seed_view(), 2)


def test_a_500_to_every_request_short_ones_too_is_the_endpoint_down_and_pauses():
    with replying(lambda: (500, {"Content-Type": "text/plain"}, b"Internal Server Error")) as url:
        analyst, _, _ = make_roles("llm", RolesConfig(model="openai:m", base_url=url))
        trajs, labels = scenario()
        with pytest.raises(EndpointDown, match=r"^analyst: model call failed: HTTP 500: Internal Server Error"):
            analyst.analyse(trajs, labels, seed_view(), 2)
