"""Tool names written as one lower-case word (``detectors._joined_words``, issue 13): the "and" inside a noun
(``getcommandupdate``: get + command + update, no "comm and update") and a write verb that a reading verb opens
(``isolatehost``: isolate, not "is" + "olatehost") were misread."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.detectors import reads_by_name


@pytest.mark.parametrize("name", ["getcommandupdate", "getcolorbrandupdate", "listdemandforecastupdate",
                                  # (read before as well: guards of the "or" and noun-start rules)
                                  "getsensorreset", "getcolorsettingspage", "getbrandupdate", "isvalid"])
def test_a_noun_ending_in_and_before_a_verb_still_reads(name):
    """``getcommandupdate`` was get + "comm" + and + update: a look-up read as a write (under a confirmation policy, a
    violation with no yes)."""
    assert reads_by_name(name)


@pytest.mark.parametrize("name", ["isolatehost", "isolatedevice", "isolate_host",
                                  # (wrote before as well: a conjunction after such a noun still opens a clause)
                                  "getcommandandupdate", "getpriceandchange", "getitemsandupdate"])
def test_a_write_verb_that_a_reading_verb_opens_writes(name):
    """``isolatehost`` opened with the reading verb "is" (the longest verb of the vocabulary that opens it): it cuts
    a host off the network, a write."""
    assert not reads_by_name(name)
