"""`_yes_to_the_action` (policy.confirmation: a yes confirms a write only after one of the write's argument values was
named) reads the top level's values first and gathers the nested ones only when none was named, and matches loosely
(any case, numbers, dates as words) only when nothing was named as written; it answers as the rule written out (as
first landed in 2399c04, with the loose match) on random runs and calls."""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

from evoharness.diagnosis.invariants import _arg_values, _yes_to_the_action

WORDS = ["ABC123", "ab", "economy", "HAT069", "2024-05-20", "yes", "credit_card_7815826", "Business", "100", "x y z",
         "business", "abc123", "May 20", "the 20th of May", "May 20, 2023", "$12,345.00", "12345.0", "$100.00"]
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def _loosely(content: str, values: list[str]) -> bool:  # the loose match written out: any case, numbers, dates
    low = content.lower()
    if any(v.lower() in low for v in values):
        return True
    said = {float(n.replace(",", "")) for n in re.findall(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w,])", low)}
    for v in values:
        if re.fullmatch(r"-?\d+(?:\.\d+)?", v) and len(v.rstrip("0").rstrip(".") if "." in v else v) >= 3 \
                and float(v) in said:
            return True
        if d := re.match(r"(\d{4})-(\d\d)-(\d\d)", v):
            month, day = MONTHS[int(d[2]) - 1], int(d[3])
            for m in re.finditer(rf"\b{month}[a-z]*\.?\s+(\d+)(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?|"
                                 rf"\b(\d+)(?:st|nd|rd|th)?\s+(?:of\s+)?{month}[a-z]*\b\.?(?:,?\s+(\d{{4}})\b)?",
                                 low):
                if int(m[1] or m[3]) == day and (m[2] or m[4]) in (None, d[1]):
                    return True
    return False


def _written_out(view, w) -> bool:  # 2399c04's definition with the loose match: the reference
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
                and (any(v in content for v in values) or _loosely(content, values)):
            return True
    return False


def _value(rnd: random.Random, depth: int):
    kind = rnd.randint(0, 7 if depth < 9 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.choice([True, False])
    if kind == 2:
        return rnd.choice([7, 100, 2.5, 12345, 12345.0, 100.0])
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
