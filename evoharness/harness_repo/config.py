"""Settings section `[harness_repo]`."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# what `git check-ref-format` refuses in a ref name: a control character, space, ~ ^ : ? * [ \, '..', '@{'
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{")


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

    @field_validator("notes_ref")
    @classmethod
    def _a_ref_name(cls, name: str) -> str:
        """A name git takes under refs/notes/ (``git check-ref-format``'s rules), with ``-tests`` after it too
        (``verification/retests``): until 2026-12-06 "/" was taken and `verify` ended in a GitCommandError
        traceback writing refs/notes//-tests."""
        parts = name.split("/")
        if (not name or name == "@" or _REF_BAD.search(name) or name.endswith(".")
                or any(not part or part.startswith(".") or part.endswith(".lock") for part in parts)):
            raise ValueError(f"{name!r} is no git ref name (refs/notes/NAME): use letters, digits, '-', '_' and '/' "
                             "between non-empty parts, as 'evoharness'")
        return name
