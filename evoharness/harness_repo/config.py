"""Settings section `[harness_repo]`."""

from __future__ import annotations

from pydantic import BaseModel


class HarnessRepoConfig(BaseModel):
    """The harness repository (manifest defaults, edit limits, merge lock).

    Each field carries a description.
    """
