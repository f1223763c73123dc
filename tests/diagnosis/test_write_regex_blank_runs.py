"""The write patterns read a long run of blank lines in linear time. A model that degenerates into blank lines inside
a code fence it never closes (its reply cut at the token limit, then rejected for its format) hands the whole rest of
the reply (up to 100,000 characters) to ``_rejected_patch_write``; the patterns' ``(?:^|\\n|...)\\s*`` tried every
line start and ran to the end of the blank run from each: quadratic (20,000 blank lines: IN_PLACE_EDIT 5.8 s,
MUTATING_COMMAND 1.6 s a search)."""

from __future__ import annotations

import random
import re
import time

import pytest

from evoharness.diagnosis.detectors import IN_PLACE_EDIT, MUTATING_COMMAND


@pytest.mark.parametrize("pattern", [IN_PLACE_EDIT, MUTATING_COMMAND], ids=["in_place", "mutating"])
def test_a_long_run_of_blank_lines_is_searched_in_linear_time(pattern):
    text = "```bash\n" + "\n" * 60_000 + "echo done"
    start = time.process_time()
    assert pattern.search(text) is None
    assert time.process_time() - start < 1.5
    assert pattern.search("```bash\n" + "\n" * 60_000 + "  edit 3:4\n")  # what follows the run is still read
    assert pattern.search("x;\n\n \n  patch -p1 < fix.diff")


def test_the_same_texts_match_as_with_any_whitespace_after_a_line_start():
    """The patterns as they were (``\\s*`` after a line start) and as they are find a match in the same texts: a
    newline inside the blank run is itself a line start."""
    def widened(p: re.Pattern[str]) -> re.Pattern[str]:
        return re.compile(p.pattern.replace("[^\\S\\n]*", "\\s*"))

    rnd = random.Random(5)
    words = ["\n", " ", "\t", "\r", "\\n", '"command":"', "edit 1:2", "create a.py", "patch -p1", "sudo ", ";", '"',
             "x", "sed", "-i", "str_replace", "git apply", "echo"]
    for pattern in (IN_PLACE_EDIT, MUTATING_COMMAND):
        old = widened(pattern)
        for _ in range(20_000):
            text = "".join(rnd.choice(words) for _ in range(rnd.randint(0, 8)))
            assert (pattern.search(text) is None) == (old.search(text) is None), repr(text)


@pytest.mark.parametrize("command", [
    '{"command":"sed -n \'1,10p\' a.py\\ngrep -i foo b.py"}',  # canonical JSON: the line break escaped
    '{"command":"sed -n 1,10p a.py\\nls -li"}',
    "sed -n 1p a.py\ngrep -i x b.py",
])
def test_a_read_only_sed_is_no_edit_for_an_option_on_a_later_line(command):
    """'sed ... -i' was looked for across line ends: a sed that prints, then a grep -i or ls -li on the next line of the
    same command, was an in-place edit (a write: F4.first_write's target, the loop rule's progress)."""
    assert not IN_PLACE_EDIT.search(command) and not MUTATING_COMMAND.search(command)


@pytest.mark.parametrize("command", ['{"command":"sed -n 1p a.py\\nsed -i s/a/b/ a.py"}', "sed -e s/a/b/ -i a.py",
                                    '{"command":"cd /x && sed -E -i.bak \'s/a/b/\' a.py"}',
                                    "perl -p -i -e s/a/b/ a.py"])
def test_an_in_place_sed_is_still_an_edit(command):
    assert IN_PLACE_EDIT.search(command) and MUTATING_COMMAND.search(command)
