"""``messages.plain_copy``: the copies the loop and the gateway client keep to compare a conversation with later."""

from __future__ import annotations

import copy
from collections import OrderedDict

from evoharness.agent.messages import AIMessage, HumanMessage, Message, ToolMessage, plain_copy


def _conversation() -> list:
    return [{"role": "user", "content": "hi", "meta": {"n": [1, 2.5, None, True]}},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
            HumanMessage(content="again"), ToolMessage(content="ok", tool_call_id="c1"),
            AIMessage(content="", tool_calls=[{"name": "f", "args": {"a": [1, {"b": 2}]}, "id": "c2",
                                               "type": "tool_call"}], usage_metadata={"input_tokens": 3})]


def _containers(x: object) -> list:
    """Every dict, list and message inside ``x`` (``x`` included)."""
    out, todo = [], [x]
    while todo:
        v = todo.pop()
        if isinstance(v, dict | list | Message):
            out.append(v)
            todo.extend(v.values() if isinstance(v, dict) else v if isinstance(v, list) else vars(v).values())
    return out


def test_a_plain_copy_equals_the_original_and_shares_no_container_with_it():
    conv = _conversation()
    got = plain_copy(conv)
    assert got == conv == copy.deepcopy(conv)
    assert [type(m) for m in got] == [type(m) for m in conv]
    assert not {id(c) for c in _containers(got)} & {id(c) for c in _containers(conv)}


def test_an_edit_in_place_after_the_copy_is_seen_by_a_comparison():
    conv = _conversation()
    got = plain_copy(conv)
    conv[4].tool_calls[0]["args"]["a"][1]["b"] = 3
    conv[0]["meta"]["n"].append(4)
    assert got[4] != conv[4] and got[0] != conv[0]
    assert got[1:4] == conv[1:4]


def test_other_types_and_a_value_that_contains_itself_are_copied_as_deepcopy_does():
    class Box:
        def __init__(self, v: object) -> None:
            self.v = v

    odd = OrderedDict(a=[1]), (1, [2]), Box([3])
    got = plain_copy(list(odd))
    assert type(got[0]) is OrderedDict and got[0] == odd[0] and got[0]["a"] is not odd[0]["a"]
    assert got[1] == odd[1] and got[1][1] is not odd[1][1]
    assert isinstance(got[2], Box) and got[2].v == [3] and got[2].v is not odd[2].v
    loop: list = [1]
    loop.append(loop)
    again = plain_copy(loop)
    assert again[1] is again and again is not loop
