"""Settings section `[agent]`."""

from __future__ import annotations

from pydantic import BaseModel


class AgentConfig(BaseModel):
    """The reference agent and the scripted models. Each field carries a description."""
