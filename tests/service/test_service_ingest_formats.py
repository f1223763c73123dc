"""POST /trajectories takes any importable format (`?format=`), and points raw records to it."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main
from evoharness.traces.models import Trajectory

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
REPO = Path(__file__).resolve().parents[2]


def test_other_formats_are_imported_and_raw_records_get_a_hint(serve):
    tau = json.loads((SAMPLES / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())
    c = serve(service={"loop": False, "max_batch": 10}).client()

    r = c.post("/trajectories", json=tau[:3])  # canonical by default: says which format they are
    assert r.status_code == 422
    assert "these look like openai records: POST /trajectories?format=openai" in r.json()["error"]

    r = c.post("/trajectories", params={"format": "openai", "source": "airline"}, json=tau[:3])
    assert r.status_code == 200 and r.json() == {"received": 3, "stored": 3, "duplicates": 0, "conflicts": []}
    stored = c.get(f"/trajectories/airline:{tau[0]['task_id']}:{tau[0]['trial']}").json()
    assert stored["score"] == tau[0]["reward"] and stored["messages"][0]["role"] == tau[0]["traj"][0]["role"]
    again = c.post("/trajectories", params={"format": "auto", "source": "airline"}, json=tau[:4]).json()
    assert again == {"received": 4, "stored": 1, "duplicates": 3, "conflicts": []}

    r = c.post("/trajectories", params={"format": "openai"}, json=[{"traj": "not a list", "reward": 1}])
    assert r.status_code == 422 and "record 0" in r.json()["error"] and "nothing stored" in r.json()["error"]
    r = c.post("/trajectories", params={"format": "opneai"}, json=tau[:1])
    assert r.status_code == 422 and "unknown format 'opneai'" in r.json()["error"]
    r = c.post("/trajectories", params={"format": "openai"}, json=tau[:11])
    assert r.status_code == 422 and "more than 10 trajectories" in r.json()["error"]
    assert c.get("/composition").json()["n"] == 4


def test_the_published_schema_is_the_models(capsys):
    assert main(["schema", "trajectory"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["required"]) == {n for n, f in Trajectory.model_fields.items() if f.is_required()}
    assert printed == json.loads((REPO / "docs" / "trajectory.schema.json").read_text()), \
        "docs/trajectory.schema.json is stale: evoharness schema trajectory > docs/trajectory.schema.json"
    assert main(["schema", "edit"]) == 0 and "changes" in json.loads(capsys.readouterr().out)["properties"]
    assert main(["schema", "trajectori"]) == 2
    assert capsys.readouterr().err == "error: schema: unknown record 'trajectori'; did you mean trajectory?\n"
    assert main(["schema", "traj"]) == 2  # a prefix, which difflib's ratio (0.57) does not reach
    assert capsys.readouterr().err == "error: schema: unknown record 'traj'; did you mean trajectory?\n"
    assert main(["schema", "none"]) == 2
    assert capsys.readouterr().err == "error: schema: unknown record 'none'; valid records: trajectory, edit, label\n"
