"""A name written as one lower-case word with "or" after its object (mends 96fde58): ``getvendorupdate``,
``geterrorupdate``, ``getsensorreset`` were read as get + vendor / error / sensor + "or" + a write verb, writes (a
look-up with no yes a confirmation-policy violation), where before 96fde58 every such ``get...`` name read. Many nouns
end in "or" (vendor, error, color, sensor, monitor, author, editor); "or" opens a clause that acts right after the
opening verb only (``getorcreateuser``)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.detectors import reads_by_name


@pytest.mark.parametrize("name", ["getvendorupdate", "geterrorupdate", "getsensorreset", "getmonitorchange",
                                  "getcolorchange", "listauthorupdate", "fetchdoctorupdate"])
def test_a_noun_ending_in_or_before_a_write_verb_still_reads(name):
    assert reads_by_name(name)


@pytest.mark.parametrize("name", ["getorcreateuser", "getpriceandchange", "fetchreportthenupload", "getandsetvalue"])
def test_a_clause_that_acts_still_writes(name):
    assert not reads_by_name(name)
