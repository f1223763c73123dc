"""F4.first_write locates a failed SWE run at the first write that *targets* a file the delivered patch changes:
a command that only names the file (copies it away, reads it into another file, greps it) is no write to it.
Each shape both ways: the write of the patched file is located, the look-alike passes on to the later edit."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.write_targets import python_writes, shell_writes
from evoharness.traces.builder import TraceBuilder

PATCH = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n"
LATER_EDIT = "sed -i 's/a/b/' pkg/core.py"


def _first_write_step(first: str, tool: str = "bash", args: dict | None = None) -> int:
    """The step of F4.first_write in a failed run whose first call is ``first`` (or ``tool(args)``) at step 1,
    followed by a ``sed -i`` of the patched file at step 3."""
    b = TraceBuilder("t").user("Fix the bug in pkg")
    b.call(tool, args if args is not None else {"command": first}, result="")
    b.call("bash", {"command": LATER_EDIT}, result="")
    label = Labeller().label(b.deliver(PATCH).build(score=0.0))
    [s] = [s for s in label.signals if s.id == "F4.first_write"]
    return s.step


WRITES = [
    "sed -i 's/x/y/' pkg/core.py",
    "sed -E -i.bak 's/x/y/' /testbed/pkg/core.py",
    "cd pkg && sed -i 's/x/y/' core.py",
    "perl -pi -e 's/x/y/' pkg/core.py",
    "echo 'x = 1' > pkg/core.py",
    "echo 'x = 1' >> ./pkg/core.py",
    "printf 'x\\n' | tee -a pkg/core.py > /dev/null",
    "cat > pkg/core.py <<'EOF'\ndef f():\n    return 1\nEOF",
    "cat <<EOF > pkg/core.py\ndef f(): return 'it''s'\nEOF",
    "python -c \"open('pkg/core.py', 'w').write('x = 1')\"",
    "python3 - <<'EOF'\npath = 'pkg/core.py'\nsrc = open(path).read()\nwith open(path, 'w') as f:\n"
    "    f.write(src.replace('a', 'b'))\nEOF",
    "python -c \"from pathlib import Path; p = Path('pkg') / 'core.py'; p.write_text(p.read_text() + 'x')\"",
    "cat > fix.py <<'EOF'\nimport os\nf = os.path.join('pkg', 'core.py')\ns = open(f).read()\n"
    "open(f, 'w').write(s)\nEOF",
    "git apply <<'EOF'\ndiff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\nEOF",
    "patch pkg/core.py < /tmp/fix.diff",
    "cp /tmp/core_fixed.py pkg/core.py",
    "mv /tmp/core_fixed.py /testbed/pkg/core.py",
    "cp /tmp/core.py pkg/",
    "install -m 644 /tmp/core_fixed.py pkg/core.py",
    "truncate -s 0 pkg/core.py",
    "git checkout -- pkg/core.py",
    "create pkg/core.py",
    "python - <<'EOF'\nimport fileinput\nfor line in fileinput.input('pkg/core.py', inplace=True):\n"
    "    print(line.replace('a', 'b'), end='')\nEOF",
    "python -c 'import sys; f = open(\"pkg/core.py\", \"w+\"); print(1, file=f)'",
]

NAMES_ONLY = [
    "cp pkg/core.py /tmp/x",
    "cp pkg/core.py pkg/core.py.bak",
    "cat pkg/core.py > /tmp/x",
    "grep foo pkg/core.py > out.txt",
    "grep -n foo pkg/core.py 2>&1 | tee /tmp/log",
    "python -c \"open('pkg/core.py').read()\"",
    "python -c \"s = open('pkg/core.py').read(); open('/tmp/x', 'w').write(s)\"",
    "sed -n '1,20p' pkg/core.py > /tmp/head.txt",
    "diff pkg/core.py /tmp/x > /tmp/d.diff",
    "cat > check.py <<'EOF'\nprint(open('pkg/core.py').read())\nEOF",
    "echo pkg/core.py > files.txt",
    "cd pkg && cat core.py > ../copy.py",
    "wc -l pkg/core.py >> /tmp/sizes",
    "pip install -e . && python -c \"print(open('pkg/core.py').read())\"",
    "python -c \"f = open('pkg/core.py'); f.truncate\"",
]


@pytest.mark.parametrize("first", WRITES)
def test_a_command_that_writes_the_patched_file_is_the_first_write(first):
    assert _first_write_step(first) == 1


@pytest.mark.parametrize("first", NAMES_ONLY)
def test_a_command_that_only_names_the_patched_file_is_no_write_to_it(first):
    assert _first_write_step(first) == 3


@pytest.mark.parametrize(("args", "step"), [
    ({"command": "str_replace", "path": "/testbed/pkg/core.py", "old_str": "a", "new_str": "b"}, 1),
    ({"command": "create", "path": "pkg/core.py", "file_text": "x = 1"}, 1),
    ({"command": "str_replace", "path": "/testbed/pkg/core.py.orig", "old_str": "a", "new_str": "b"}, 3),
    ({"command": "create", "path": "/testbed/notes.md", "file_text": "see pkg/core.py"}, 3),
])
def test_an_editor_call_writes_the_file_its_path_argument_names(args, step):
    assert _first_write_step("", tool="str_replace_editor", args=args) == step


def test_a_command_that_writes_files_it_does_not_say_counts_where_it_names_the_file():
    # git apply of a saved diff: which files it writes is in the diff, not the command
    assert _first_write_step("git apply /tmp/fix.diff && git diff pkg/core.py") == 1
    assert _first_write_step("git apply /tmp/fix.diff") == 3


def test_python_writes_resolves_names_and_leaves_computed_paths_unknown():
    assert python_writes("p = 'a.py'\nopen(p, 'w').write('x')") == (["a.py"], False)
    assert python_writes("open(sys.argv[1], 'w').write('x')") == ([], True)
    assert python_writes("print(open('a.py').read())") == ([], False)
    assert shell_writes("ls 2>&1 > /dev/null").files == ("/dev/null",)


def test_names_bound_to_each_other_end_quickly():
    # a hostile script: every name bound to every other many times (exponential without a budget)
    names = [f"n{i}" for i in range(12)]
    code = "\n".join(f"{a} = {b}" for a in names for b in names) + "\nopen(n0, 'w').write('x')"
    assert python_writes(code) == ([], True)


@pytest.mark.parametrize("command", ["> " * 100_000, "tee " + "a " * 100_000, "cd a;" * 40_000,
                                     "echo " + "'a'\"" * 50_000, '"' + '\\"' * 100_000])
def test_a_hostile_command_is_read_in_bounded_memory(command):
    """200,000 characters of redirections, tee targets, cds or quotes: the edit text is shared, not copied per file
    (the redirections once built a 150 KB string per target: 7 GB), and a chain of cds stops growing the path."""
    import tracemalloc

    tracemalloc.start()
    got = shell_writes(command)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(set(map(id, got.edits))) <= 2 and peak < 200_000_000
