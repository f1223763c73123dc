"""Fixtures the dataset tests share."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller


@pytest.fixture
def labelled(monkeypatch) -> list[str]:
    """The ids of the trajectories an export ran the labeller on."""
    seen: list[str] = []
    real = Labeller.first_signal

    def counting(self, traj):
        seen.append(traj.id)
        return real(self, traj)

    monkeypatch.setattr(Labeller, "first_signal", counting)
    return seen
