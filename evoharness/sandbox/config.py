"""Settings section `[sandbox]`."""

from __future__ import annotations

from pydantic import BaseModel


class SandboxConfig(BaseModel):
    """Sandboxes and executors (backend, limits, parallelism). Each field carries a description."""
