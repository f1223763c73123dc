"""The LLM roles through the real langchain-openai client, against a loopback OpenAI-compatible stub."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evoharness.roles import RoleError, make_roles
from evoharness.roles.config import RolesConfig
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


def test_unreachable_endpoint_ends_in_a_role_error():
    cfg = RolesConfig(model="openai:m", base_url="http://127.0.0.1:9/v1", max_retries=0, deadline_s=2)
    analyst, _, _ = make_roles("llm", cfg)
    trajs, labels = scenario()
    with pytest.raises(RoleError, match="model call failed"):
        analyst.analyse(trajs, labels, seed_view(), 2)
