"""The service on hostile bodies and ids: 413 over the size limit, 4xx (never 500) on bad input."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path):
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False, "max_body_mb": 1}})
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        yield c


def _traj(**kw):
    return {"id": "t1", "task_id": "x", "messages": [{"role": "user", "content": "hi"}], **kw}


HOSTILE_BODIES = {
    "deep_list": b"[" * 100_000 + b"]" * 100_000,
    "deep_in_record": json.dumps([_traj(meta={"a": "__DEEP__"})]).replace('"__DEEP__"', "[" * 50_000 + "]" * 50_000)
    .encode(),
    "big_int": b"[" + b"1" * 5000 + b"]",
    "big_int_in_record": json.dumps([_traj(score="__N__")]).replace('"__N__"', "1" * 5000).encode(),
    "not_utf8": b"\xff\xfe[\x00{",
    "nul": b"[{\"id\": \"\x00\"}]",
    "object": b"{}",
    "string": b"\"x\"",
    "nan": b"[{\"id\": \"a\", \"task_id\": \"b\", \"score\": NaN, \"messages\": []}]",
    "huge_float": b"[{\"id\": \"a\", \"task_id\": \"b\", \"score\": 1e999, \"messages\": []}]",
    "wrong_types": json.dumps([_traj(messages="nope", events=[1], usage=[])]).encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
def test_hostile_bodies_are_4xx(client, name):
    r = client.post("/trajectories", content=HOSTILE_BODIES[name], headers=AUTH)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert "error" in r.json()


def test_over_the_limit_is_413_with_or_without_a_content_length(client):
    big = b"[" + b" " * (2 * 1024 * 1024) + b"]"
    assert client.post("/trajectories", content=big, headers=AUTH).status_code == 413

    def chunks():  # chunked: no content-length header
        for _ in range(40):
            yield b" " * (64 * 1024)

    assert client.post("/trajectories", content=chunks(), headers=AUTH).status_code == 413
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("path", ["/trajectories/%00", "/trajectories/" + "a" * 5000, "/runs/..%2f..%2fetc",
                                  "/runs/" + "x" * 300, "/candidates/..%2f..", "/candidates/%ff%fe",
                                  "/candidates/candidate%2fnope", "/composition?last=-1", "/composition?last=x",
                                  "/runs/run-x/report/..%2f..%2fsettings.json"])
def test_hostile_ids_are_4xx(client, path):
    r = client.get(path, headers=AUTH)
    assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:300])



# path, the body with a key twice in one object, that key; the body with its first copy removed is a control
DUPLICATE_KEYS = {
    "a record's field": ("/trajectories", '[{"id": "t1", "task_id": "x", "score": 0, "score": 1, "messages": []}]',
                         "score"),
    "a message's field": ("/trajectories", '[{"id": "t1", "task_id": "x", "messages": [{"role": "user", '
                                           '"content": "a", "content": "b"}]}]', "content"),
    "a new run's id": ("/runs", '{"run_id": "run-a", "run_id": "run-b"}', "run_id"),
    "an approval's candidate": ("/runs/run-x/approve", '{"candidate": "a", "candidate": "b"}', "candidate"),
    "an export's filter": ("/datasets/export", '{"source": "all", "source": "content"}', "source"),
}


@pytest.mark.parametrize("name", list(DUPLICATE_KEYS))
def test_a_body_with_a_key_twice_in_one_object_is_422_naming_it(client, name):
    """`{"score": 0, "score": 1}` was taken as score 1 (the last wins in Python's and pydantic's JSON readers; others
    keep the first), so what the service stored or did was not what a proxy or a log in front of it had read. Now such
    a body is refused, naming the key, and nothing is stored or started."""
    path, body, key = DUPLICATE_KEYS[name]
    headers = {**AUTH, "Content-Type": "application/json"}
    r = client.post(path, content=body.encode(), headers=headers)
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert f"the key '{key}' twice in one object" in r.json()["error"], r.text[:300]
    assert client.get("/trajectories/t1").status_code == 404
    assert client.get("/runs").json()["runs"] == [], client.get("/runs").text[:300]
    first = body.index(f'"{key}": ')
    once = body[:first] + body[body.index(f'"{key}": ', first + 1):]  # the first copy (and its comma) removed
    assert "twice in one object" not in client.post(path, content=once.encode(), headers=headers).text


@pytest.mark.parametrize("path", ["/runs", "/runs/run-x/approve", "/datasets/export"])
def test_a_body_model_over_the_limit_is_413_with_or_without_a_content_length(client, path):
    """Only POST /trajectories had a size limit: the routes whose body is a model (a new run, a review decision, an
    export) read whatever came, all of it in memory before a field was checked, so a 2 MiB body under a 1 MiB
    service.max_body_mb was read whole and answered 422, and a client with the token could make the service hold
    gigabytes. Now they are 413 as /trajectories is, nothing started, and the service goes on."""
    big = b'{"reason": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    headers = {**AUTH, "Content-Type": "application/json"}
    r = client.post(path, content=big, headers=headers)
    assert r.status_code == 413, (r.status_code, r.text[:300])
    assert "max_body_mb" in r.json()["error"]

    def chunks():  # chunked: no content-length header
        yield b'{"reason": "'
        for _ in range(40):
            yield b"x" * (64 * 1024)
        yield b'"}'

    r = client.post(path, content=chunks(), headers=headers)
    assert r.status_code == 413, (r.status_code, r.text[:300])
    assert client.get("/runs").json()["runs"] == []
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("body", [b'{"reason": "\\ud83d"}', b'{"reason": "\\ude00 \\ud83d\\ude00"}',
                                  b'{"reason": "\\\\ud83d"}', b'{"reason": "a", "reason": "\\ud83d"}',
                                  b'{"reason": "\xff"}', b'[' * 100_000])
def test_a_body_models_json_is_read_as_the_ingest_reads_it(body):
    """The routes whose body is a model parsed it with their own ``json.loads`` beside ``jsontext.loads(unique=True)``
    (POST /trajectories): half a UTF-16 surrogate pair was U+FFFD in one and kept in the other (pydantic then refused
    it as 'unable to parse raw data as a unicode string'). One reading now: the same body, the same value or error."""
    import asyncio

    from evoharness.service.routes import _UniqueKeysRequest
    from evoharness.traces import jsontext

    def outcome(read):
        try:
            return read()
        except Exception as e:  # noqa: BLE001 -- the error is the outcome compared
            return type(e), str(e)

    request = _UniqueKeysRequest({"type": "http", "method": "POST", "headers": []})
    request._body = body
    assert outcome(lambda: asyncio.run(request.json())) == outcome(lambda: jsontext.loads(body, unique=True))


def test_an_infinite_wall_time_is_refused_not_stored_where_it_breaks_every_export(client):
    """usage.wall_seconds 1e999 was stored (200) as null, which the store could not read back: GET of the trajectory and
    every later export of ingested trajectories answered 500 from then on (scripts/fuzz_service.py --seed 4: 39 of
    its exports). Now it is a 422 naming the field, nothing stored, and the next export works."""
    body = json.dumps([_traj(id="inf", usage={"wall_seconds": "__INF__"})]).replace('"__INF__"', "1e999").encode()
    r = client.post("/trajectories", content=body, headers=AUTH)
    assert r.status_code == 422 and "1e999, a number JSON does not have" in r.json()["error"], r.text
    assert client.get("/trajectories/inf").status_code == 404
    assert client.post("/trajectories", json=[_traj(id="fine")], headers=AUTH).status_code == 200
    r = client.post("/datasets/export", json={"source": "all", "render_under": "trajectory"}, headers=AUTH)
    assert r.status_code == 200, r.text


def test_a_null_wall_time_stored_before_the_refusal_reads_back_as_0(client):
    """A store from before 9455885 can hold a row whose usage.wall_seconds was an infinity, written as null (as this
    writes it: the old validation took the infinity). Reading it back failed, so GET of the trajectory and every
    export of the store answered 500, and the daemon's sweep of content failures stopped at it. Now null reads as 0.0
    (not measured) on every read: the row, the export, the sweep and the queue it fills."""
    from evoharness.traces.models import Trajectory, Usage

    old = Trajectory.model_validate(_traj(id="old", messages=[{"role": "user", "content": "q"},
                                                              {"role": "assistant", "content": "a"}],
                                          final_answer="a", score=0.1))  # delivered, poor: a content failure
    old.usage = Usage.model_construct(steps=1, prompt_tokens=0, completion_tokens=0, wall_seconds=float("inf"))
    store = client.app.state.ingest
    assert store.add([old]).stored == 1
    body = store._reader().execute("SELECT body FROM trajectories WHERE id = 'old'").fetchone()[0]
    assert '"wall_seconds":null' in body
    r = client.get("/trajectories/old", headers=AUTH)
    assert r.status_code == 200 and r.json()["usage"]["wall_seconds"] == 0.0, r.text[:300]
    r = client.post("/datasets/export", json={"source": "all", "render_under": "trajectory"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["records"] == 1, r.text[:300]
    # the daemon's own poll sweeps in the background whatever service.loop says, so it may have queued the row
    # first (a clean-clone CI saw 0 here under load); either way the row is queued once, as the export shows
    assert client.app.state.daemon.sweep_ingested() in (0, 1)
    assert client.app.state.daemon.sweep_ingested() == 0  # marked swept: never queued twice
    r = client.post("/datasets/export", json={"name": "queued", "render_under": "trajectory"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["records"] == 1, r.text[:300]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("where", ["meta", "message", "tool arguments"])
def test_a_number_json_does_not_have_is_refused_not_stored_as_null(client, value, where):
    """NaN, Infinity or 1e999 in a free-form value (meta, a message's field, a tool call's arguments) was taken (200)
    and stored as null: GET gave back another trajectory than the one sent, and nothing said so. Now the body is a 422
    naming the number, and nothing is stored; a finite number there is kept as sent."""
    def body(v):
        t = _traj(id="n", meta={"loss": "__V__"} if where == "meta" else {})
        if where == "message":
            t["messages"][0]["weight"] = "__V__"
        elif where == "tool arguments":
            t["messages"].append({"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": "__V__"}}}]})
        return json.dumps([t]).replace('"__V__"', v).encode()

    r = client.post("/trajectories", content=body(value), headers=AUTH)
    assert r.status_code == 422, r.text[:300]
    error = r.json()["error"]
    assert f"body holds {value}, a number JSON does not have" in error and "\n" not in error, error
    assert client.get("/trajectories/n").status_code == 404
    assert client.post("/trajectories", content=body("1.5"), headers=AUTH).status_code == 200
    got = client.get("/trajectories/n").json()
    kept = {"meta": lambda: got["meta"]["loss"], "message": lambda: got["messages"][0]["weight"],
            "tool arguments": lambda: got["messages"][1]["tool_calls"][0]["function"]["arguments"]["x"]}[where]()
    assert kept == 1.5, got


@pytest.mark.parametrize("fmt", ["openhands", "otlp", "nebius-swe-agent", "auto"])
@pytest.mark.parametrize("hostile", ["[" * 5000 + "]" * 5000, "1" * 5000])
def test_a_format_body_of_json_lines_too_deep_or_with_a_long_integer_is_422(client, fmt, hostile):
    """POST /trajectories?format=NAME with JSON lines, one of them nested 5,000 deep or holding a 5,000-digit integer,
    answered 500: load_bytes' look at whether the body is one JSON document caught only a decode error, not the
    RecursionError or ValueError of those (found by scripts/fuzz_service.py's ?format= cases). Now it is read as
    JSON lines and the importer names the line: a 422 of one line, nothing stored."""
    body = (json.dumps({"instance_id": "x", "deep": "__H__"}).replace('"__H__"', hostile) + "\n"
            + json.dumps({"instance_id": "y"}) + "\n").encode()
    r = client.post(f"/trajectories?format={fmt}", content=body, headers=AUTH)
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert "\n" not in r.json()["error"]
    assert client.get("/composition", headers=AUTH).json()["total"] == 0
