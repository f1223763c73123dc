"""POST /datasets/export says which asked-for tasks no record was written of, as `dataset export --task` warns."""

from __future__ import annotations

from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.service.app import create_app
from tests.service.helpers import trajectory

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_an_asked_for_task_that_gave_no_record_is_named(tmp_path):
    """A typo in `tasks` wrote an empty export (records 0) with nothing to say why; the CLI warns for it."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        stored = c.post("/trajectories", json=[trajectory(f"e{i}", "healthy", task=f"t{i}") for i in range(3)],
                        headers=AUTH)
        assert stored.status_code == 200, stored.text
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory",
                                             "tasks": ["t1", "t-1", "t2", "t-1"]}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 2 and r.json()["tasks_without_records"] == ["t-1"], r.json()
        every = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory"}, headers=AUTH)
        assert every.json()["records"] == 3 and every.json()["tasks_without_records"] == []


def test_identical_records_are_skipped_unless_kept_and_counted(tmp_path):
    """The same run ingested twice under two ids: one row, `duplicate_records` 1 (`keep_duplicates` writes both)."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    run = trajectory("e1", "healthy", task="t1")
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=[run, {**run, "id": "e1-again"}], headers=AUTH).status_code == 200
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory"}, headers=AUTH)
        assert r.json()["records"] == 1 and r.json()["duplicate_records"] == 1, r.json()
        assert r.json()["skipped"] == {"duplicate_record": 1}
        kept = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory",
                                                "keep_duplicates": True}, headers=AUTH)
        assert kept.json()["records"] == 2 and kept.json()["duplicate_records"] == 1, kept.json()


def test_a_task_no_utf8_can_hold_and_a_placebo_that_is_no_boolean_are_422(tmp_path):
    """`"tasks": ["\\udc80"]` (half a surrogate pair, valid JSON) was a 500 and a traceback in the log (the manifest
    could not be written), leaving the client's connection reset; `"placebo": "yes"` wrote a placebo set."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    NO_BOOL = "Input should be a valid boolean"
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        assert c.post("/trajectories", json=[trajectory("e1", "healthy")], headers=AUTH).status_code == 200
        for body, error in (('{"source": "healthy", "tasks": ["t", "\\udc80"]}',
                             "body.tasks.1: '\\udc80' holds half a UTF-16 surrogate pair, which no task id in UTF-8 "
                             "can hold"),
                            ('{"source": "healthy", "placebo": "yes"}', f"body.placebo: {NO_BOOL}"),
                            ('{"source": "healthy", "placebo": 1}', f"body.placebo: {NO_BOOL}"),
                            ('{"source": "healthy", "keep_duplicates": "no"}', f"body.keep_duplicates: {NO_BOOL}")):
            r = c.post("/datasets/export", content=body, headers={**AUTH, "Content-Type": "application/json"})
            assert r.status_code == 422 and r.json()["error"] == error, (body, r.status_code, r.text)
        assert not (tmp_path / "home" / "exports").exists() or not any((tmp_path / "home" / "exports").iterdir())
