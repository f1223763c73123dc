"""Settings section `[datasets]`."""

from __future__ import annotations

from pydantic import BaseModel


class DatasetsConfig(BaseModel):
    """The training-dataset queue and exporters. Each field carries a description."""
