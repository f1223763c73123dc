"""Signal detectors, the first-signal labeller, composition, lever routing, ceiling."""

from evoharness.diagnosis.models import (
    CONTENT_CLASSES,
    PROCESS_CLASSES,
    FailureClass,
    Label,
    Lever,
    Signal,
)

__all__ = ["CONTENT_CLASSES", "PROCESS_CLASSES", "FailureClass", "Label", "Lever", "Signal"]
