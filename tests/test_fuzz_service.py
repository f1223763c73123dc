"""scripts/fuzz_service.py, briefly: it finds every endpoint that takes a body in the app itself, its bodies keep their
keys with a value changed, and its checks catch what they are for. The long run is the script itself
(`scripts/fuzz_service.py --budget 300`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app
from evoharness.service.routes import Decision, ExportRequest, NewRun
from tests.modules import load_file

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fuzz_service.py"


@pytest.fixture(scope="module")
def fuzz():
    return load_file(SCRIPT, "fuzz_service", register=True)


class _Service:  # what check() asks of the service when a case is 2xx: nothing here
    slow = 30.0


def test_every_endpoint_with_a_body_is_found_in_the_app(fuzz, tmp_path):
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "service": {"loop": False}})
    found = {e.path: e.model for e in fuzz.endpoints(create_app(settings, "t" * 24, quiet=True), "r1")}
    assert found == {"/runs": NewRun, "/runs/r1/approve": Decision, "/runs/r1/reject": Decision,
                     "/datasets/export": ExportRequest, "/trajectories": None}


def test_a_case_keeps_the_keys_and_changes_values(fuzz):
    rng = random.Random(4)
    ep = fuzz.Endpoint("/datasets/export", ExportRequest)
    changed = 0
    for n in range(200):
        case = fuzz.make_case(ep, rng, [], n)
        try:
            body = json.loads(case.body)
        except (ValueError, RecursionError):  # a 5,000-digit integer, 100,000 deep: past Python's limits
            continue
        if isinstance(body, dict):
            assert set(body) <= set(ExportRequest.model_fields), body
        changed += bool(case.changed)
    assert 100 < changed < 200  # most cases change something; a working body now and then


def test_the_checks_catch_a_500_a_lax_value_and_a_refusal_that_changed_things(fuzz):
    ep = fuzz.Endpoint("/datasets/export", ExportRequest)
    held = {"ingested": 3, "exports": [], "runs": []}

    def judged(status, answer, kinds=(), after=held):
        case = fuzz.Case(ep.path, b"{}", kinds=list(kinds), status=status, answer=json.dumps(answer))
        fuzz.check(case, ep, held, after, _Service())
        return case.problems

    assert judged(500, {"error": "boom"}) == ["status 500"]
    assert judged(422, {"error": "two\nlines", "errors": []}) and judged(422, {"error": "x"})  # no errors list
    assert judged(422, {"error": "bad", "errors": []}) == []
    assert judged(409, {"error": "exists"}, after={**held, "exports": ["half"]})  # refused, yet an export was left
    assert judged(200, {}, [("max_per_task", "string")]) == ["accepted (200) a string value at max_per_task"]
    assert judged(200, {}, [("min_score", None)])  # NaN taken as a score
    assert judged(200, {}, [("max_per_task", "integer"), ("min_score", "integer"), ("tasks.0", "string"),
                            ("classes.1", "string"), ("name", "null")]) == []
    assert judged(200, {}, [("classes.1", "integer")])


def test_format_cases_send_other_formats_files_none_of_a_held_out_set(fuzz, tmp_path):
    """The fuzz sent canonical lists only: POST /trajectories?format=NAME (the importers behind the service) never
    saw a mutated body, and a 500 there went unseen (load_bytes on JSON lines nested too deeply). Now a share of its
    cases are the importer fuzz's samples, mutated, sent with ?format=; no sample is of a held-out set."""
    samples = fuzz.format_samples(tmp_path)
    assert len({fmt for fmt, _ in samples}) >= 10, samples
    assert not [p for _, p in samples if "agentrx_magentic_one" in str(p) or "Hand-Crafted" in str(p)]
    rng = random.Random(0)
    records = [{"id": f"t{i}", "task_id": "x", "messages": []} for i in range(3)]
    cases = [fuzz.make_case(fuzz.Endpoint("/trajectories", None), rng, records,
                            n, samples) for n in range(200)]
    sent = [c for c in cases if "?format=" in c.endpoint]
    assert 40 <= len(sent) <= 120 and all(c.body for c in sent), len(sent)


def test_a_decision_taken_is_checked_against_the_candidates_awaiting_review(fuzz):
    """approve/reject cases go to a run waiting for review (``Reviews``); a 2xx decision must name a candidate that
    was awaiting, give it the decision asked for, reject the others and keep the reason; a refusal must leave the
    candidates awaiting as they were (a run not waiting moves on its own: not compared)."""
    from evoharness.service.routes import Decision

    awaiting = ["candidate/r1-a", "candidate/r1-b"]
    before = {"ingested": 3, "exports": [], "runs": [], "review": ["waiting_review", awaiting]}
    ep = fuzz.Endpoint("/runs/review-1/approve", Decision)

    def judged(sent, answer, status=202, after=before, endpoint=ep.path, held=before):
        case = fuzz.Case(endpoint, json.dumps(sent).encode(), status=status, answer=json.dumps(answer))
        fuzz.check(case, ep, held, after, _Service())
        return case.problems

    right = {"decision": "approve", "decisions": {"candidate/r1-a": "approve", "candidate/r1-b": "reject",
                                                  "candidate/r1-a#reason": "ok"}}
    assert judged({"candidate": "candidate/r1-a", "reason": "ok"}, right) == []
    assert judged({"candidate": "candidate/r1-a"}, right)  # a reason nobody gave
    assert judged({"candidate": "candidate/r1-zzz"}, right)[0].startswith("took a decision on 'candidate/r1-zzz'")
    assert judged({"candidate": "candidate/r1-a", "reason": "ok"}, {**right, "decision": "reject"})
    wrong = {"decision": "reject", "decisions": {"candidate/r1-a": "approve", "candidate/r1-b": "reject"}}
    assert judged({"candidate": "candidate/r1-a"}, wrong, endpoint="/runs/review-1/reject")
    gone = {**before, "review": ["running", []]}
    assert judged({"candidate": "x"}, {"error": "not awaiting", "errors": []}, status=409, after=gone)
    moving = {**before, "review": ["running", []]}
    assert judged({"candidate": "x"}, {"error": "not waiting"}, status=409, held=moving, after=gone) == []
    assert not fuzz.decides("/runs") and fuzz.decides("/runs/r1/reject")


def test_a_stored_id_over_the_limit_or_with_a_control_character_is_a_failure(fuzz):
    """POST /trajectories refuses an id over MAX_ID_CHARS (a 100,000-character one was stored, its GET a URL httpx
    refuses) or holding a control character (one with a newline could not be read back); the fuzz's 2xx check says
    so should one be stored again."""
    from evoharness.service.routes import MAX_ID_CHARS

    class Answers(_Service):
        def request(self, method, path, body=None):
            class R:
                status_code = 200

                @staticmethod
                def json():
                    return {"score": 0.5}
            return R()

    ep = fuzz.Endpoint("/trajectories", None)
    for tid, want in (("x" * MAX_ID_CHARS, []), ("x" * (MAX_ID_CHARS + 1), [
            f"stored an id of {MAX_ID_CHARS + 1:,} characters (at most {MAX_ID_CHARS})"]),
            ("abc\n", ["stored an id holding a control character ('\\n')"])):
        case = fuzz.Case(ep.path, json.dumps([{"id": tid}]).encode(), status=200, answer="{}")
        fuzz.check(case, ep, {}, {}, Answers())
        assert case.problems == want


@pytest.mark.parametrize("tid", ["../../etc", "a?b", "a#b", "50%", "a/b"])
def test_a_stored_id_with_url_characters_is_read_back_as_stored_not_a_failure(fuzz, tmp_path, tid):
    """The 2xx ingest check read each id back with GET /trajectories/{id} unquoted: an id of the fuzz's own values
    ('../../etc') or with '?' or '#' was sent as another path, a query or a fragment, and the 404 was told as the
    service's failure. The service stores and gives back such ids; the check now quotes the id as one path segment."""
    from tests.service.helpers import trajectory

    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})  # (run.harness' default is made in the cwd)
    token = "t" * 24
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(settings, token, quiet=True)) as c:
        class Live(_Service):
            def request(self, method, path, body=None):
                return c.request(method, path, content=body, headers=auth)

        body = json.dumps([trajectory(tid)]).encode()
        r = c.post("/trajectories", content=body, headers={**auth, "content-type": "application/json"})
        assert r.status_code == 200 and r.json()["stored"] == 1, r.text
        case = fuzz.Case("/trajectories", body, status=200, answer=r.text)
        fuzz.check(case, fuzz.Endpoint("/trajectories", None), {}, {}, Live())
        assert case.problems == []
