"""Mutated library-made samples of each format import or are refused with an InputError, never a traceback.

The 1,000-variant run is ``scripts/fuzz_importers.py``; this is its fast form for CI (hypothesis picks
the seeds, the script's mutator the damage)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoharness.errors import InputError
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory
from tests.modules import load_file

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_importers.py"
fuzz = load_file(SCRIPT, "fuzz_importers")

FORMATS = [f for f, samples in fuzz.SAMPLES.items() if samples]


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), auto=st.booleans())
def test_mutated_sample_imports_or_is_refused(tmp_path, fmt, seed, auto):
    rng = random.Random(seed)
    src = rng.choice(fuzz.SAMPLES[fmt])
    dst = tmp_path / src.name
    dst.write_bytes(fuzz.variant_bytes(src.read_bytes(), src.suffix == ".jsonl", rng))
    try:
        for t in load_paths([dst], None if auto else fmt):
            assert isinstance(t, Trajectory)
    except InputError as e:
        assert str(dst) in str(e)


def test_script_counts_variants_and_finds_no_traceback():
    for fmt in FORMATS:
        c = fuzz.fuzz(fmt, 20, seed=1)
        assert c["variants"] == 20 and c["tracebacks"] == 0 and c["imported"] + c["refused"] == 20


def test_the_default_samples_hold_no_file_of_a_held_out_set():
    """The `agentrx` format mutated two of tests/fixtures/data/agentrx_magentic_one's runs (a sample of a held-out
    test set) by default, and `who-and-when` took the first three files of a sorted walk over both Who&When sets
    (Algorithm-Generated only by the alphabet). Held-out samples are opt-in now (--held-out)."""
    held_out = ("agentrx_magentic_one", "Hand-Crafted")
    assert not [p for paths in fuzz.SAMPLES.values() for p in paths if any(h in str(p) for h in held_out)]
    assert all("Algorithm-Generated" in str(p) for p in fuzz.SAMPLES["who-and-when"]) and fuzz.SAMPLES["who-and-when"]
    assert fuzz.HELD_OUT["agentrx"] and all("agentrx_magentic_one" in str(p) for p in fuzz.HELD_OUT["agentrx"])
