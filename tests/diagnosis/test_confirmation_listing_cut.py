"""`_yes_to_the_action` (policy.confirmation: a yes confirms a write only after one of the write's argument values was
named) reads the top level's values first and gathers the nested ones only when none was named; it answers as the
rule written out as it was first landed (2399c04) on random runs and calls."""

from __future__ import annotations

import random
from types import SimpleNamespace

from evoharness.diagnosis.invariants import _arg_values, _yes_to_the_action

WORDS = ["ABC123", "ab", "economy", "HAT069", "2024-05-20", "yes", "credit_card_7815826", "Business", "100", "x y z"]


def _written_out(view, w) -> bool:  # 2399c04's definition, kept here as the reference
    def values_of(args, depth=0):
        if depth > 6:
            return []
        if isinstance(args, dict):
            return [x for v in args.values() for x in values_of(v, depth + 1)]
        if isinstance(args, list):
            return [x for v in args for x in values_of(v, depth + 1)]
        return [] if args is None or isinstance(args, bool) else [args]

    values = [str(v) for v in values_of(w.args) if len(str(v)) >= 3]
    if not values:
        return True
    msgs, users = view.traj.messages, [i for i in view.user_steps if i < w.step]
    if not users:
        return True
    for i in range(users[0] + 1, w.step):
        m = msgs[i]
        content = m.get("content")
        if m.get("role") in ("assistant", "user") and not m.get("tool_calls") and isinstance(content, str) \
                and any(v in content for v in values):
            return True
    return False


def _value(rnd: random.Random, depth: int):
    kind = rnd.randint(0, 7 if depth < 9 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.choice([True, False])
    if kind == 2:
        return rnd.choice([7, 100, 2.5, 12345])
    if kind in (3, 4):
        return rnd.choice(WORDS)
    if kind == 5:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {f"k{j}": _value(rnd, depth + 1) for j in range(rnd.randint(0, 3))}


def test_the_cut_answers_as_the_rule_written_out():
    rnd = random.Random(23)
    answers = set()
    for _ in range(3000):
        messages, users = [], []
        for i in range(rnd.randint(1, 9)):
            role = rnd.choice(["user", "assistant", "tool", "system"])
            content = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 3))) if rnd.random() < 0.9 else None
            m = {"role": role, "content": content}
            if role == "assistant" and rnd.random() < 0.3:
                m["tool_calls"] = [{"id": "c"}]
            messages.append(m)
            users += [i] if role == "user" else []
        args = _value(rnd, 0) if rnd.random() < 0.2 else {f"a{j}": _value(rnd, 1) for j in range(rnd.randint(0, 4))}
        view = SimpleNamespace(user_steps=users, traj=SimpleNamespace(messages=messages))
        w = SimpleNamespace(step=rnd.randint(0, len(messages)), args=args)
        expected = _written_out(view, w)
        assert _yes_to_the_action(view, w) == expected, (messages, args, w.step)
        answers.add(expected)
    assert answers == {True, False}  # both sides drawn


def test_nested_values_are_read_to_the_same_depth():
    deep = {"a": {"b": {"c": {"d": {"e": {"f": "ABC123"}}}}}}  # at depth 6: read
    deeper = {"a": {"b": {"c": {"d": {"e": {"f": {"g": "ABC123"}}}}}}}  # at depth 7: not
    assert _arg_values(deep) == ["ABC123"] and _arg_values(deeper) == []
    assert sorted(_arg_values({"x": [1000, None, True, "ab", {"y": "economy"}]})) == ["1000", "economy"]
