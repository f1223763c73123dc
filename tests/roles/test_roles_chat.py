"""`OpenAIChat` against a loopback server: deadline cancels (never re-sends), method fallback, token budget."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evoharness.roles import RoleError, make_roles
from evoharness.roles.chat import OpenAIChat
from evoharness.roles.config import RolesConfig
from evoharness.roles.errors import EndpointDown
from evoharness.roles.llm import LLMAnalyst, LLMEngineer, estimate_tokens
from evoharness.roles.models import Pattern, Review
from evoharness.roles.scripted import ScriptedChatModel
from evoharness.roles.structured import ask
from tests.http_fakes import fixed_reply
from tests.roles import replies as R
from tests.roles.scenario import scenario, seed_view


@pytest.fixture
def server():
    """Streams ``state["reply"]`` one character per ``state["delay"]`` seconds as SSE chunks; answers
    a request whose response_format type is in ``state["refuse"]`` with llama-cpp-python's 500."""
    state = {"requests": [], "reply": R.ANALYST_OK, "delay": 0.0, "refuse": set(), "disconnected": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["requests"].append(body)
            if (body.get("response_format") or {}).get("type") in state["refuse"]:
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": {"message": "1 validation error: response_format.type"}}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for ch in state["reply"]:
                    chunk = {"choices": [{"index": 0, "delta": {"content": ch}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(state["delay"])
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):  # what llama.cpp's server sees: it stops generating
                state["disconnected"].append(time.monotonic())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    httpd.shutdown()


def _analyst(url: str, **kw) -> LLMAnalyst:
    cfg = RolesConfig(kind="llm", model="openai:m", base_url=url, **kw)
    return make_roles("llm", cfg)[0]


def test_a_call_past_its_deadline_is_cancelled_and_not_re_sent(server):
    server["delay"] = 0.2  # ~300 characters: about a minute to finish
    analyst = _analyst(server["url"], deadline_s=1.0, max_retries=3, structured_methods=["json_object_schema"])
    trajs, labels = scenario()
    start = time.monotonic()
    with pytest.raises(RoleError, match="deadline"):
        analyst.analyse(trajs, labels, seed_view(), 2)
    assert time.monotonic() - start < 5
    assert len(server["requests"]) == 1  # not re-sent, though 3 retries were allowed
    time.sleep(0.6)
    assert server["disconnected"], "the server never saw the request closed"
    assert server["requests"][0]["max_tokens"] == 1024 and server["requests"][0]["stream"] is True


def test_a_method_the_server_refuses_costs_no_retry_and_the_grammar_schema_is_sent(server):
    server["refuse"] = {"json_schema"}
    analyst = _analyst(server["url"], max_retries=0, max_tokens=300)
    trajs, labels = scenario()
    patterns = analyst.analyse(trajs, labels, seed_view(), 2)
    assert patterns[0].signal == "F3.repeated_action"
    first, second = server["requests"]
    assert first["response_format"]["type"] == "json_schema"
    fmt = second["response_format"]
    assert fmt["type"] == "json_object" and second["max_tokens"] == 300
    items = fmt["schema"]["properties"]["patterns"]["items"]["anyOf"]
    loop = next(i for i in items if i["properties"]["signal"]["enum"] == ["F3.repeated_action"])
    assert loop["properties"]["evidence"]["items"]["properties"]["trajectory_id"]["enum"] == ["t1", "t2", "t3"]


def test_prompts_are_trimmed_to_the_context_and_a_hopeless_one_is_a_clear_error():
    trajs, labels = scenario()
    full = LLMAnalyst(ScriptedChatModel()).prompt(trajs, labels, seed_view(), 2)
    cfg = RolesConfig(context_tokens=1700, max_tokens=256)
    small = LLMAnalyst(ScriptedChatModel(), cfg).prompt(trajs, labels, seed_view(), 2)
    assert estimate_tokens(small) <= 1700 - 256 - 300 < estimate_tokens(full)
    assert '"trajectory_id": "t1"' in small[1].content  # still evidence to cite
    tiny = RolesConfig(context_tokens=700, max_tokens=256)
    with pytest.raises(RoleError, match="context_tokens"):
        LLMAnalyst(ScriptedChatModel(), tiny).prompt(trajs, labels, seed_view(), 2)


def _pattern() -> Pattern:
    return Pattern(id="p-F3.repeated_action", signal="F3.repeated_action", failure_class="F3", count=3, share=0.6,
                   task_ids=["task-a", "task-b"], root_cause="no guard", surface="policies.yaml")


def test_engineer_can_switch_a_policy_and_add_a_lesson_without_rewriting_files():
    bad = json.dumps({"message": "Guard", "set_policies": {"loop_guard.on": True}})
    good = json.dumps({"message": "Enable the loop guard", "rationale": "stops identical repeats",
                       "set_policies": {"loop_guard.enabled": True},
                       "add_lesson": "Change the arguments or the tool when a call gave nothing new."})
    model = ScriptedChatModel(replies=[bad, good])
    edit = LLMEngineer(model).propose(_pattern(), Review(pattern_id="p", approved=True), seed_view())
    files = {c.path: c.content for c in edit.changes}
    assert "loop_guard:\n  enabled: true\n  max_repeats: 2" in files["policies.yaml"]
    assert files["lessons.md"] == "- Change the arguments or the tool when a call gave nothing new.\n"
    assert "unknown policy keys ['loop_guard.on']" in model.calls[1][-1].content


def test_a_reply_that_keeps_a_placeholder_is_retried():
    copied = json.dumps({"patterns": [{"signal": "F3.repeated_action", "root_cause": "<the defect>",
                                       "surface": "policies.yaml", "evidence": [{"trajectory_id": "t1", "step": 6}]}]})
    model = ScriptedChatModel(replies=[copied, R.ANALYST_OK])
    trajs, labels = scenario()
    assert LLMAnalyst(model).analyse(trajs, labels, seed_view(), 2)[0].root_cause.startswith("nothing")
    assert "placeholder" in model.calls[1][-1].content


def test_openai_chat_reads_a_plain_json_reply_too():
    out = json.dumps({"choices": [{"message": {"role": "assistant", "content": R.CRITIC_OK}}]}).encode()
    with fixed_reply("application/json", out) as url:
        chat = OpenAIChat("m", url, deadline_s=5)
        from evoharness.roles.llm import ReviewDraft

        assert ask(chat, [], ReviewDraft, role="critic", methods=["json_schema"]).approved


@pytest.mark.parametrize("ctype, body, why", [
    ("text/html", b"<html>502 proxy error</html>", "no chat completion (text/html): '<html>502 proxy error</html>'"),
    ("application/json", b'{"choices": []}', "no chat completion (application/json): '{\"choices\": []}'"),
    ("text/event-stream", b"data: {\"choices\": [{\"delta\n\n", "no chat completion (text/event-stream)"),
])
def test_a_reply_that_is_no_chat_completion_is_an_endpoint_failure_said_as_such(ctype, body, why):
    """An analyst on an endpoint that answered a proxy's HTML page failed with 'analyst: Expecting value: line
    1 column 1 (char 0) (after 3 attempts)': the body's parse error, taken for the model's bad JSON and sent back
    to it as feedback. Now the reason names the reply, and the model is not told its (absent) reply was wrong; it
    is the endpoint's failure (`EndpointDown`: the run pauses), not the role's."""
    with fixed_reply(ctype, body) as url:
        analyst = _analyst(url, structured_methods=["json_text"])
        trajs, labels = scenario()
        with pytest.raises(EndpointDown) as e:
            analyst.analyse(trajs, labels, seed_view(), 2)
    assert why in str(e.value) and "Expecting" not in str(e.value)
    assert "did not parse" not in str(e.value) and "JSON" not in str(e.value).split("no chat completion")[0]
