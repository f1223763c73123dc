"""Signal detectors, the first-signal labeller, composition, lever routing, ceiling."""

from evoharness.diagnosis.models import FailureClass, Label, Lever, Signal

__all__ = ["FailureClass", "Label", "Lever", "Signal"]
