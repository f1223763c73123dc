"""The promises a detector may make to the labeller (``multi_agent_only``, ``reads_friction``, ``skips_healthy``,
``bounded``) are part of the ``Detector`` protocol, named in ``PROMISES`` and read through ``promises``: 5fb60b8's
``bounded`` was an attribute only the labeller's ``getattr`` and one detector knew of, so a detector that set it
without taking ``stop`` would have been called with a keyword it does not take."""

from __future__ import annotations

import inspect

from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.detectors import PROMISES, promises


def _flags(detector) -> dict[str, bool]:
    return {name: value for cls in type(detector).__mro__ for name, value in vars(cls).items()
            if isinstance(value, bool) and not name.startswith("_")}


def test_every_flag_a_detector_sets_is_a_promise_the_protocol_names_and_is_read_as_set():
    made = {name for d in default_catalogue() for name in _flags(d)}
    assert made == set(PROMISES)  # each promise is made by some detector, and no flag is one the labeller ignores
    for d in default_catalogue():
        assert {name for name in PROMISES if promises(d, name)} == {n for n, v in _flags(d).items() if v}, d.id


def test_a_bounded_detector_takes_stop_and_without_it_reads_as_before():
    bounded = [d for d in default_catalogue() if promises(d, "bounded")]
    assert [d.id for d in bounded] == ["F1.unbacked_claim"]
    for d in bounded:
        stop = inspect.signature(d.detect).parameters["stop"]
        assert stop.default is None and stop.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, d.id
