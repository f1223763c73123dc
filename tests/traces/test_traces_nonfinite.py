"""NaN, Infinity and numbers past a double (1e999) in what `import` reads and the service's `?format=` bodies.

Chosen (twenty-fifth session) and documented in docs/traces.md: in a field with a schema (a canonical ``score``,
``usage.wall_seconds``) such a number is refused, one ``error:`` line; in a free-form value (a message's own keys,
``meta``, another format's extra fields) it is read as Python's ``json`` reads it and written as ``null``, so every
canonical file `import` writes and every row the service stores is strict JSON (what the service's canonical ``POST
/trajectories`` takes, and jq or JavaScript read). Not refused there: third-party writers (Python's ``json.dumps``
by default) put NaN in metrics and metadata, and refusing would cost the read path every file goes through."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from evoharness.cli import main
from evoharness.config import Settings
from evoharness.service.app import create_app

LINE = ('{"id": "n1", "task_id": "t", "messages": [{"role": "user", "content": "hi", "x": NaN}, '
        '{"role": "assistant", "content": "ok"}], "final_answer": "ok", "score": 1.0, '
        '"meta": {"nan": NaN, "inf": Infinity, "ninf": -Infinity, "big": 1e999, "kept": 1.5}}')
TOKEN = "nonfinite-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _strict(text: str) -> object:
    """``json.loads`` that refuses NaN, Infinity and 1e999, as a strict reader does."""
    def refuse(value):
        raise ValueError(f"not strict JSON: {value}")

    return json.loads(text, parse_constant=refuse,
                      parse_float=lambda s: float(s) if abs(float(s)) != float("inf") else refuse(s))


def test_import_writes_a_free_form_nan_or_infinity_as_null_and_the_file_reads_back(tmp_path: Path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(LINE + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["import", str(src), "--out", str(out)]) == 0
    written = _strict(out.read_text().splitlines()[0])
    assert written["meta"] == {"nan": None, "inf": None, "ninf": None, "big": None, "kept": 1.5}
    assert written["messages"][0] == {"role": "user", "content": "hi", "x": None}
    again = tmp_path / "again.jsonl"
    assert main(["import", str(out), "--out", str(again)]) == 0  # the file written is read as it was written
    assert _strict(again.read_text()) == written


def test_a_nan_where_the_schema_says_a_number_is_one_error_line(tmp_path: Path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(LINE.replace('"score": 1.0', '"score": NaN') + "\n")
    capsys.readouterr()
    assert main(["import", str(src), "--out", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {src}:line 1: not a canonical trajectory: score: Input should be a finite number"]
    assert not (tmp_path / "out.jsonl").exists()


def test_the_service_stores_a_format_bodys_nan_as_null_and_refuses_it_in_a_canonical_body(tmp_path: Path):
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        r = c.post("/trajectories?format=auto", content=LINE.encode(), headers=AUTH)
        assert r.status_code == 200 and r.json()["stored"] == 1, r.text
        back = c.get("/trajectories/n1", headers=AUTH)
        assert _strict(back.text)["meta"] == {"nan": None, "inf": None, "ninf": None, "big": None, "kept": 1.5}
        listed = c.post("/trajectories", content=f"[{LINE.replace('n1', 'n2')}]".encode(), headers=AUTH)
        assert listed.status_code == 422 and listed.json()["error"].startswith("body holds NaN, a number JSON "
                                                                               "does not have"), listed.text
        assert c.get("/trajectories/n2", headers=AUTH).status_code == 404
