"""The agent loop's conversion of its messages for the model: only what changed since the last call is converted."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from evoharness.agent.loop import _Converted
from evoharness.agent.models import GatewayChatModel, from_langchain, to_langchain


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
    assert conv(msgs) == to_langchain(msgs)  # what a full conversion gives


def test_the_gateway_client_sends_what_from_langchain_gives_reusing_dicts_only_for_equal_messages():
    model = GatewayChatModel("/nonexistent.sock", "t", "m", 0)
    a, b = SystemMessage("s"), HumanMessage("u")
    assert model._dicts([a, b]) == from_langchain([a, b])
    c = AIMessage("reply")
    again = model._dicts([a, b, c])
    assert again == from_langchain([a, b, c])
    other = HumanMessage("another")
    assert model._dicts([a, other]) == from_langchain([a, other])  # another object at [1]: converted afresh


def test_the_gateway_client_converts_again_a_message_edited_in_place_since_the_last_request():
    model = GatewayChatModel("/nonexistent.sock", "t", "m", 0)
    a = SystemMessage("s")
    b = AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}])
    model._dicts([a, b])
    a.content = "edited in place"  # the same object, another text: its old dict must not be sent
    b.tool_calls[0]["args"]["x"] = 2  # a nested edit of the same object
    assert model._dicts([a, b]) == from_langchain([a, b])
