"""The twelfth pass's labelling cuts give the answers of what they replace (docs/benchmarks.md, "twelfth session").

- ``id_like_runs`` marks the pairs of classes an id needs by three byte replacements and reaches each marked run once;
- ``delivers`` asks for the collapsed final answer only where a string argument is as long as the answer's characters
  that are no blank, and ``answer_step`` only where the answer is not in a reply as written;
- the policy flags are kept per system prompt and set of tool names;
- the user's yes (``consent.affirmed``) is read once per message of a run;
- the repeat check counts the calls' shapes (``ToolCall.shape``: keys, strings and types) before making their
  canonical texts, a bound from above: no shape repeated often enough, no action is;
- the in-place edit gate looks for "edit" once and at the character after it, not for ten words "edit" + a blank,
  and a write's answer is kept on the call.

Each is compared with its definition as it was before, on random runs and on every run of the vendored fixtures (and
the full tau-bench airline set where the checkout has it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from evoharness.diagnosis import consent, detectors, invariants
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.consent import affirmative
from evoharness.diagnosis.context import ToolCall, TraceView
from evoharness.diagnosis.detectors import DIGIT_TOKEN, id_like_runs, id_like_tokens
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import iter_files, load_file
from evoharness.traces.models import Termination, ToolCallRecord, parse_arguments

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BLANKS = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\u00a0", "\u2003", "\u3000"]
WORDS = ["Booked", "HAT069", "for", "$120", "é", "done.", "OK", "ß", "2024-05-20", "x", "credit_card_7815826"]


def _views(shared: Path | None = None) -> list[TraceView]:
    """Every run of the vendored fixtures; with ``shared``, the tau-bench airline and mini-swe-agent sets too."""
    roots = [FIXTURES / "data", FIXTURES / "traces"]
    if shared is not None:
        roots += [shared / "tau_bench_airline_gpt4o", shared / "mini_swe_agent_sample"]
    views = []
    for f in iter_files(roots):
        try:
            views.extend(TraceView.of(t) for t in load_file(f))
        except Exception:  # noqa: BLE001 -- a fixture no importer reads (the hostile ones) has no runs to compare
            continue
    return views


def _text(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choice(WORDS) + rnd.choice(BLANKS) for _ in range(n)).strip(rnd.choice(["", " ", "\n"]))


# ---- the definitions as they were before this pass -------------------------------------------------------------


def _answer(view: TraceView) -> str | None:
    fa = view.traj.final_answer
    return (" ".join(fa.split()) or None) if fa else None


def _is_answer(text: str, answer: str) -> bool:
    return len(text) >= len(answer) and (text.strip() == answer or " ".join(text.split()) == answer)


def _delivers_before(view: TraceView, c) -> bool:
    answer = _answer(view)
    if not answer or not isinstance(c.args, dict):
        return False
    if not any(isinstance(v, str) and _is_answer(v, answer) for v in c.args.values()):
        return False
    last = next((x.step for x in reversed(view.calls) if isinstance(x.args, dict) and any(
        isinstance(v, str) and _is_answer(v, answer) for v in x.args.values())), -1)
    if c.step != last:
        return False
    given = next((i for i, role in enumerate(view.roles) if role in ("user", "tool")
                  and isinstance(view.traj.messages[i].get("content"), str)
                  and answer in " ".join(view.traj.messages[i]["content"].split())), len(view.traj.messages))
    said = [i for i in view.assistant_steps if view.texts[i] and _is_answer(view.texts[i], answer)]
    return given > c.step or not any(s != c.step for s in said)


def _answer_step_before(view: TraceView) -> int:
    answer = _answer(view)
    if answer:
        verbatim, first = view.traj.final_answer.strip(), answer.split(" ", 1)[0]
        for s in reversed(view.assistant_steps):
            c = view.traj.messages[s].get("content")
            if isinstance(c, str) and (verbatim in c or (first in c and answer in " ".join(c.split()))):
                return s
    return view.final_step


def _flags_before(view: TraceView) -> tuple[str, bool]:
    msgs = view.traj.messages
    system = "\n".join([msgs[i]["content"] for i, role in enumerate(view.roles)
                        if role == "system" and isinstance(msgs[i].get("content"), str)])
    if not system:
        return "", False
    names, descriptions = invariants._tool_docs(view)
    text = system
    for d in descriptions:
        text = text.replace(d, " ")
    identity, confirm = "", False
    for ln in text.splitlines():
        if invariants.TOOL_LINE.match(ln[:300]) or any(n in ln for n in names):
            continue
        ident, conf = invariants._identity_kind(ln), bool(invariants.CONFIRM_POLICY.search(ln))
        if ident or conf:
            identity, confirm = max(identity, ident, key=invariants.IDENTITY_KINDS.index), confirm or conf
    return identity, confirm


# ---- the comparisons -----------------------------------------------------------------------------------------


def test_id_like_runs_finds_the_ids_of_its_definition_in_every_real_message(full_shared_data):
    texts = [t for v in _views(full_shared_data) for t in v.texts]
    assert len(texts) > 5_000
    for text in texts:
        assert id_like_runs(text) == id_like_tokens(dict.fromkeys(DIGIT_TOKEN.pattern.findall(text))), text


def test_id_like_runs_on_long_random_texts_of_run_classes():
    # long runs of letters and digits (eight digits in a row, split by a letter), the marking byte's own letter
    rnd = random.Random(12)
    pieces = ["a", "X", "x", "0", "9", "00000000", "1234567", "-", "_", " ", "\n", "é", "\u0663", ".", "X9", "9X"]
    for _ in range(30_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        assert id_like_runs(text) == id_like_tokens(dict.fromkeys(DIGIT_TOKEN.pattern.findall(text))), text


def test_delivers_and_answer_step_answer_as_with_the_answer_collapsed_first():
    rnd = random.Random(5)
    fired = 0
    for _ in range(3_000):
        answer = _text(rnd, rnd.randint(0, 4)) if rnd.random() < 0.9 else rnd.choice(["", "  ", None])
        b = TraceBuilder("t").user(rnd.choice(["book it", answer or "hi"]))
        for _ in range(rnd.randint(1, 4)):
            # an argument that is the answer (as written, blanks changed, cut short, longer), or a short id
            arg = rnd.choice([answer or "", " ".join((answer or "").split()), (answer or "")[:-1],
                              (answer or "") + " more", "HAT069", _text(rnd, 2)])
            b.call(rnd.choice(["finish", "book_reservation"]), {"message": arg, "n": 3}, result="ok")
            if rnd.random() < 0.5:
                b.say(rnd.choice([answer or "", _text(rnd, 3), f"Done: {answer}"]))
        if answer is not None and rnd.random() < 0.5:
            b.deliver(answer)
        elif answer is not None:  # the last reply says the answer with other blanks (or not at all): the fallback
            b.say(rnd.choice(BLANKS).join(answer.split()) + rnd.choice(["", " Bye."]))
            b.final_answer, b.termination = answer, Termination.delivered
        view = TraceView.of(b.build(score=0.0))
        assert detectors.answer_step(view) == _answer_step_before(view)
        for c in view.calls:
            expected = _delivers_before(view, c)
            assert detectors.delivers(view, c) == expected, (answer, c)
            fired += expected
    assert fired > 200  # the random runs do deliver by a call, often


def test_delivers_and_answer_step_on_every_real_run(full_shared_data):
    views = _views(full_shared_data)
    assert len(views) > 250
    for view in views:
        assert detectors.answer_step(view) == _answer_step_before(view), view.traj.id
        for c in view.calls:
            assert detectors.delivers(view, c) == _delivers_before(view, c), (view.traj.id, c)


def test_the_answer_floor_never_exceeds_the_collapsed_answers_length():
    rnd = random.Random(9)
    for _ in range(20_000):
        fa = _text(rnd, rnd.randint(0, 6))
        view = TraceView.of(TraceBuilder("t").user("x").deliver(fa).build(score=0.0))
        floor = detectors._answer_floor(view)
        collapsed = " ".join(fa.split())
        assert floor <= len(collapsed), fa
        if fa.isascii():  # the bound is the count of characters no blank (the collapsed text less its spaces)
            assert floor == len(collapsed.replace(" ", "")), fa


def test_policy_flags_kept_per_name_set_answer_as_read_afresh(full_shared_data):
    views = _views(full_shared_data)
    policy = next(v for v in views if "confirm" in (v.texts[0] if v.texts else "")).texts[0]
    rnd = random.Random(3)
    names = ["book_reservation", "get_user_details", "cancel_reservation", "think", "transfer_to_human_agents",
             "update_reservation_flights", "search_direct_flight", "user", "confirm", "a"]
    for _ in range(300):  # random name sets under one prompt: the memo of each set answers as the lines read afresh
        b = TraceBuilder("t").system(policy).user("hi")
        for name in rnd.sample(names, rnd.randint(0, len(names))):
            b.call(name, {"x": 1}, result="ok")
        views.append(TraceView.of(b.build(score=0.0)))
    for view in views:
        assert invariants._policy_flags(view) == _flags_before(view), view.traj.id


def test_the_yes_kept_per_message_is_the_answer_read_afresh(full_shared_data):
    # every user message of a run asked in turn on one view (the answers kept) and each alone on a fresh view; where the
    # message holds an affirmative word the answer is at least ``affirmative``'s (a request to act may add a yes)
    yes = 0
    for view in _views(full_shared_data):
        kept = [consent.affirmed(view, i) for i in view.user_steps]
        kept_again = [consent.affirmed(view, i) for i in reversed(view.user_steps)][::-1]
        fresh = [consent.affirmed(TraceView.of(view.trajectory), i) for i in view.user_steps]
        assert kept == kept_again == fresh, view.traj.id
        for i, said in zip(view.user_steps, kept, strict=True):
            assert said or not affirmative(view.texts[i][:2000])
        yes += sum(kept)
    assert yes > 200


def test_equal_canonical_arguments_have_equal_shapes():
    # argument texts that canonicalise alike in many ways (key order, blanks, escapes, 1 / 1.0 / true, nesting), and
    # texts that do not parse: wherever two canonical texts are equal, so are the shapes (None: no shape made)
    rnd = random.Random(21)
    values = ['"a"', '"\\u0061"', "1", "1.0", "1e0", "true", "null", '"1"', "[1]", "[1.0]", '{"x": 1}', "-0.0", "0"]
    texts = []
    for _ in range(4_000):
        keys = rnd.sample(["k", "id", "n"], rnd.randint(0, 3))
        body = ", ".join(f'"{k}"{rnd.choice([":", " : "])}{rnd.choice(values)}' for k in keys)
        texts.append(rnd.choice(["{%s}", " {%s} ", "{%s", "[%s]", "\u00a0{%s}"]) % body)
    b = TraceBuilder("t").user("x")
    for text in texts:
        b.call("lookup", text, result="ok")
    calls = TraceView.of(b.build(score=0.0)).calls
    shapes: dict[str, object] = {}
    for c in calls:
        if c.shape() is not None:
            assert shapes.setdefault(c.canonical, c.shape()) == c.shape(), c.arguments
    assert 100 < len(shapes) < len(calls)


def test_the_repeat_check_bounded_by_shapes_fires_as_with_canonical_text_alone(full_shared_data, monkeypatch):
    rnd = random.Random(4)
    views = _views(full_shared_data)
    for _ in range(1_500):  # runs of look-ups repeated with the same, equal or other arguments, between writes
        b = TraceBuilder("t").user("find my booking")
        for _ in range(rnd.randint(2, 9)):
            args = rnd.choice(['{"id": "A1"}', '{"id":"A1"}', '{"id": "\\u0041\\u0031"}', '{"id": "B2"}', '{"n": 1}',
                               '{"n": 1.0}', '{"id": "A1", "n": true}', '["A1"]', '{"id": "A1"'])
            b.call(rnd.choice(["get_booking"] * 6 + ["book"]), args, result=rnd.choice(["same"] * 6 + ["other"]))
        views.append(TraceView.of(b.build(score=0.0)))
    cfg = DiagnosisConfig()
    found = [detectors.RepeatedActionDetector().detect(v, cfg) for v in views]
    monkeypatch.setattr(ToolCall, "shape", lambda self: None)  # no bound: the canonical texts alone decide
    again = [detectors.RepeatedActionDetector().detect(TraceView.of(v.trajectory), cfg) for v in views]
    assert [[(s.step, s.evidence) for s in x] for x in found] == [[(s.step, s.evidence) for s in x] for x in again]
    assert sum(map(bool, found)) > 60


def test_the_in_place_gate_with_one_search_for_edit_answers_as_its_sixteen_words():
    # raw argument texts of the words' pieces, blanks raw and escaped after "edit", non-ASCII letters and escapes
    pieces = ["sed", "se", "perl", "patch", "apply", "str_replace", "command", "edit", "edi", "t", "it", "credit_",
              "\u00ed", "\\u0065", "\\n", " ", "\t", "\n", "\x0b", "\x1c", "\x1f", "\u00a0", "1:2", "x", "edit edit"]
    rnd = random.Random(8)
    lacked = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        raw = rnd.choice([json.dumps({"a": text}), json.dumps({"a": text}, ensure_ascii=False), text])
        c = ToolCall(ToolCallRecord(0, 0, "c", "t", raw, *parse_arguments(raw)))
        expected = c.canonical_lacks(detectors.IN_PLACE_WORDS)
        assert detectors._lacks_in_place_words(c) == expected, raw
        lacked += expected
    assert 2_000 < lacked < 18_000


def test_the_repeat_checks_state_changes_by_the_calls_kept_answers_are_the_definitions(full_shared_data):
    # ``_call_changes`` (each call's ``changes_state``, kept on the call for the write list) gives every action the
    # answer ``is_state_changing`` gives it afresh, on every fixture, tau-bench and mini-swe-agent run and random ones
    rnd = random.Random(6)
    views = _views(full_shared_data)
    for _ in range(500):
        b = TraceBuilder("t").user("fix it")
        for _ in range(rnd.randint(1, 12)):
            cmd = rnd.choice(["ls -la", "cat x.py", "git diff", "sed -i 's/a/b/' x.py", "echo 1 > y", "view"])
            b.call(rnd.choice(["bash", "str_replace_editor", "get_user", "book_flight"]), {"command": cmd},
                   result="out")
        views.append(TraceView.of(b.build(score=0.0)))
    changing = 0
    for view in views:
        found = detectors._call_changes(view.calls)
        for c in view.calls:
            expected = detectors.is_state_changing(c.name, c.canonical)
            assert found[c.name, c.canonical] == expected == c.writes, (view.traj.id, c)
            changing += expected
    assert changing > 1_000
