"""F4.forbidden_edit: a failed run whose task forbids changing the tests and whose delivered patch changes a test
file that existed, located at the first write of that file (not at the earlier first write of the source)."""

from __future__ import annotations

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder

MINI_SWE = ("<instructions>\n## Boundaries\n- MODIFY: Regular source code files in /testbed\n"
            "- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)\n</instructions>")


def _diff(path: str, new: bool = False) -> str:
    mode = "new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n" if new else \
        f"index 1111111..2222222 100644\n--- a/{path}\n"
    return f"diff --git a/{path} b/{path}\n{mode}+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"


def _run(instructions: str, test_path: str, new: bool = False, score: float = 0.0):
    b = TraceBuilder("t").system("You are a helpful assistant that can interact with a computer.")
    b.user(f"Fix the display of choices.\n\n{instructions}")
    b.call("bash", {"command": "sed -i 's/setattr(cls, name, f)/setattr(cls, name, g)/' pkg/fields.py"},
           result="<returncode>0</returncode>")
    b.call("bash", {"command": "python reproduce.py"}, result="<returncode>0</returncode>\n<output>ok</output>")
    b.call("bash", {"command": f"cat <<'EOF' >> {test_path}\n\nclass FooBar(models.Model):\n    pass\nEOF"},
           result="<returncode>0</returncode>")
    patch = _diff("pkg/fields.py") + _diff(test_path, new)
    return Labeller().label(b.deliver(patch).build(score=score))


@pytest.mark.parametrize("instructions", [MINI_SWE, "Do not modify the tests.", "You must not change any test files."])
@pytest.mark.parametrize("test_path", ["tests/model_fields/models.py", "pkg/test_fields.py", "src/pkg/fields_test.py",
                                       "testing/python/fixtures.py", "test/helpers.py", "pkg/tests/helpers.py"])
def test_a_forbidden_change_of_a_test_file_is_the_failing_step(instructions, test_path):
    label = _run(instructions, test_path)
    s = label.first_signal
    assert s is not None and (s.id, s.step, label.failure_class) == ("F4.forbidden_edit", 6, "F4"), s
    assert test_path in s.evidence


@pytest.mark.parametrize(("instructions", "test_path", "new"), [
    ("", "tests/model_fields/models.py", False),  # no instruction about tests
    ("You don't need to modify the testing logic or any of the tests.", "tests/model_fields/models.py", False),
    (MINI_SWE, "tests/model_fields/test_new.py", True),  # a test file the patch creates: no existing test changed
    (MINI_SWE, "docs/contest_notes.py", False),  # not a test file
    # what the instruction forbids is not the tests: it permits them, or names the code the tests exercise
    ("Do not modify non-test files.", "tests/model_fields/models.py", False),
    ("DO NOT MODIFY anything except the tests.", "tests/model_fields/models.py", False),
    ("Do not modify files other than tests.", "tests/model_fields/models.py", False),
    ("Do not modify the code under test.", "tests/model_fields/models.py", False),
    ("DO NOT MODIFY: the source files. You may add tests.", "tests/model_fields/models.py", False),
    # a library package named test / testing below the repository's root is source (django.test, numpy.testing)
    (MINI_SWE, "django/test/testcases.py", False),
    (MINI_SWE, "numpy/testing/_private/utils.py", False),
])
def test_otherwise_the_first_write_stays(instructions, test_path, new):
    s = _run(instructions, test_path, new).first_signal
    assert s is not None and (s.id, s.step) == ("F4.first_write", 2), s


def test_a_resolved_run_that_changed_tests_stays_healthy():
    # resolved mini-swe-agent runs change tests too (the evaluation puts its own test files back)
    assert _run(MINI_SWE, "tests/model_fields/models.py", score=1.0).failure_class == "healthy"


def test_the_instruction_counts_only_before_the_agents_first_turn():
    b = TraceBuilder("t").user("Fix the display of choices.")
    b.call("bash", {"command": "sed -i 's/a/b/' pkg/fields.py"}, result="<returncode>0</returncode>")
    b.user("Remember: DO NOT MODIFY: Tests")  # a later message is no instruction of the task as given
    b.call("bash", {"command": "echo x >> tests/models.py"}, result="<returncode>0</returncode>")
    label = Labeller().label(b.deliver(_diff("pkg/fields.py") + _diff("tests/models.py")).build(score=0.0))
    assert label.first_signal is not None and label.first_signal.id == "F4.first_write"
