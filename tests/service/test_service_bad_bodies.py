"""A body the API cannot read is answered with where it went wrong and what was expected (in process)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "content-type": "application/json"}
DECISION = "expected a JSON object with candidate (required), reason"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("svc")
    settings = Settings.model_validate({"home": str(root / "home"), "run": {"harness": str(root / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(("body", "error"), [
    # FastAPI said 'body.9: JSON decode error' (9: a character offset) for all of these
    (b'{"candidate": x}', "body is not valid JSON at line 1, column 15 (near 'x}'): expecting value; " + DECISION),
    (b'{"candidate": "c",\n "reason": }', "body is not valid JSON at line 2, column 12 (near '}'): expecting value; "
     + DECISION),
    (b'{"candidate": "c",', "body is not valid JSON at its end (cut short?): expecting property name enclosed in "
     "double quotes; " + DECISION),
    # json's reason is 'Unterminated string starting at' (the position apart): it said 'starting at; expected'
    (b'{"candidate": "candidate/r1', "body is not valid JSON at line 1, column 15 (near '\"candidate/r1'): "
     "unterminated string; " + DECISION),
    (b'{"candidate": "c"} {}', "body is not valid JSON at line 1, column 20 (near '{}'): extra data; " + DECISION),
    # 'body: Input should be a valid dictionary or object to extract fields from'
    (b'[{"candidate": "c"}]', "body is a list, not an object; " + DECISION),
    (b"null", "body is null, not an object; " + DECISION),
    # 'body: Field required'
    (b"", "body is empty; " + DECISION),
    # '{"detail": "There was an error parsing the body"}', the one answer without an "error" key
    (b'{"candidate": "\x80"}', "body is not UTF-8 text (byte 16 is b'\\x80'); " + DECISION),
    (b"[" * 100_000, "body is nested too deeply to parse; " + DECISION),
    (b'{"candidate": ' + b"1" * 5000 + b"}", "body holds an integer too long to parse (over 4,300 digits); "
     + DECISION),
])
def test_a_malformed_body_says_where_and_what_was_expected(client, body, error):
    r = client.post("/runs/some-run/approve", content=body, headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == error


def test_a_trajectory_batch_cut_inside_a_string_says_so_without_a_dangling_at(client):
    r = client.post("/trajectories", content=b'[{"id": "t1", "task_id": "ta', headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == ("body is not valid JSON at line 1, column 26 (near '\"ta'): unterminated string; "
                                 "expected a JSON list of canonical trajectories")


def test_a_body_not_sent_as_json_says_so(client):
    r = client.post("/runs/some-run/approve", content=b'{"candidate": "c"}',
                    headers={**AUTH, "content-type": "text/plain"})
    assert r.status_code == 422
    assert r.json()["error"] == ("body is not sent as JSON (Content-Type: text/plain): send Content-Type: "
                                 "application/json and a JSON object with candidate (required), reason")


def test_field_errors_keep_their_field_and_an_unknown_field_names_the_known_ones(client):
    r = client.post("/runs/some-run/approve", json={"candidate": 5}, headers=AUTH)
    assert r.status_code == 422 and r.json()["error"] == "body.candidate: Input should be a valid string"
    r = client.post("/datasets/export", json={"sorce": "all"}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["errors"] == [{"field": "body.sorce", "error": (
        "Extra inputs are not permitted; expected a JSON object with format, source, name, render_under, "
        "placebo, min_score, max_per_task, tasks, classes, keep_duplicates, skip_text_with_calls, val_fraction, "
        "split_seed, max_tokens")}]


def test_composition_of_more_than_there_are_is_all_of_them(client):
    client.post("/trajectories", json=[{"id": "q1", "task_id": "t", "messages": [{"role": "user", "content": "hi"}]}],
                headers=AUTH)
    r = client.get("/composition", params={"last": str(10**22)}, headers=AUTH)  # was a 500 (SQLite's LIMIT)
    assert r.status_code == 200 and r.json()["n"] == client.get("/composition", headers=AUTH).json()["n"] >= 1
    assert client.get("/composition", params={"last": "0"}, headers=AUTH).status_code == 422


def test_an_unknown_candidate_status_is_422_naming_the_known_ones(client):
    r = client.get("/candidates", params={"status": "verifed"}, headers=AUTH)  # was 200 and no candidates
    assert r.status_code == 422
    assert r.json()["error"] == ("query.status: Input should be 'pending', 'verified', 'merged', 'rejected' or "
                                 "'superseded'")
    r = client.get("/candidates", params={"status": "superseded"}, headers=AUTH)  # review's status since 8b225af
    assert r.status_code == 200 and all(c["status"] == "superseded" for c in r.json()["candidates"])


def test_canonical_json_lines_or_one_trajectory_say_how_to_send_them(client):
    """A run's trajectories.jsonl, or what `evoharness import` writes, posted as it is was answered 'body is not JSON:
    Extra data: line 2 column 1 (char 4134)': true, and no word of the JSON list it wanted or of ?format=auto."""
    import json

    from tests.service.helpers import trajectory

    lines = "".join(json.dumps(trajectory(f"t{i}", "process")) + "\n" for i in range(3)).encode()
    r = client.post("/trajectories", content=lines, headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == ("body is JSON Lines (3 records, one a line), not a JSON list: send the list, or "
                                 "these lines with ?format=auto")
    r = client.post("/trajectories", content=json.dumps(trajectory("t9")).encode(), headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == ("body must be a JSON list of canonical trajectories; it is one object: send it as "
                                 "a list of one, [{...}]")
    assert client.post("/trajectories", params={"format": "auto"}, content=lines, headers=JSON).json() == \
        {"received": 3, "stored": 3, "duplicates": 0, "conflicts": []}


def test_one_object_of_another_format_is_told_its_format_not_to_be_wrapped_in_a_list(client):
    """Since ab7fae1 one object was told 'send it as a list of one, [{...}]' whatever it was: an ATIF trajectory
    (one object a file) sent so was then refused record by record; `?format=atif` (or auto) imports it as it is."""
    from pathlib import Path

    atif = (Path(__file__).parents[1] / "fixtures" / "traces" / "atif" / "multi-agent.json").read_bytes()
    r = client.post("/trajectories", content=atif, headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == ("body must be a JSON list of canonical trajectories; it is one object; these look "
                                 "like atif records: POST /trajectories?format=atif (or format=auto) imports them")
    r = client.post("/trajectories", params={"format": "atif"}, content=atif, headers=JSON)
    assert r.status_code == 200 and r.json()["stored"] == 1, r.json()
    r = client.post("/trajectories", content=b'{"trajectories": []}', headers=JSON)
    assert r.json()["error"] == ("body must be a JSON list of canonical trajectories; it is one object "
                                 "(keys: trajectories)")


@pytest.mark.parametrize("reason", ["line1\nline2", "nul \x00 here", "colour \x1b[31mred", "approve \u202eevil",
                                    "ok \u2067x\u2069"])
def test_a_review_reason_with_a_control_character_is_refused(client, reason):
    """A reason is one line of text: 'line1\\nline2\\x00' was stored, `evoharness review` printed the verdict over two
    lines with the NUL, and report.md held the NUL (grep: 'binary file matches'); an escape sequence reached the
    terminal of whoever ran `review`."""
    r = client.post("/runs/some-run/reject", json={"candidate": "c", "reason": reason}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"].startswith("body.reason: Value error, a control character ("), r.json()
    assert "one line of text" in r.json()["error"]


@pytest.mark.parametrize("candidate", ["a\nb", "candidate/r1-x\x00", "candidate/\u202er1"])
def test_a_candidate_with_a_control_character_is_refused_before_it_is_named_in_an_error(client, candidate):
    """A candidate not awaiting review is named in the 409 ('a\\nb: not awaiting review in ...'): one holding a
    newline made that error two lines (fuzz_service, its decisions sent to a run waiting for review)."""
    r = client.post("/runs/some-run/approve", json={"candidate": candidate}, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"].startswith("body.candidate: Value error, a control character ("), r.json()
    assert r.json()["error"].endswith("in it: a candidate is a branch name") and "\n" not in r.json()["error"]


def test_json_lines_whose_text_holds_a_unicode_line_break_are_still_told_how_to_send_them(client):
    """ab7fae1 split the body with str.splitlines, which breaks at U+2028 inside a string too: a run's
    trajectories.jsonl (written with such characters raw) was 'body is not JSON: Extra data ...' again, while
    ?format=auto read it."""
    import json

    from tests.service.helpers import trajectory

    records = [trajectory(f"u{i}", "process") for i in range(2)]
    records[0]["messages"][0]["content"] += " one\u2028two\x85three"
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    r = client.post("/trajectories", content=lines, headers=JSON)
    assert r.status_code == 422
    assert r.json()["error"] == ("body is JSON Lines (2 records, one a line), not a JSON list: send the list, or "
                                 "these lines with ?format=auto")
    assert client.post("/trajectories", params={"format": "auto"}, content=lines, headers=JSON).json()["stored"] == 2


MALFORMED = {"not JSON": b'{"x": y}', "not UTF-8": b'{"name": "\x80"}', "nested too deeply": b"[" * 100_000,
             "a 5,000-digit integer": b'{"a": ' + b"1" * 5000 + b"}", "the wrong type": b'"text"',
             "an unknown field": b'{"zzz": 1}'}


@pytest.mark.parametrize("path", ["/runs", "/runs/some-run/approve", "/runs/some-run/reject", "/datasets/export",
                                  "/trajectories"])
@pytest.mark.parametrize("kind", list(MALFORMED))
def test_every_endpoint_answers_a_malformed_body_422(client, path, kind):
    """One rule (docs/service.md): a body the service cannot use is 422 {"error", "errors"}. A body not UTF-8,
    nested too deeply or with a 5,000-digit integer was 400 from the endpoints that read a model, 422 from
    /trajectories; bad JSON was 422 everywhere."""
    r = client.post(path, content=MALFORMED[kind], headers=JSON)
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.json()["error"].startswith("body") and isinstance(r.json()["errors"], list), r.json()


def test_a_value_the_endpoint_refuses_is_422_and_a_state_that_refuses_it_is_409(client):
    """A held-out task asked of /datasets/export was 400 beside 422 for a bad name; POST /runs with an id that
    exists was 400 beside approve's 409 for a run not waiting for review."""
    from tests.service.helpers import trajectory

    client.post("/trajectories", json=[trajectory("hx", "healthy", task="secret", split="heldout")], headers=AUTH)
    r = client.post("/datasets/export", json={"source": "healthy", "tasks": ["secret"]}, headers=AUTH)
    assert r.status_code == 422 and "held-out" in r.json()["error"] and r.json()["errors"], r.text
    r = client.post("/datasets/export", json={"name": "../escape"}, headers=AUTH)
    assert r.status_code == 422
    assert client.post("/runs", json={"run_id": "run-one"}, headers=AUTH).status_code == 202
    r = client.post("/runs", json={"run_id": "run-two"}, headers=AUTH)
    assert r.status_code == 409 and "run-one" in r.json()["error"], r.text


def test_resuming_a_run_that_is_done_is_409_a_state_not_a_body(client):
    """3af9cc7 made every InputError 422 ("the body cannot be used"); POST /runs/{id}/resume of a done run raised one
    and answered 422 for a request without a body, where the rule says 409 for a state that refuses the request."""
    import json

    from evoharness.graph.runner import runs_dir, save_run_settings

    settings = client.app.state.settings
    run_dir = runs_dir(settings) / "run-done"
    save_run_settings(run_dir, settings)
    (run_dir / "summary.json").write_text(json.dumps({"run_id": "run-done"}))
    r = client.post("/runs/run-done/resume", headers=AUTH)
    assert r.status_code == 409 and r.json()["error"] == "run-done: the run is done", r.text


def test_an_export_the_harness_repo_cannot_render_is_409_not_a_bad_body(tmp_path):
    """3af9cc7 made every InputError 422 ("the body cannot be used"): POST /datasets/export under the evolved prompt
    of a harness repo with no commit yet answered 422 for a body that was fine: the harness's state refuses it (409,
    docs/service.md)."""
    import subprocess

    harness = tmp_path / "h"
    harness.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(harness)], check=True)
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(harness)},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "evolved"}, headers=AUTH)
        assert r.status_code == 409 and "no commits" in r.json()["error"], r.text


def test_what_the_service_holds_refusing_a_request_is_409_not_a_bad_body(client, tmp_path):
    """3af9cc7 made every InputError 422; one about what the service holds is no bad body: an export name whose
    directory holds files no export wrote, and a run whose settings.json cannot be read, answered 422 (400 before)."""
    home = client.app.state.settings.home
    mine = home / "exports" / "theirs"
    mine.mkdir(parents=True)
    (mine / "README.md").write_text("a project's readme")
    r = client.post("/datasets/export", json={"source": "healthy", "name": "theirs"}, headers=AUTH)
    assert r.status_code == 409 and "no earlier export wrote" in r.json()["error"], r.text
    assert (mine / "README.md").read_text() == "a project's readme"
    broken = home / "runs" / "run-broken"
    broken.mkdir(parents=True)
    (broken / "settings.json").write_text("{not json")
    r = client.get("/runs/run-broken", headers=AUTH)
    assert r.status_code == 409 and "run-broken" in r.text, r.text


BATCH = "expected a JSON list of canonical trajectories"


@pytest.mark.parametrize(("body", "error"), [
    # 'body is not JSON: Expecting value: line 1 column 7 (char 6)'
    (b'{"x": y}', "body is not valid JSON at line 1, column 7 (near 'y}'): expecting value; " + BATCH),
    (b'[{"id": "a"},', "body is not valid JSON at its end (cut short?): expecting value; " + BATCH),
    # "body is not JSON: 'utf-8' codec can't decode byte 0x80 in position 10: invalid start byte"
    (b'{"name": "\x80"}', "body is not UTF-8 text (byte 11 is b'\\x80'); " + BATCH),
    # 'body is not usable JSON: maximum recursion depth exceeded ...' / 'Exceeds the limit (4300 digits) ...'
    (b"[" * 100_000, "body is nested too deeply to parse; " + BATCH),
    (b'{"a": ' + b"1" * 5000 + b"}", "body holds an integer too long to parse (over 4,300 digits); " + BATCH),
])
def test_trajectories_words_a_body_that_is_not_json_as_every_endpoint_does(client, body, error):
    """POST /trajectories answered such a body in its own words (Python's message: 'body is not JSON: Expecting
    value: line 1 column 7 (char 6)') with "errors": [], where every other endpoint says where and what it expected
    and names the body in "errors"."""
    r = client.post("/trajectories", content=body, headers=JSON)
    assert r.status_code == 422
    assert r.json() == {"error": error, "errors": [{"field": "body", "error": error}]}
    other = client.post("/runs/some-run/approve", content=body, headers=JSON).json()
    assert other["error"].replace(DECISION, BATCH) == error and other["errors"][0]["field"] == "body"


def test_json_lines_posted_as_a_batch_keep_their_hint_in_the_same_shape(client):
    """Its answer kept the hint and had "errors": [], where a body's one problem is named there by every endpoint."""
    import json

    from tests.service.helpers import trajectory

    lines = "".join(json.dumps(trajectory(f"jl{i}", "process")) + "\n" for i in range(2)).encode()
    r = client.post("/trajectories", content=lines, headers=JSON)
    error = ("body is JSON Lines (2 records, one a line), not a JSON list: send the list, or these lines with "
             "?format=auto")
    assert r.status_code == 422 and r.json() == {"error": error, "errors": [{"field": "body", "error": error}]}


def test_an_export_refused_for_asking_held_out_tasks_is_422_however_it_is_worded(client, monkeypatch):
    """ea38ef9 told a held-out refusal (422, the request's fault) from a state's (409) by its words ('held-out tasks
    are never exported'): the same refusal reworded became 409. The kind of error decides now."""
    from evoharness.datasets import export
    from evoharness.errors import HeldOutRequested

    def refuse(*_args, **_kw):
        raise HeldOutRequested("export", "every matching trajectory is of a task kept for evaluation")

    monkeypatch.setattr(export, "export_dataset", refuse)
    r = client.post("/datasets/export", json={"source": "healthy"}, headers=AUTH)
    assert r.status_code == 422 and "kept for evaluation" in r.json()["error"], r.text


@pytest.mark.parametrize("fmt", ["canonical", "auto"])
def test_a_lone_surrogate_escape_in_a_batch_is_read_as_import_reads_it_not_a_500(client, fmt):
    """A writer that cut a string by UTF-16 units leaves half a pair (``"\\ud83d"``). The canonical batch's slow
    path parsed it with ``json.loads`` into a string no UTF-8 encoder takes: the 422 naming the record's id was a
    500 (UnicodeEncodeError in the response) and the next request on the connection was reset. It is read as
    U+FFFD, as `evoharness import` and ``?format=auto`` read it, and the batch is stored."""
    import json

    from tests.service.helpers import trajectory

    body = json.dumps([trajectory(f"half-{fmt}-\ud83d")], ensure_ascii=True).encode()
    assert b"\\ud83d" in body
    r = client.post(f"/trajectories?format={fmt}", content=body, headers=JSON)
    assert r.status_code == 200 and r.json()["stored"] == 1
    back = client.get(f"/trajectories/half-{fmt}-\ufffd", headers=AUTH)
    assert back.status_code == 200 and back.json()["id"] == f"half-{fmt}-\ufffd"


def test_a_refused_record_whose_id_holds_a_lone_surrogate_is_a_422_naming_it(client):
    import json

    from tests.service.helpers import trajectory

    bad = {**trajectory("cut-\ud83d"), "score": 7}
    r = client.post("/trajectories", content=json.dumps([bad], ensure_ascii=True).encode(), headers=JSON)
    assert r.status_code == 422
    assert r.json()["errors"][0] == {"index": 0, "field": "score", "error": "Input should be less than or equal to 1",
                                     "id": "cut-\ufffd"}



def test_a_body_nested_as_deep_as_the_parser_goes_runs_no_other_code_down_there(client, litter):
    """Such a body was parsed with the collector on: garbage of anything else in the process (an earlier request's
    socket, a temporary file) could be finalised ~1,000 frames deep, where its ``__del__`` failed with RecursionError
    (CI at 569baf3: two 'unraisable exception' warnings pytest could not even format, and a failed test)."""
    for path in ("/runs/some-run/approve", "/trajectories"):
        with litter() as seen:
            r = client.post(path, content=b"[" * 100_000, headers=JSON)
        assert r.status_code == 422 and r.json()["error"].startswith("body is nested too deeply to parse; ")
        assert seen["finalised"] > 100  # the trap was armed: finalisers ran all through the request
        assert seen["unraisable"] == [], path


@pytest.mark.parametrize("fmt", ["canonical", "auto"])
def test_an_id_longer_than_the_limit_is_a_422_naming_the_record_and_nothing_is_stored(client, fmt):
    """Ids had no length limit: a 100,000-character id was stored, and its GET /trajectories/{id} is a URL no
    client or proxy sends (httpx refuses one over 65,536 characters; nginx's request line stops at 8 KiB).
    At most ``MAX_ID_CHARS`` characters: a 422 naming the record, the batch refused whole."""
    import json

    from evoharness.service.routes import MAX_ID_CHARS
    from tests.service.helpers import trajectory

    longest, over = f"{fmt}-" + "é" * (MAX_ID_CHARS - len(fmt) - 1), f"{fmt}-over-" + "x" * 100_000
    body = [trajectory(f"{fmt}-fine"), trajectory(over)]
    lines = "\n".join(json.dumps(t) for t in body).encode()
    before = client.get("/composition", headers=AUTH).json()["total"]
    r = client.post(f"/trajectories?format={fmt}", content=json.dumps(body).encode() if fmt == "canonical" else lines,
                    headers=JSON)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    where = "record 1" if fmt == "canonical" else "imported trajectory 1 of 2"  # ?format=: the importer's output
    assert error.startswith(f"{where}: id: {len(over):,} characters; at most {MAX_ID_CHARS}"), error
    assert error.endswith("(nothing stored)"), error
    assert len(r.text) < 2000  # the id is not echoed whole
    assert client.get("/composition", headers=AUTH).json()["total"] == before
    ok = client.post(f"/trajectories?format={fmt}", content=json.dumps([trajectory(longest)]).encode(), headers=JSON)
    assert ok.status_code == 200 and ok.json()["stored"] == 1, ok.text
    from urllib.parse import quote

    assert client.get("/trajectories/" + quote(longest, safe=""), headers=AUTH).json()["id"] == longest


@pytest.mark.parametrize("tid", ["abc\n", "a\nb", "nul\x00", "esc\x1b[31m", "rtl\u202eid", "ls\u2028x"])
def test_an_id_with_a_control_character_is_a_422_and_a_newline_after_an_id_reads_no_other_trajectory(client, tid):
    """An id holding a newline was stored and could not be read back: the route's pattern stops at a newline, so
    GET /trajectories/a%0Ab was 'Not Found', and GET /trajectories/abc%0A answered trajectory 'abc' (the pattern's
    ``$`` matches before a final newline). Such ids (and other control characters) are refused, and a path that ends
    in a newline asks for the id with it."""
    import json
    import re
    from urllib.parse import quote

    from tests.service.helpers import trajectory

    plain = re.split("[\x00-\x1f\u2028\u202e]", tid)[0]  # the id up to its control character, stored
    assert client.post("/trajectories", content=json.dumps([trajectory(plain)]).encode(), headers=JSON).status_code \
        == 200
    r = client.post("/trajectories", content=json.dumps([trajectory(tid)]).encode(), headers=JSON)
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("record 0: id: a control character ("), r.json()
    assert "\n" not in r.json()["error"]
    back = client.get("/trajectories/" + quote(tid, safe=""), headers=AUTH)
    assert back.status_code == 404, back.text  # never the trajectory 'abc' for 'abc\n'


def test_a_newline_after_a_candidate_branch_reads_no_candidate(tmp_path):
    """GET /candidates/{branch} has the same path pattern as GET /trajectories/{id}, whose final-newline case was
    mended alone: /candidates/candidate/r2-x%0A answered candidate/r2-x (the pattern's ``$`` matches before a
    final newline), a branch no git ref can be. Now a 404 in one line; the branch itself still answers."""
    import json

    from evoharness.cli import main

    assert main(["init", str(tmp_path / "h")]) == 0
    edit = tmp_path / "edit.json"
    edit.write_text(json.dumps({"message": "Add a loop lesson", "targets": "F3.repeated_action",
                                "changes": [{"path": "lessons.md", "content": "- Never repeat a failing call.\n"}]}))
    assert main(["candidate", "new", "--harness", str(tmp_path / "h"), "--edit", str(edit), "--round", "2"]) == 0
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        assert c.get("/candidates/candidate/r2-add-a-loop-lesson", headers=AUTH).json()["branch"] \
            == "candidate/r2-add-a-loop-lesson"
        for path in ("candidate/r2-add-a-loop-lesson%0A", "candidate%2Fr2-add-a-loop-lesson%0A"):
            r = c.get("/candidates/" + path, headers=AUTH)
            assert r.status_code == 404, r.text
            assert r.json()["error"] == "no such candidate: 'candidate/r2-add-a-loop-lesson\\n'", r.json()


def test_the_fast_paths_id_pattern_finds_what_control_character_finds():
    import sys

    from evoharness.service.routes import _ID_CONTROL
    from evoharness.untrusted import control_character

    differ = [hex(c) for c in range(sys.maxunicode + 1)
              if (control_character(chr(c)) is None) == bool(_ID_CONTROL.search(chr(c)))]
    assert differ == []


def test_an_imported_id_error_names_the_imported_trajectory_not_a_record_of_the_body(client):
    """``?format=`` ids are the importer's: LangSmith runs (or OTLP spans) are grouped into trajectories, so the n-th
    trajectory is no n-th record of the body. A bad id in run 15 (the second trace) was told as 'record 1: id: ...'
    -- a record of the body that is fine. It names the imported trajectory, and how many the body made."""
    import json
    from pathlib import Path

    runs = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "langsmith" /
                       "runs.json").read_text())
    roots = [i for i, r in enumerate(runs) if not r.get("parent_run_id")]
    assert len(roots) == 2 and roots[1] > 1  # the second trace's root is not the body's record 1
    runs[roots[1]]["id"] = "ZZ\nQQ"
    r = client.post("/trajectories", params={"format": "langsmith"}, content=json.dumps(runs).encode(),
                    headers=JSON)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error.startswith("imported trajectory 1 of 2: id: a control character ('\\n') in it"), error
    assert error.endswith("(nothing stored)") and "\n" not in error
    assert r.json()["errors"][0]["id"] == "langsmith:ZZ\nQQ"
