"""Canonical trajectories: the schema, a JSONL store and importers."""

from evoharness.traces.models import Event, EventType, Split, Termination, Trajectory, Usage

__all__ = ["Event", "EventType", "Split", "Termination", "Trajectory", "Usage"]
