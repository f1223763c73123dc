"""The agent loop's conversion of its messages for the model: only what changed since the last call is converted."""

from __future__ import annotations

from evoharness.agent.loop import _Converted
from evoharness.agent.messages import AIMessage, HumanMessage, SystemMessage
from evoharness.agent.models import GatewayChatModel, from_messages, to_messages


def test_the_same_messages_keep_their_objects_and_a_changed_one_is_converted_again():
    conv = _Converted()
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    first = conv(msgs)
    msgs.append({"role": "assistant", "content": "a"})
    second = conv(msgs)
    assert second[0] is first[0] and second[1] is first[1] and isinstance(second[2], AIMessage)
    msgs[1]["content"] = "changed in place"  # the copy kept of it no longer matches
    third = conv(msgs)
    assert third[0] is first[0] and third[1] is not first[1] and third[1].content == "changed in place"
    hooked = [{"role": "system", "content": "s"}, {"role": "user", "content": "a hook's own list"}]
    fourth = conv(hooked)
    assert fourth[0] is first[0] and [m.content for m in fourth] == ["s", "a hook's own list"]
    assert [type(m) for m in conv(msgs[:1])] == [SystemMessage]  # shorter: the prefix only
    assert conv(msgs) == to_messages(msgs)  # what a full conversion gives


def test_the_gateway_client_sends_what_from_messages_gives_reusing_dicts_only_for_equal_messages():
    model = GatewayChatModel("/nonexistent.sock", "t", "m", 0)
    a, b = SystemMessage("s"), HumanMessage("u")
    assert model._dicts([a, b]) == from_messages([a, b])
    c = AIMessage("reply")
    again = model._dicts([a, b, c])
    assert again == from_messages([a, b, c])
    other = HumanMessage("another")
    assert model._dicts([a, other]) == from_messages([a, other])  # another object at [1]: converted afresh


def test_the_gateway_client_converts_again_a_message_edited_in_place_since_the_last_request():
    model = GatewayChatModel("/nonexistent.sock", "t", "m", 0)
    a = SystemMessage("s")
    b = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}])
    model._dicts([a, b])
    a.content = "edited in place"  # the same object, another text: its old dict must not be sent
    b.tool_calls[0]["args"]["x"] = 2  # a nested edit of the same object
    assert model._dicts([a, b]) == from_messages([a, b])


def test_the_openai_path_sends_the_packages_messages_as_langchain_does_and_returns_the_packages_reply():
    import json

    import httpx

    from evoharness.agent.messages import ToolMessage
    from evoharness.agent.models import openai_model

    sent = []
    reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                 "role": "assistant", "content": "",
                 "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "f", "arguments": '{"q": 2}'}},
                                {"id": "c3", "type": "function", "function": {"name": "g", "arguments": "{bad"}}]}}],
             "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}}

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    model = openai_model("openai:http://x/v1#m", 0, http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    msgs = to_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                        {"role": "assistant", "content": "", "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "r"}])
    assert isinstance(msgs[3], ToolMessage)
    ai = model.invoke(msgs, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    (body,) = sent
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert body["messages"][2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"q": 1}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert isinstance(ai, AIMessage)  # the package's, not langchain-core's
    assert [(c["name"], c["args"], c["id"]) for c in ai.tool_calls] == [("f", {"q": 2}, "c2")]
    assert [(c["name"], c["args"]) for c in ai.invalid_tool_calls] == [("g", "{bad")]
    assert ai.usage_metadata["input_tokens"] == 11 and ai.usage_metadata["output_tokens"] == 4


def test_the_gateway_clients_request_is_the_whole_bodys_json_after_edits_in_place_to_messages_and_tools():
    import json

    model = GatewayChatModel("/nonexistent.sock", "t", "m\u00e9", 7)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]

    def expected(msgs, tools, conversation=None):
        body = {"model": "m\u00e9", "messages": from_messages(msgs), "seed": 7, "temperature": 0.0, "stream": False}
        if tools:
            body["tools"] = tools
        body["evoharness_conversation"] = conversation or {"hold": True}
        return json.dumps(body).encode()

    a, b = SystemMessage("s \u2603"), HumanMessage('a "quoted" task')
    c = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}])
    assert model._body([a, b], tools) == expected([a, b], tools)
    assert model._body([a, b, c], tools) == expected([a, b, c], tools)
    b.content = "edited in place"
    c.tool_calls[0]["args"]["x"] = 2
    tools[0]["function"]["name"] = "g"  # the same list, edited: its old JSON must not be sent
    assert model._body([a, b, c], tools) == expected([a, b, c], tools)
    assert b"edited in place" in model._body([a, b, c], tools) and b'"name": "g"' in model._body([a, b, c], tools)
    assert model._body([a], None) == expected([a], None)
    assert model._body([], []) == expected([], [])
    # once the gateway holds a request's messages, the next body is the delta after them, byte for byte
    model._body([a, b], tools)
    model._acked = ("TAG", 2, model._sent_tools)  # as a 200 reply to that request sets it
    d = AIMessage("next")
    assert model._body([a, b, c, d], tools) == expected([c, d], None, {"extends": "TAG", "count": 2, "tools": "held"})
    model._acked = ("TAG2", 4, model._sent_tools)
    other = [{"type": "function", "function": {"name": "h", "parameters": {"type": "object"}}}]
    assert model._body([a, b, c, d, a], other) == expected([a], other, {"extends": "TAG2", "count": 4})
