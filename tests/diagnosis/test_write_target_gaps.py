"""Writes the first-write rule did not read as writes of the file they target (until 2026-12-05): code formatters
run on the file or its folder, ``ed`` scripts, ``find ... -exec sed -i``, ``dd of=``, ``rsync`` / ``ln -sf`` onto it,
and Python's ``shutil`` copies / ``os.replace`` onto it. Each shape both ways, as in test_first_write_target.py: the
write of the patched file is located (step 1), its look-alike passes on to the later ``sed -i`` (step 3)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import changes_state
from evoharness.diagnosis.write_targets import python_writes, shell_writes
from evoharness.traces.builder import TraceBuilder
from tests.diagnosis.test_first_write_target import _first_write_step

WRITES = [
    "black pkg/core.py",
    "black pkg/",
    "python -m black .",
    "isort pkg/core.py && python reproduce.py",
    "autopep8 -i pkg/core.py",
    "autopep8 --in-place --aggressive /testbed/pkg/core.py",
    "yapf -i pkg/core.py",
    "ruff format pkg",
    "ed -s pkg/core.py <<'EOF'\n/return a/s/a/b/\nw\nq\nEOF",
    "printf '%s\\n' '/return a/s/a/b/' 'wq' | ed -s pkg/core.py",
    "find . -name core.py -exec sed -i 's/a/b/' {} \\;",
    "find pkg -name '*.py' -exec perl -pi -e 's/a/b/' {} +",
    "find /testbed/pkg -type f -name 'c*.py' -exec sed -i 's/a/b/' {} \\;",
    "dd if=/tmp/core_fixed.py of=pkg/core.py",
    "rsync -a /tmp/fixed/core.py pkg/",
    "ln -sf /tmp/core_fixed.py pkg/core.py",
    "python -c \"import shutil; shutil.copy('/tmp/core_fixed.py', 'pkg/core.py')\"",
    "python - <<'EOF'\nimport os\nnew = 'pkg/core.py.new'\nopen(new, 'w').write('x = 1')\n"
    "os.replace(new, 'pkg/core.py')\nEOF",
    "python - <<'EOF'\nfrom shutil import copyfile\ncopyfile('/tmp/core_fixed.py', 'pkg/core.py')\nEOF",
]

NAMES_ONLY = [
    "black --check pkg/core.py",
    "black --diff pkg/",
    "isort --check-only pkg/core.py",
    "autopep8 pkg/core.py",  # prints the fixed file
    "autopep8 --diff pkg/core.py",
    "ruff check pkg/core.py",
    "ed -s pkg/core.py <<< ',p'",  # prints it
    "find . -name core.py -exec grep -n a {} +",
    "find pkg -name core.py -exec sed -n '1,5p' {} \\;",
    "find docs -name '*.py' -exec sed -i 's/a/b/' {} \\;",  # another folder
    "find . -name 'test_*.py' -exec sed -i 's/a/b/' {} \\;",  # other file names
    "dd if=pkg/core.py of=/tmp/core.bak",
    "rsync -a pkg/core.py /tmp/",
    "ln -s pkg/core.py /tmp/link.py",
    "python -c \"import shutil; shutil.copy('pkg/core.py', '/tmp/core.bak')\"",
    "python -c \"s = open('pkg/core.py').read(); print(s.replace('a', 'b'))\"",
]


@pytest.mark.parametrize("first", WRITES)
def test_a_command_that_writes_the_patched_file_is_the_first_write(first):
    assert _first_write_step(first) == 1


@pytest.mark.parametrize("first", NAMES_ONLY)
def test_a_command_that_only_names_the_patched_file_is_no_write_to_it(first):
    assert _first_write_step(first) == 3


@pytest.mark.parametrize("command", ["black pkg/core.py", "ed -s f.py <<'EOF'\nw\nEOF", "dd if=a of=b",
                                     "rsync a b", "ln -sf a b", "find . -name '*.pyc' -delete",
                                     "python -c \"import os; os.replace('a', 'b')\""])
def test_these_commands_change_state(command):
    """A write for the repeat rule too: a loop's repeats with one of these between them made progress."""
    t = TraceBuilder("t").call("bash", {"command": command}, result="").deliver("ok").build(score=0.0)
    assert changes_state(TraceView(t).calls[0])


def test_a_move_takes_the_source_away_and_a_folder_destination_keeps_the_name():
    assert python_writes("import shutil\nshutil.move('pkg/core.py', '/tmp/')") == (["/tmp/core.py", "pkg/core.py"],
                                                                                  False)
    assert python_writes("import shutil\nshutil.copy(src, dst)") == ([], True)
    # a str.replace is no file operation, and code that does not parse is unknown only where it writes some way
    assert python_writes("s = open('a.py').read()\nprint(s.replace('x', 'y'))") == ([], False)
    assert python_writes("s = open(p).read(\nprint(s.replace(old, new))") == ([], False)
    assert python_writes("s = open('a.py').read(\nshutil.copy('/tmp/x', 'a.py')") == ([], True)
    assert shell_writes("find . -name '*.pyc' -delete").writes("pkg/__pycache__/core.pyc")
    assert not shell_writes("find . -name '*.pyc' -delete").writes("pkg/core.py")
    assert shell_writes("cd pkg && black .").writes("pkg/core.py")
    assert not shell_writes("cd docs && black .").writes("pkg/core.py")


def test_a_long_rsync_argument_is_read_in_linear_time():
    """The remote-spec test (``host:path``, ``user@host:path``) was ``\\w+@?[\\w.-]*:.*``: two overlapping runs, so
    an argument of word characters with no colon took quadratic time (40,000 characters 2.6 s, 160,000 42 s to
    label). A 200,000-character one is read at once; remote specs are still no local destination."""
    import time

    start = time.process_time()
    assert shell_writes("rsync " + "a" * 200_000 + " pkg/core.py").writes("pkg/core.py")
    assert time.process_time() - start < 2
    assert not shell_writes("rsync pkg/core.py me@host:pkg/core.py").writes("pkg/core.py")
    assert not shell_writes("rsync pkg/core.py host.example:pkg/").writes("pkg/core.py")
