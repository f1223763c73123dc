"""Settings section `[verification]`."""

from __future__ import annotations

from pydantic import BaseModel


class VerificationConfig(BaseModel):
    """Verification (noise model, strategies, gates, budget, cache). Each field carries a description."""
