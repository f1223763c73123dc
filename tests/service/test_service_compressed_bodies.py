"""POST /trajectories reads a gzip body (``Content-Encoding: gzip``), bounded by service.max_body_mb once inflated.

Until the sixteenth session the header was ignored: a gzipped OTLP export (what the OpenTelemetry Collector's
otlphttp exporter sends by default) was refused as "not JSON: binary content", and nothing said why."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app
from tests.service.helpers import trajectory

TOKEN = "s3cret-token-0123456789"
GZ_JSON = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json", "content-encoding": "gzip"}
OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "otlp" / "genai.jsonl"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("svc")
    settings = Settings.model_validate({"home": str(root / "home"), "run": {"harness": str(root / "h")},
                                        "service": {"loop": False, "max_body_mb": 0.25}})
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        yield c


def test_a_gzip_body_is_inflated_and_stored(client):
    batch = [trajectory(f"gz{i}", "process") for i in range(3)]
    r = client.post("/trajectories", content=gzip.compress(json.dumps(batch).encode()), headers=GZ_JSON)
    assert r.status_code == 200, r.text
    assert r.json() == {"received": 3, "stored": 3, "duplicates": 0, "conflicts": []}
    assert client.get("/trajectories/gz1").json()["id"] == "gz1"

    otlp = gzip.compress(OTLP.read_bytes())
    r = client.post("/trajectories", params={"format": "otlp", "source": "gzotlp"}, content=otlp,
                    headers={**GZ_JSON, "content-encoding": "x-gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["stored"] == 2
    plain = client.post("/trajectories", params={"format": "otlp", "source": "gzotlp"}, content=OTLP.read_bytes(),
                        headers={k: v for k, v in GZ_JSON.items() if k != "content-encoding"})
    # the same ids, inflated or not
    assert plain.json() == {"received": 2, "stored": 0, "duplicates": 2, "conflicts": []}

    two = [trajectory("gzA"), trajectory("gzB")]
    members = gzip.compress(json.dumps(two)[:40].encode()) + gzip.compress(json.dumps(two)[40:].encode())
    r = client.post("/trajectories", content=members, headers=GZ_JSON)  # `cat a.gz b.gz` is one gzip body
    assert r.json() == {"received": 2, "stored": 2, "duplicates": 0, "conflicts": []}


def test_an_inflated_body_over_the_limit_is_413_and_a_bad_encoding_is_one_line(client):
    bomb = gzip.compress(b"[" + b" " * (1024 * 1024) + b"]")  # 1 MiB of blanks in ~1 KiB: over 0.25 MiB inflated
    assert len(bomb) < 0.25 * 1024 * 1024
    r = client.post("/trajectories", content=bomb, headers=GZ_JSON)
    assert r.status_code == 413
    assert r.json()["error"] == "body over service.max_body_mb (0.25 MiB) once inflated (Content-Encoding: gzip)"

    r = client.post("/trajectories", content=b'[{"id": "x"}]', headers=GZ_JSON)  # said gzip, sent plain
    assert r.status_code == 422
    assert r.json()["error"].startswith("body is not gzip data (Content-Encoding: gzip): ")

    cut = gzip.compress(json.dumps([trajectory("cut")]).encode())[:-12]
    r = client.post("/trajectories", content=cut, headers=GZ_JSON)
    assert r.status_code == 422 and r.json()["error"].startswith("body is not gzip data")

    r = client.post("/trajectories", content=zlib.compress(b"[]"), headers={**GZ_JSON, "content-encoding": "br"})
    assert r.status_code == 422
    assert r.json()["error"] == ("body is sent with Content-Encoding: br, which this service does not read: "
                                 "send it uncompressed or as gzip")
    assert client.get("/trajectories/cut").status_code == 404
    assert client.get("/health").json()["status"] == "ok"


def test_zero_padding_after_the_last_member_is_ignored_as_gzip_does(client):
    """A gzip body padded with zero bytes (a block-padded write; `gzip -d` says "trailing zero bytes ignored") was
    refused as "body is not gzip data: Error -3 ... incorrect header check". Other trailing bytes still are."""
    batch = [trajectory("pad1"), trajectory("pad2")]
    padded = gzip.compress(json.dumps(batch).encode()) + b"\0" * 512
    assert gzip.decompress(padded) == json.dumps(batch).encode()  # what Python's own reader makes of it
    r = client.post("/trajectories", content=padded, headers=GZ_JSON)
    assert r.status_code == 200, r.text
    assert r.json() == {"received": 2, "stored": 2, "duplicates": 0, "conflicts": []}

    junk = gzip.compress(json.dumps([trajectory("pad3")]).encode()) + b"\0\0junk"
    r = client.post("/trajectories", content=junk, headers=GZ_JSON)
    assert r.status_code == 422 and r.json()["error"].startswith("body is not gzip data"), r.text
    assert client.get("/trajectories/pad3").status_code == 404


def test_a_gzip_body_is_inflated_off_the_event_loop(client, monkeypatch):
    """Inflating up to service.max_body_mb is CPU work (64 MiB by default); done in the request's coroutine it held up
    every other request, /health included, until it finished. It runs in a worker thread now."""
    import asyncio

    from evoharness.service import routes

    threads: list[bool] = []
    inflated = routes._inflated

    def spy(*args):
        try:
            asyncio.get_running_loop()
            threads.append(True)  # called on the event loop
        except RuntimeError:
            threads.append(False)
        return inflated(*args)

    monkeypatch.setattr(routes, "_inflated", spy)
    r = client.post("/trajectories", content=gzip.compress(json.dumps([trajectory("offloop")]).encode()),
                    headers=GZ_JSON)
    assert r.status_code == 200, r.text
    assert threads == [False]
