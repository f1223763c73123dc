"""docs/service.md's API table names every field a row of ``GET /candidates`` carries: a user writing a client reads
the table, not the model. ``failure_class`` (the class the edit targets, its commit's Failure-Class trailer) was
served but not written there."""

from __future__ import annotations

from pathlib import Path

from evoharness.harness_repo.review import CandidateInfo

SERVICE_MD = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def test_the_candidates_row_names_every_field_a_candidate_carries():
    row = next(line for line in SERVICE_MD.read_text().splitlines() if line.startswith("| GET | `/candidates` |"))
    missing = [name for name in CandidateInfo.model_fields if f'"{name}"' not in row]
    assert missing == [], f"docs/service.md's GET /candidates row does not name {missing}"
