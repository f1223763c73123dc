"""The labeller's short cuts give the answers of the definitions they replace (speed work keeps every label).

Each test builds random cases and compares a short cut with the plain definition written out here: the
user-id search of the identity rule (values tried as found, a call's canonical text made only where it may
hold the key), the policy detector's first violation (policy rules only, not the whole violation log), the
per-name answer of ``changes_state``, the written-out ``_says_missing``, the refusal regex behind its word gate
and the multi-agent numbers less their commas (``_plain_numbers``).
"""

from __future__ import annotations

import json
import random
import re

from evoharness.diagnosis import consent, detectors, environment, invariants, multiagent, webtext
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import ToolCall, TraceView
from evoharness.diagnosis.detectors import PolicyViolationDetector, changes_state, reads_by_name
from evoharness.diagnosis.invariants import USER_ID_VALUE, violation_log
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.models import ToolCallRecord, Trajectory, parse_arguments
from evoharness.traces.patterns import gate_text

POLICY = ("You must authenticate the user identity by locating their user id. Before any action that updates the "
          "database you must obtain explicit user confirmation (yes).")
NAMES = ["get_user_details", "find_user_id_by_email", "cancel_reservation", "book_reservation", "update_address",
         "transfer_to_human_agents", "lookup", "think", "search_flights", "send_certificate"]
IDS = ["mia_li_3668", "bob_1", "x", "ab\u00e9_9", "sara_doe_496"]


def _string(rnd: random.Random) -> str:
    parts = ["user_id", '"user_id"', "user\u005fid", "HAT069", "yes", "\u00e9", '"', "\\", " ", "id", rnd.choice(IDS)]
    return "".join(rnd.choice(parts) for _ in range(rnd.randint(0, 4)))


def _arguments(rnd: random.Random) -> dict | str:
    args = {rnd.choice(["user_id", "reservation_id", "note", _string(rnd)]): rnd.choice(
        [_string(rnd), rnd.choice(IDS), 3, None, [_string(rnd)], {"user_id": rnd.choice(IDS)}])
        for _ in range(rnd.randint(0, 3))}
    form = rnd.random()
    if form < 0.3:
        return json.dumps(args)  # escapes what is not ASCII (\u00e9): a \u escape may spell anything
    if form < 0.5:
        return json.dumps(args, ensure_ascii=False).replace("user_id", "user\\u005fid")
    if form < 0.6:
        return "{not json user_id"
    return json.dumps(args, ensure_ascii=False)


def _trace(rnd: random.Random):
    b = TraceBuilder("t").system(POLICY)
    for _ in range(rnd.randint(1, 8)):
        kind = rnd.random()
        if kind < 0.3:
            b.user(rnd.choice(["yes", "my id is " + rnd.choice(IDS), "hello", "please " + _string(rnd)]))
        elif kind < 0.8:
            who = rnd.choice(IDS)
            result = rnd.choice([f'{{"user_id": "{who}", "status": "active"}}', "Error: no", "ok",
                                 f'{{"user_id" : "{who}"}}'])
            b.call(rnd.choice(NAMES), _arguments(rnd), result=result)
        else:
            b.say(rnd.choice(["Done.", "Shall I proceed?", "Your id is " + rnd.choice(IDS)]))
    return b.deliver("Done.").build(score=0.0)


def _gave_their_id_by_definition(view: TraceView, before: int) -> bool:
    ids = set()
    for _, content in view.results.values():
        ids.update(USER_ID_VALUE.findall(content[:50_000]))
    for c in view.calls:
        ids.update(USER_ID_VALUE.findall(c.canonical[:5_000]))
    said = [m.get("content") for m in view.traj.messages[:before] if m.get("role") == "user"]
    return any(isinstance(t, str) and i in t for t in said for i in ids)


def test_canonical_may_hold_is_never_false_where_the_canonical_text_holds_the_word():
    rnd = random.Random(1)
    held = 0
    for _ in range(3000):
        view = TraceView(_trace(rnd))
        for c in view.calls:
            for word in ("user_id", "HAT069", "id"):
                if word in c.canonical:
                    held += 1
                    assert c.canonical_may_hold(word), (word, c.arguments)
    assert held > 500


def test_canonical_lacks_is_never_true_where_the_canonical_text_holds_a_word():
    """The in-place edit gate (``IN_PLACE_WORDS``): raw argument texts built of the words' pieces, non-ASCII letters
    whose escapes end in hex digits ("í" is \\u00ed: "íit" is "\\u00edit" in canonical JSON), escapes and numbers,
    and the blanks (raw, escaped, a text that does not parse for them) after "edit" that the windowed edit needs."""
    pieces = ["sed", "se", "d", "perl", "patch", "apply", "pply", "str_replace", "command", "ommand", "edit", "it",
              "\u00ed", "\u00ea", "\u00ec", "\\u0065", "\\n", "\\\\", " ", "-i", "x", "1e400", "\\u00e9",
              # the windowed edit's "edit" + a blank: a payment id's "credit_" holds none; a raw blank or its escape
              "credit_card_7815826", "1:2", "\t", "\n", "\x0b", "\x1f", "\\t", "\\u0020", "\u00a0",
              "edit 1:2", "edit\t1:2", "edit\\t1:2", "edit\u00a01:2"]
    rnd = random.Random(5)
    held = lacked = windowed = credit = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5)))
        raw = rnd.choice([json.dumps({"command": text}, ensure_ascii=False), json.dumps({"a": text}),
                          json.dumps([text]), '{"v": 1e400, "w": "' + text + '"}', text])
        c = ToolCall(ToolCallRecord(0, 0, "c", "t", raw, *parse_arguments(raw)))
        holds = [w for w in detectors.IN_PLACE_WORDS if w in c.canonical]
        if holds:
            held += 1
            assert not c.canonical_lacks(detectors.IN_PLACE_WORDS), (raw, c.canonical)
        lacked += c.canonical_lacks(detectors.IN_PLACE_WORDS)
        credit += "credit" in raw and c.canonical_lacks(detectors.IN_PLACE_WORDS)
        found = detectors.IN_PLACE_EDIT.search(c.canonical)
        if found:
            # every match in ASCII text holds a word (the gate reads ASCII text only: "edit" + a no-break space is a
            # windowed edit too)
            assert holds or not c.canonical.isascii(), c.canonical
            windowed += "edit" in found.group() and not any(w in found.group() for w in ("str_replace", "command"))
        # the gated answer is the regex's
        assert detectors._edits_in_place(c) is bool(found or (c.parsed_ok and isinstance(c.args, dict) and (
            "old_str" in c.args or "old_string" in c.args)))
    assert held > 5_000 and lacked > 1_000 and windowed > 100 and credit > 100


def test_the_user_id_search_answers_as_its_definition():
    rnd = random.Random(2)
    answers = {True: 0, False: 0}
    for _ in range(3000):
        view = TraceView(_trace(rnd))
        for before in range(len(view.traj.messages) + 1):
            want = _gave_their_id_by_definition(view, before)
            assert invariants._user_gave_their_id(view, before) is want
            answers[want] += 1
    assert answers[True] > 100 and answers[False] > 100


def test_the_policy_detector_reports_the_first_policy_violation_of_the_log():
    rnd = random.Random(3)
    fired = 0
    for _ in range(2000):
        t = _trace(rnd)
        first = next((v for v in violation_log(TraceView(t)) if v.rule.startswith("policy.")), None)
        got = PolicyViolationDetector().detect(TraceView(t), DiagnosisConfig())
        assert [(s.step, s.evidence) for s in got] == \
            ([] if first is None else [(first.step, f"{first.rule}: {first.evidence}")])
        fired += bool(got)
    assert fired > 200


def test_changes_state_answers_as_the_name_regex_also_when_its_memory_is_full(monkeypatch):
    monkeypatch.setattr(detectors, "_WRITE_NAMES", {})
    monkeypatch.setattr(detectors, "_WRITE_NAMES_MAX", 8)
    rnd = random.Random(4)
    for _ in range(500):
        name = rnd.choice(NAMES + ["Get" + str(rnd.randint(0, 30)), "x" + str(rnd.randint(0, 30)), "READ_it"])
        t = TraceBuilder("t").call(name, {"a": 1}, result="ok").deliver("ok").build(score=0.0)
        call = TraceView(t).calls[0]
        assert changes_state(call) is not reads_by_name(name), name
        assert len(detectors._WRITE_NAMES) <= 8


def test_says_missing_is_any_of_the_missing_phrases():
    rnd = random.Random(5)
    pieces = [*environment.MISSING, "not", "found", "does", "exist", "no", "such", "unknow", " ", "x"]
    for _ in range(5000):
        low = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5)))
        assert environment._says_missing(low) is any(p in low for p in environment.MISSING), low


def _affirmative_plain(text: str) -> bool:
    cut = consent.NOT_AN_ANSWER.sub(" ", text)
    if consent.DECLINE.search(text):
        return consent.EXPLICIT_YES.search(cut) is not None
    return consent.AFFIRMATIVE.search(cut) is not None


def test_affirmative_short_cuts_answer_as_the_cut_does():
    words = ["yes", "Yeah", "yep", "please do", "please", "do", "not", "don't", "don’t", "n't", "never", "make",
             "made", "be", "sure", "really", "quite", "correct", "ok", "okay", "go ahead", "go", "ahead", "proceed",
             "confirm", "confirmed", "do it", "yet", "it", "cancel", "yesterday", "okapi", "no", "No", "nope",
             "thanks", "thank you", "problem", "need", "that's", "Y\u0130", "\u017fure", "o\u212aay", "YE\u017f", "é",
             "ÿes", "\u2160", "\u00b5",
             # the cut runs on the lower-cased text where it is a gate text: upper-case negations, folding letters
             "NOT", "Don'T", "DON’T", "Make", "NEVER", "Sure", "SURE", "Correct", "OK", "Go Ahead", "PROCEED", "Do It",
             "N'T", "Be", "\u0130t", "\u0131t", "\u212ao",
             # the other words of assent, their negations and the declines' words (the cut and decline gates)
             "yup", "absolutely", "Definitely", "certainly", "of course", "agree", "agreed", "disagree", "APPROVED",
             "approve", "alright", "all right", "sounds good", "sound", "good", "that works", "works for me",
             "go for it", "let's do", "let’s", "this", "by all means", "that's right", "right", "can't", "won't",
             "doesn't", "didn't", "do't", "does", "nah", "pass", "I'll pass", "not necessary", "Nope"]
    seps = [" ", "", ",", ".", "  ", "\n", "'", "é", "\t", "\u00a0"]
    rnd = random.Random(17)
    answers = set()
    for _ in range(40_000):
        text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 7)))
        # (the cut and its short cuts: ``affirmative`` less the hold after the yes, ``consent._held_back``, which
        # reads the text after the cut's answer and cuts nothing)
        got = consent._assents(text, consent.gate_text(text))
        assert got == _affirmative_plain(text), text
        low = text.lower()
        assert consent.affirmative(text) == (got and not consent._held_back(low, consent._OPENING.match(low), text))
        answers.add(got)
    assert answers == {True, False}
    assert not consent.affirmative("please do not proceed") and consent.affirmative("not sure, but yes")
    # an answer word whose stop the cut brings next to it ("absolutely not" cut out) says no yes, either way
    for text in ("definitely absolutely not.", "definitely absolutely not", "of course certainly not!",
                 "absolutely never agree.", "Certainly don't agree."):
        assert consent.affirmative(text) is _affirmative_plain(text) is False, text


def test_refusal_gate_answers_as_the_regex():
    # pieces of every REFUSAL alternative, near misses of its words, and separators that make or break a \b
    words = ["i", "we", "i'm", "i’m", "we're", "am", "are", "unable", "not able", "not", "able", "cannot", "can't",
             "can’t", "can not", "can", "can be", "cannot be", "modified", "cancelled", "canceled", "refunded",
             "booked", "done", "unab", "nable", "cann", "xunable", "wei", "help", "'t"]
    seps = [" ", "", "  ", "\n", ".", "_", "’"]
    rnd = random.Random(23)
    answers = set()
    for _ in range(30_000):
        low = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 6)))
        got = detectors._refuses(low)
        assert got == (detectors.REFUSAL.search(low) is not None), low
        answers.add(got)
    assert answers == {True, False}


def _closing_plain(message: dict, text: str) -> bool:
    return len(text) < 300 and not message.get("tool_calls") and \
        text.lstrip()[:16].lower().startswith(detectors.CLOSING_OPENINGS) and detectors._DIGITS.isdisjoint(text) and \
        not detectors.outcome().search(detectors._NOT_YET.sub(" ", text).lower())


def test_closing_gates_answer_as_the_regexes():
    # closing openings, then subjects, every outcome word and near misses of them, the not-yet clauses' words, and
    # characters a case-blind regex folds onto ASCII letters ("ſ" is "s", "K" is "k", "İ" is "i")
    openings = ["Thank you", "thanks", "You're welcome", "you are welcome", "No problem", "Glad", "Goodbye", "hi"]
    subjects = ["i", "we", "I", "We", "I've", "we have", "it is", "it's", "they're", "was", "has been", "are now",
                "is all", "already", "successfully", "the", "you"]
    outcomes = ["done", "complete", "completed", "confirmed", "finalised", "finalized", "processed", "canceled",
                "cancelled", "booked", "rebooked", "reserved", "updated", "changed", "modified", "upgraded",
                "downgraded", "refunded", "issued", "credited", "charged", "paid", "sent", "added", "removed",
                "applied", "approved", "declined", "denied", "transferred", "submitted", "scheduled", "resolved",
                "fixed", "located", "found", "verified", "all set", "made", "taken", "put", "got", "unfortunately",
                "unable", "not able", "cannot", "can't", "could not", "couldn't", "transferred you",
                "transferring you", "DONE", "fini", "transfer", "set", "can", "could", "not", "able", "b", "1"]
    not_yet = ["once", "When", "if", "iF", "after", "until", "as soon as", "hope", "wish", "wiſh", "onKe", "İf",
               "whenever", "ΣΣ", "aΣ"]
    seps = [" ", " ", " ", "", "\n", ".", ",", "!", "’", "'"]
    rnd = random.Random(29)
    answers = set()
    for _ in range(30_000):
        text = rnd.choice(openings) + rnd.choice(seps)
        for _ in range(rnd.randint(0, 6)):
            kind = rnd.random()
            pool = not_yet if kind < 0.2 else subjects if kind < 0.6 else outcomes
            text += rnd.choice(pool) + rnd.choice(seps)
        msg = {"role": "assistant", "content": text}
        got = detectors._closing(msg, text)
        assert got == _closing_plain(msg, text), text
        answers.add(got)
    assert answers == {True, False}
    assert not detectors._closing({}, "Thank you! Your booking is all set.")
    assert detectors._closing({}, "Thank you! I hope it is resolved soon. Have a nice day.")


def test_user_quit_gates_answer_as_the_regexes():
    # every ASKS and CLOSING alternative's words, near misses, case and \b breakers, folding characters
    words = ["?", "please", "please ", "Please provide", "please confirm", "please share", "please specify",
             "please let me know", "let me know", "Let Me Know", "letme know", "xlet me know", "let me knowing",
             "anything else", "Anything Else", "further assistance", "further questions", "further help", "further",
             "feel free", "have a great", "have a good", "Have A Wonderful", "have a nice", "have a", "safe travels",
             "take care", "reach out", "i'll be here", "I will be here", "whenever you", "whenever", "pleaſe",
             "anything elſe", "taKe care", "the", "flight", "\u00e9"]
    seps = [" ", "", "  ", "\n", ".", ",", "_", "!"]
    rnd = random.Random(31)
    asks, offers = set(), set()
    for _ in range(30_000):
        text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 6)))
        got = environment._asks(text)
        assert got == (environment.ASKS.search(text) is not None), text
        asks.add(got)
        got = environment._closing_offer(text)
        assert got == (environment.CLOSING.search(text) is not None), text
        offers.add(got)
    assert asks == offers == {True, False}


def test_multi_agent_word_gates_answer_as_the_regexes():
    # every FABRICATION alternative and the refusal patterns' (webtext), near misses, case, \b breakers and folding
    # characters
    words = ["simulate", "Simulated", "simulating", "simulation", "simulat", "hypothetical", "hypothetically",
             "placeholder", "mock data", "mocked data", "Mock Data", "mock", "dummy", "fictional", "made-up", "made up",
             "made", "for demonstration", "for illustration", "demonstration", "let's assume", "let’s assume",
             "assuming", "sample data", "example data", "captcha", "reCAPTCHA", "protected by", "access", "denied",
             "verify you are human", "confirm that you’re a human", "unusual traffic from your", "are you a robot",
             "i'm not a bot", "checking your browser", "review the security of your connection", "complete the",
             "captcha", "security check", "you have been blocked", "your ip address has been", "rate-limited",
             "you don’t have permission to access", "access to this page has been denied", "http error 403",
             "status code", "429", "403 client error", "Error: 429", "enable javascript and cookies to continue",
             "I was", "blocked", "blocked by the firewall", "blocked us", "not allowed to access", "both", "human",
             "your", "been", "this challenge", "http", "error", "status", "403", "forbidden", "ſimulate",
             "dummKy", "the", "data", "x"]
    seps = [" ", "", "  ", "\n", ".", "-", "_", "é", ": "]
    rnd = random.Random(37)
    seen = set()
    searches = [(multiagent.FABRICATION, lambda t: multiagent.gated_search(
        multiagent.FABRICATION, multiagent.FABRICATION_WORDS, t))]
    searches += [(p, lambda t, p=p: webtext._gated(p, t, gate_text(t))) for p in webtext.GATE]
    for _ in range(30_000):
        text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 6)))
        for pattern, gated in searches:
            got, want = gated(text), pattern.search(text)
            assert (got and (got.span(), got.group(0))) == (want and (want.span(), want.group(0))), text
            seen.add(got is None)
    assert seen == {True, False}


def test_the_number_pattern_finds_what_its_lookbehind_first_form_finds():
    # the definition: a lookbehind before the first digit (the engine then tries every character)
    plain = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
    pieces = ["1", "23", "4,5", "1.5", ".", ",", "a", "_", "x9", "é", "\u0663", "\uff13", " ", "-", "$", "\n", "2024",
              "1,000.25", "v1.2.3"]
    rnd = random.Random(41)
    found = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8)))
        want = [m.span() for m in plain.finditer(text)]
        assert [m.span() for m in multiagent.NUMBER.finditer(text)] == want, text
        found += bool(want)
    assert found > 5_000


def test_plain_numbers_are_the_numbers_less_their_commas():
    pieces = ["1", "23", "4,5", "1.5", ".", ",", ",,", "a", " ", "\u0663", "\n", "1,000.25", "9,"]
    rnd = random.Random(43)
    commas = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 10)))
        want = [n.replace(",", "") for n in multiagent.NUMBER.findall(text)]
        assert multiagent._plain_numbers(text) == want, text
        commas += any("," in n for n in multiagent.NUMBER.findall(text))
    assert commas > 3_000


def test_the_final_answer_gate_answers_as_the_regex():
    # answer_key reads a message's FINAL ANSWER only where gate_text lets the regex run; the plain definition runs it
    # on every message. Folding characters (U+0130 / U+0131 for "i", U+017F for "s") must still be read
    pieces = ["FINAL ANSWER: ", "final answer:", "Final Answer:\t", "F\u0130NAL ANSWER: ", "FINAL AN\u017fWER: ",
              "f\u0131nal answer: ", "FINAL ANSWER ", "42 apples", "unknown", "é", "\n", "ok", "the answer is 7"]
    rnd = random.Random(43)
    keyed = 0
    for _ in range(5_000):
        msgs = [{"role": "user", "content": "count the apples"}]
        msgs += [{"role": "assistant", "name": rnd.choice(["Solver_Expert", "Checker_Expert"]),
                  "content": "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 4)))}
                 for _ in range(rnd.randint(1, 4))]
        log = multiagent.AgentLog(TraceView(Trajectory(id="t", task_id="t", task="count the apples", messages=msgs)))
        want = None
        for i in range(len(msgs) - 1, -1, -1):
            found = multiagent.FINAL_ANSWER.findall(log.text(i))
            if found:
                key = " ".join(multiagent.HARNESS_NOISE.sub("", found[-1]).split()).strip(" .*\"'`")
                want = (key.lower(), i) if 4 <= len(key) <= 80 and not multiagent.NON_ANSWER.search(key) else None
                break
        assert log.answer_key == want, msgs
        keyed += want is not None
    assert keyed > 1_000


def test_the_answer_origin_gate_answers_as_the_regex():
    keys = ["42 apples", "paris", "kiss", "é-9", "x"]
    pieces = [*keys, "42 Apples", "PARIS", "Par\u0131s", "\u212aiss", "ki\u017f\u017f", "É-9", "a", " ", "_", "é", "\n"]
    rnd = random.Random(47)
    hits = 0
    for _ in range(20_000):
        key = rnd.choice(keys)
        pattern = re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)", re.IGNORECASE)
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5)))
        want = pattern.search(text) is not None
        assert multiagent._holds(pattern, key, text) is want, (key, text)
        hits += want
    assert hits > 500


def test_delivers_and_the_workspace_edit_answer_as_their_definitions():
    """``delivers`` reads the final answer once per view and ``_workspace_edit`` tests the path argument before the
    editor-name regex: the answers of the written-out definitions, call by call, on random runs."""
    answers = ["", "   ", None, "Fixed the bug in utils.py by guarding the empty list.", " Done. " * 20, "é" * 60]
    names = ["finish", "str_replace_editor", "Edit", "edit_reservation", "bash", "book_reservation", "credit_edit"]
    keys = ["message", "path", "file_path", "filename", "command", "payment_id"]
    rnd = random.Random(48)
    both = {"delivers": 0, "workspace": 0}
    for _ in range(3000):
        answer = rnd.choice(answers)
        b = TraceBuilder("t").user("fix it")
        for _ in range(rnd.randint(1, 5)):
            value = rnd.choice([answer or "x", (answer or "")[:70] + " and more", "credit_card_1", 3])
            b.call(rnd.choice(names), {rnd.choice(keys): value for _ in range(rnd.randint(0, 2))},
                   result=rnd.choice(["ok", f"found: {answer}"]))
        if answer is not None and rnd.random() < 0.5:  # answered through a call only: no reply says it
            b.final_answer, b.termination = answer, "delivered"
        elif answer is not None:
            b.deliver(answer)
        t = b.build(score=0.0)
        view = TraceView(t)
        for c in view.calls:
            fa = t.final_answer
            said = " ".join(fa.split()) if fa else ""
            given = [" ".join(m["content"].split()) for m in t.messages[:c.step]
                     if m["role"] in ("user", "tool") and isinstance(m.get("content"), str)]
            replies = [i for i, m in enumerate(t.messages) if m["role"] == "assistant" and i != c.step
                       and isinstance(m.get("content"), str) and " ".join(m["content"].split()) == said]
            holding = [d.step for d in view.calls if isinstance(d.args, dict) and any(
                isinstance(v, str) and " ".join(v.split()) == said for v in d.args.values())]
            want = bool(said) and c.step in holding and c.step == holding[-1] and not (
                any(said in g for g in given) and replies)
            assert detectors.delivers(view, c) is want
            args = c.args if isinstance(c.args, dict) else {}
            ends_run = t.termination == "delivered" and all(
                m["role"] == "tool" for m in t.messages[c.step + 1:]) and any(
                detectors.is_shell(d.name) or detectors.EDITOR_TOOL.search(d.name)
                for d in view.calls if d.step < c.step)
            workspace = detectors.is_shell(c.name) or (detectors.EDITOR_TOOL.search(c.name) is not None and any(
                k in args for k in ("path", "file_path", "filename"))) or want or bool(ends_run)
            assert invariants._workspace_edit(view, c) is workspace, (c.name, c.args)
            both["delivers"] += want
            both["workspace"] += workspace and not want
    assert both["delivers"] > 300 and both["workspace"] > 300
