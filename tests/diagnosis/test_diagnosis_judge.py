"""The LLM judge with a scripted model: its verdict, chunking to fit the context, falling back to the rules."""

from __future__ import annotations

import json

from evoharness.diagnosis.judge import LLMJudge, chunks, excerpt
from evoharness.traces.models import Trajectory
from tests.http_fakes import fixed_reply, replying, replying_to


def _log(n: int = 6, size: int = 50) -> Trajectory:
    msgs = [{"role": "user", "content": "How many stops are there?"}]
    for i in range(n):
        name = "WebSurfer" if i % 2 else "Orchestrator"
        msgs.append({"role": "assistant", "name": name, "content": f"turn {i} " + "x" * size})
    return Trajectory(id="j", task_id="j", task="How many stops are there?", messages=msgs, final_answer="12",
                      meta={"failure_only": True})


class Scripted:
    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def __call__(self, messages):
        self.prompts.append(messages[-1]["content"])
        return self.replies.pop(0)


def _verdict(**kw) -> str:
    return json.dumps({"failed_here": True, "failure_class": "F4", "step": 3, "agent": "", "quote": "turn 2",
                       "reason": "the surfer opened the wrong page", **kw})


def test_verdict_names_step_agent_class_and_quote_with_the_rules_evidence_in_the_prompt():
    model = Scripted("Sure! " + _verdict(step=4, failure_class="F1"))
    lab = LLMJudge(model).label(_log())
    assert lab.labeller == "llm" and lab.failure_class == "F1" and lab.lever == "weights"
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F1.llm_judge", 4, "WebSurfer")
    assert lab.quote.startswith("turn 3") and "wrong page" in lab.first_signal.evidence
    assert "F4.first_commitment at step 1" in model.prompts[0]  # the rules' signal, given as evidence
    assert "[4] WebSurfer: turn 3" in model.prompts[0]


def test_long_trajectories_are_judged_in_chunks_that_fit_the_context():
    t = _log(n=40, size=500)
    budget = LLMJudge(Scripted(), context_tokens=1000).budget
    parts = chunks(t, budget)
    assert len(parts) > 5 and all(len(text) <= budget or text.count("\n") == 0 for _, _, text in parts)
    assert [p[0] for p in parts] == sorted(p[0] for p in parts) and parts[-1][1] == len(t.messages) - 1
    no = json.dumps({"failed_here": False})
    model = Scripted(no, no, _verdict(step=parts[2][0]))
    lab = LLMJudge(model, context_tokens=1000, window=0).label(t)
    assert len(model.prompts) == 3 and lab.first_signal.step == parts[2][0]
    assert max(len(p) for p in model.prompts) < 1000 * 3 + 1500


def test_by_default_one_call_reads_an_excerpt_around_the_rules_signals_within_the_context():
    t = _log(n=60, size=400)
    judge = LLMJudge(Scripted(), context_tokens=1000)
    centre = judge.rules.label(t).first_signal.step
    shown, text = excerpt(t, [centre], 3, judge.budget)
    assert centre in shown and 0 in shown and len(text) <= judge.budget
    assert "messages ...]" in text and f"[{centre}] " in text and f"[{centre + 20}] " not in text
    model = Scripted(_verdict(step=centre))
    lab = LLMJudge(model, context_tokens=1000).label(t)
    assert len(model.prompts) == 1 and lab.labeller == "llm" and lab.first_signal.step == centre
    assert len(model.prompts[0]) < 1000 * 3 + 1500 and "excerpt" in model.prompts[0]
    far = next(i for i in range(1, len(t.messages)) if i not in shown)
    lab = LLMJudge(Scripted(_verdict(step=far)), context_tokens=1000).label(t)
    assert "not among the messages shown" in lab.labeller  # a step the model was not shown is not taken


def test_a_schema_aware_model_may_only_name_a_shown_agent_step():
    t = _log(n=60, size=400)
    seen = []

    def model(messages, schema=None):
        seen.append(schema)
        return _verdict(step=schema["properties"]["step"]["enum"][0])

    model.accepts_schema = True
    lab = LLMJudge(model, context_tokens=1000).label(t)
    allowed = seen[0]["properties"]["step"]["enum"]
    assert lab.labeller == "llm" and lab.first_signal.step == allowed[0]
    assert 0 not in allowed and all(t.messages[i]["role"] == "assistant" for i in allowed)  # no user message
    assert len(allowed) < len(t.messages) / 4  # only the excerpt's steps


def test_any_error_falls_back_to_the_rule_label_and_says_so():
    t = _log()
    rule = LLMJudge(Scripted()).rules.label(t)
    for model, why in [(Scripted("no json here"), "no verdict JSON"),
                       (Scripted(_verdict(step=99)), "not among the messages shown"),
                       (Scripted(_verdict(failure_class="F9")), "no verdict JSON"),
                       (Scripted(json.dumps({"failed_here": False})), "no part of the run judged failing")]:
        lab = LLMJudge(model).label(t)
        assert lab.labeller.startswith("rules (llm fallback") and why in lab.labeller
        assert lab.first_signal == rule.first_signal and lab.failure_class == rule.failure_class

    def broken(messages):
        raise ConnectionError("connection refused")

    assert "connection refused" in LLMJudge(broken).label(t).labeller
    healthy = t.model_copy(update={"score": 1.0, "meta": {}})
    assert LLMJudge(broken).label(healthy).labeller == "rules"  # a Healthy run is not judged


def test_an_agent_the_run_does_not_have_is_not_taken_from_the_verdict():
    """SmolLM2 judging a tau-bench airline run (one unnamed assistant) answered agent "HuggyMoo", and
    `diagnose` printed it as the failing agent. A verdict's agent is kept only where the run has it."""
    msgs = [{"role": "user", "content": "Change my flight."},
            {"role": "assistant", "content": "Done, your flight is changed."},
            {"role": "user", "content": "Thanks."}, {"role": "assistant", "content": "You're welcome!"}]
    t = Trajectory(id="a", task_id="a", task="Change my flight.", messages=msgs, final_answer="Done", score=0.0)
    assert LLMJudge(Scripted(_verdict(step=1, agent="HuggyMoo"))).label(t).agent is None
    named = _log()
    named.messages[4].pop("name")  # a step whose speaker is unnamed, in a run whose agents are named
    assert LLMJudge(Scripted(_verdict(step=4, agent="WebSurfer"))).label(named).agent == "WebSurfer"
    assert LLMJudge(Scripted(_verdict(step=4, agent="HuggyMoo"))).label(named).agent is None


def test_a_reply_that_is_no_chat_completion_falls_back_saying_so():
    """`diagnose --labeller llm` on an endpoint answering a proxy's HTML page said the run fell back with
    'JSONDecodeError: Expecting value: line 1 column 1 (char 0)', and on one answering no choices 'IndexError:
    list index out of range'. The fallback's reason now names the reply."""
    from evoharness.diagnosis.judge import openai_judge_model

    for ctype, body in [("text/html", b"<html>proxy error</html>"), ("application/json", b'{"choices": []}')]:
        with fixed_reply(ctype, body) as url:
            lab = LLMJudge(openai_judge_model(f"openai:{url}#m")).label(_log())
        assert lab.labeller.startswith("rules (llm fallback: ") and "reply is no chat completion" in lab.labeller
        assert f"({ctype})" in lab.labeller and body.decode()[:12] in lab.labeller


def test_a_rate_limited_reply_is_sent_again_after_its_retry_after():
    """On an endpoint answering 429 with Retry-After, every run fell back to the rules at once ('HTTPStatusError:
    Client error '429 Too Many Requests''): a rate-limited judge judged nothing. The judge now waits what
    Retry-After says (at most RETRY_AFTER_MAX_S) and asks again, up to twice."""
    from evoharness.diagnosis.judge import openai_judge_model

    verdict = json.dumps({"choices": [{"message": {"role": "assistant", "content": _verdict(step=4)}}]}).encode()
    seen: list[int] = []

    def reply():
        seen.append(1)
        limited = len(seen) <= 2 or len(seen) >= 4  # 2 refusals, the verdict, then refusals only
        body = b'{"error": {"message": "slow down"}}' if limited else verdict
        return 429 if limited else 200, {"Content-Type": "application/json", "Retry-After": "0"}, body

    with replying(reply) as url:
        judge = LLMJudge(openai_judge_model(f"openai:{url}#m"))
        assert judge.label(_log()).labeller == "llm" and len(seen) == 3
        lab = judge.label(_log())  # refused three times: the rules, saying why
        assert lab.labeller.startswith("rules (llm fallback") and "429" in lab.labeller and len(seen) == 6


def _failed_runs(shared_data, tmp_path, n: int):
    rows = json.loads((shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())
    failed = [r for r in rows if not r["reward"]][:n]
    assert len(failed) == n
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(failed))
    return str(path)


def _completion(content: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


def test_a_slow_judge_call_gives_up_at_the_judge_timeout(shared_data, tmp_path, capsys):
    """`diagnose --labeller llm` waited a fixed 120 s for each reply, with no option. `--judge-timeout SECONDS`
    sets it: a call not answered in time leaves that run with the rule label, saying why."""
    import threading
    import time

    from evoharness.cli import main

    release = threading.Event()

    def slow():
        release.wait(10)
        return 200, {"Content-Type": "application/json"}, _completion(json.dumps({"failed_here": False}))

    sample = _failed_runs(shared_data, tmp_path, 1)
    try:
        with replying(slow) as url:
            start = time.monotonic()
            code = main(["diagnose", sample, "--json", "--labeller", "llm", "--model", f"openai:{url}#m",
                         "--judge-timeout", "0.3"])
            took = time.monotonic() - start
            release.set()
    finally:
        release.set()
    cap = capsys.readouterr()
    assert code == 0 and took < 5, (code, took)
    row = json.loads(cap.out)["trajectories"][0]
    assert row["labeller"] == "rules (llm fallback: TimeoutError: no reply within 0.3s (--judge-timeout))"
    assert "llm judge: 0 runs judged by the model, 1 fell back to the rule labeller (1 TimeoutError" in cap.err
    assert "at most 0.3s a call" in cap.err


def test_the_judge_timeout_is_a_positive_finite_number_for_the_judge_only(tmp_path, capsys):
    from evoharness.cli import main

    sample = str(tmp_path / "missing.json")  # options are checked before any file is read
    assert main(["diagnose", sample, "--judge-timeout", "30"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["error: --judge-timeout is for --labeller llm"]
    judge = ["--labeller", "llm", "--model", "openai:http://127.0.0.1:9/v1#m"]
    for value in ("0", "-1", "inf", "nan"):
        assert main(["diagnose", sample, *judge, "--judge-timeout", value]) == 2, value
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: --judge-timeout: must be a finite positive number of seconds, not {float(value):g}"], \
            err


def test_the_judge_says_how_far_it_got_off_a_terminal_at_most_every_few_seconds(shared_data, tmp_path, capsys,
                                                                                 monkeypatch):
    """Off a terminal (a log, a pipe) `diagnose --labeller llm` said nothing until every run was judged, minutes
    on a slow endpoint. It now prints a line after the first run, then at most one every JudgeProgress.EVERY
    seconds, on a terminal or not; each run counts as judged (the verdict kept) or fell back to the rules."""
    from evoharness.cli import main
    from evoharness.diagnosis.cli import JudgeProgress

    sample = _failed_runs(shared_data, tmp_path, 3)
    answers = iter([True, json.dumps({"failed_here": False}), "not json"] * 2)

    def reply(request):  # a verdict naming the first step the schema allows, then none, then no JSON
        answer = next(answers)
        if answer is True:
            answer = _verdict(step=request["response_format"]["schema"]["properties"]["step"]["enum"][0])
        return 200, {"Content-Type": "application/json"}, _completion(answer)

    with replying_to(reply) as url:
        judge = ["diagnose", sample, "--labeller", "llm", "--model", f"openai:{url}#m"]
        assert main(judge) == 0
        err = capsys.readouterr().err.splitlines()
        lines = [x for x in err if " judged, " in x]
        assert len(lines) == 1 and "llm judge: 1 run judged, 0 fell back to the rules (1 call, the last " in lines[0]
        assert "llm judge: 1 run judged by the model, 2 fell back to the rule labeller (1 no part of the run " \
               "judged failing; 1 ValueError: no verdict JSON in the reply: 'not json')" in err, err
        monkeypatch.setattr(JudgeProgress, "EVERY", 0.0)
        assert main(judge) == 0
        lines = [x for x in capsys.readouterr().err.splitlines() if " judged, " in x]
    assert [x.split("] ", 1)[1].split(", the last")[0] for x in lines] == [
        "llm judge: 1 run judged, 0 fell back to the rules (1 call",
        "llm judge: 1 run judged, 1 fell back to the rules (2 calls",
        "llm judge: 1 run judged, 2 fell back to the rules (3 calls"]


def test_a_busy_endpoint_stops_the_judge_after_some_timeouts_in_a_row(shared_data, tmp_path, capsys):
    """On an endpoint too busy to answer, every failed run waited the whole --judge-timeout (1,000 runs at the
    default 120 s: 33 hours for rule labels), and the progress line said "1 run judged" of a run whose call timed
    out. Now the judge stops after TIMEOUTS_IN_A_ROW timed-out calls in a row: the rest keep the rule label
    without a call, each saying why, and the lines count them as fallen back."""
    import threading
    import time

    from evoharness.cli import main
    from evoharness.diagnosis.judge import TIMEOUTS_IN_A_ROW

    release = threading.Event()
    seen: list[int] = []

    def busy():
        seen.append(1)
        release.wait(10)
        return 200, {"Content-Type": "application/json"}, _completion(_verdict(step=2))

    sample = _failed_runs(shared_data, tmp_path, 6)
    try:
        with replying(busy) as url:
            start = time.monotonic()
            code = main(["diagnose", sample, "--json", "--labeller", "llm", "--model", f"openai:{url}#m",
                         "--judge-timeout", "0.2"])
            took = time.monotonic() - start
            release.set()
    finally:
        release.set()
    cap = capsys.readouterr()
    assert code == 0 and len(seen) == TIMEOUTS_IN_A_ROW == 3 and took < 3, (code, len(seen), took)
    labellers = [row["labeller"] for row in json.loads(cap.out)["trajectories"]]
    timed_out = "rules (llm fallback: TimeoutError: no reply within 0.2s (--judge-timeout))"
    stopped = "rules (llm fallback: judge paused: 3 calls in a row timed out, one try every 60s)"
    assert labellers == [timed_out] * 3 + [stopped] * 3, labellers
    assert "llm judge: 0 runs judged, 1 fell back to the rules (1 call, the last 0." in cap.err, cap.err
    assert ("llm judge: 0 runs judged by the model, 6 fell back to the rule labeller (3 TimeoutError: no reply within "
            "0.2s (--judge-timeout); 3 judge paused: 3 calls in a row timed out, one try every 60s)") in cap.err, \
        cap.err


def test_an_answered_call_resets_the_timeouts_in_a_row():
    """Timeouts apart (a busy moment, then answers) do not stop the judge: only TIMEOUTS_IN_A_ROW in a row."""

    class Flaky:
        def __init__(self, pattern: str) -> None:
            self.pattern, self.calls = iter(pattern), 0

        def __call__(self, messages):
            self.calls += 1
            if next(self.pattern) == "t":
                raise TimeoutError("no reply within 1s (--judge-timeout)")
            return _verdict(step=2)

    model = Flaky("tt.tt.tt.")
    judge = LLMJudge(model)
    labellers = [judge.label(_log()).labeller for _ in range(9)]
    assert model.calls == 9 and labellers.count("llm") == 3, labellers
    model = Flaky("ttt")
    judge = LLMJudge(model)
    labellers = [judge.label(_log()).labeller for _ in range(5)]
    assert model.calls == 3 and labellers[3:] == [
        "rules (llm fallback: judge paused: 3 calls in a row timed out, one try every 60s)"] * 2


def test_the_retry_pause_is_an_option_zero_never_pausing(tmp_path, capsys):
    """The paused judge's wait before it tries again was fixed at 60 s: `--judge-retry-after SECONDS` (and
    ``LLMJudge(retry_after_s=...)``, label_accuracy.py's option) sets it; 0 calls the model for every run; like the
    judge's other options it is refused for the rules and checked (a number of seconds >= 0)."""
    from evoharness.cli import main

    class Timeouts:
        calls = 0

        def __call__(self, messages):
            self.calls += 1
            raise TimeoutError("no reply within 1s (--judge-timeout)")

    model = Timeouts()
    judge = LLMJudge(model, retry_after_s=0)
    labellers = [judge.label(_log()).labeller for _ in range(5)]
    assert model.calls == 5 and labellers[3:] == [
        "rules (llm fallback: judge paused, tried again: TimeoutError: no reply within 1s (--judge-timeout))"] * 2
    model = Timeouts()
    judge = LLMJudge(model, retry_after_s=3600)
    labellers = [judge.label(_log()).labeller for _ in range(5)]
    assert model.calls == 3 and labellers[3:] == [
        "rules (llm fallback: judge paused: 3 calls in a row timed out, one try every 3600s)"] * 2

    sample = str(tmp_path / "missing.json")  # options are checked before any file is read
    assert main(["diagnose", sample, "--judge-retry-after", "5"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["error: --judge-retry-after is for --labeller llm"]
    llm = ["--labeller", "llm", "--model", "openai:http://127.0.0.1:9/v1#m"]
    for value in ("-1", "inf", "nan"):
        assert main(["label", sample, "--out", str(tmp_path / "l.jsonl"), *llm, "--judge-retry-after", value]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: --judge-retry-after: must be a finite number of seconds >= 0, not {float(value):g}"], \
            err


def test_a_paused_judge_tries_again_after_a_while_and_resumes_when_answered(monkeypatch):
    """After TIMEOUTS_IN_A_ROW timeouts the judge stopped calling for the rest of the job: an endpoint busy for a
    minute cost the judge for the next 10,000 runs. Now a paused judge tries one call RETRY_AFTER_S after the last
    timed-out call: still timing out, it stays paused for another wait (that run says it was a try); answered, it
    judges every run again. Each run's label says which."""
    import threading
    import time

    from evoharness.diagnosis.judge import openai_judge_model

    monkeypatch.setattr(LLMJudge, "RETRY_AFTER_S", 1.0, raising=False)  # absent before the fix
    answering = threading.Event()
    requests: list[int] = []

    def reply():
        requests.append(1)
        if not answering.wait(3.0):  # busy: well past the 0.5 s --judge-timeout
            return 503, {}, b""
        return 200, {"Content-Type": "application/json"}, _completion(_verdict(step=2))

    labels: list[str] = []
    try:
        with replying(reply) as url:
            judge = LLMJudge(openai_judge_model(f"openai:{url}#m", timeout_s=0.5))
            labels += [judge.label(_log()).labeller for _ in range(4)]  # 3 time out, the 4th is paused: no call
            assert len(requests) == 3, labels
            time.sleep(1.1)
            labels += [judge.label(_log()).labeller for _ in range(2)]  # a try (times out), then paused again
            assert len(requests) == 4, labels
            answering.set()
            labels.append(judge.label(_log()).labeller)  # paused: the wait starts again at the try
            time.sleep(1.1)
            labels += [judge.label(_log()).labeller for _ in range(2)]  # a try, answered: judging again
            assert len(requests) == 6, labels
    finally:
        answering.set()
    timed_out = "rules (llm fallback: TimeoutError: no reply within 0.5s (--judge-timeout))"
    paused = "rules (llm fallback: judge paused: 3 calls in a row timed out, one try every 1s)"
    tried = "rules (llm fallback: judge paused, tried again: TimeoutError: no reply within 0.5s (--judge-timeout))"
    assert labels == [timed_out] * 3 + [paused, tried, paused, paused, "llm", "llm"], labels


def test_a_reply_trickling_in_is_given_up_at_the_judge_timeout_too():
    """httpx's timeout bounds each read, not the reply: a server (or a proxy's keep-alive spaces) sending a byte
    every 0.1 s held a call with --judge-timeout 0.5 for as long as the whole reply took (3 s here; without end for
    a proxy that keeps the line open with spaces)."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from evoharness.diagnosis.judge import openai_judge_model

    body = b" " * 30 + _completion(json.dumps({"failed_here": False}))

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    time.sleep(0.1 if i < 30 else 0)
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
            except OSError:  # the client gave up
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        model = openai_judge_model(f"openai:http://127.0.0.1:{httpd.server_address[1]}/v1#m", timeout_s=0.5)
        start = time.monotonic()
        try:
            model([{"role": "user", "content": "judge"}])
            raised = None
        except TimeoutError as e:
            raised = str(e)
        took = time.monotonic() - start
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert raised == "no reply within 0.5s (--judge-timeout)" and took < 1.5, (raised, took)
