"""Settings section `[harness_repo]`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class HarnessRepoConfig(BaseModel):
    """The harness repository (edit limits, notes ref, merge lock)."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    max_file_bytes: int = Field(256 * 1024, ge=1, description="largest file a candidate edit may write")
    max_edit_bytes: int = Field(1024 * 1024, ge=1, description="most bytes one edit may write in all")
    max_files: int = Field(50, ge=1, description="most files one edit may touch")
    notes_ref: str = Field(
        "evoharness", description="git notes ref (refs/notes/<name>) holding verdicts as JSON"
    )
    lock_timeout_s: float = Field(60.0, gt=0, description="how long to wait for the repo lock (merges, notes)")
