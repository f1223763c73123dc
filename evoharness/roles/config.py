"""Settings section `[roles]`."""

from __future__ import annotations

from pydantic import BaseModel


class RolesConfig(BaseModel):
    """The analyst, critic and engineer roles. Each field carries a description."""
