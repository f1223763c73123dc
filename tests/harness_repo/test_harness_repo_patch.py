"""The strict unified-diff applier used for `diff` changes in an edit."""

from __future__ import annotations

import pytest

from evoharness.harness_repo.patch import PatchError, apply_unified_diff, diff_creates_file

TEXT = "a\nb\nc\nd\ne\n"


def test_applies_a_hunk_with_headers_and_context() -> None:
    diff = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n"
    assert apply_unified_diff(TEXT, diff) == "a\nb\nC\nd\ne\n"


def test_finds_a_hunk_whose_line_numbers_drifted() -> None:
    diff = "@@ -1,2 +1,3 @@\n d\n+x\n e\n"  # says line 1, the context is at line 4
    assert apply_unified_diff(TEXT, diff) == "a\nb\nc\nd\nx\ne\n"


def test_several_hunks_and_a_new_file() -> None:
    diff = "@@ -1 +1 @@\n-a\n+A\n@@ -5 +5,2 @@\n e\n+f\n"
    assert apply_unified_diff(TEXT, diff) == "A\nb\nc\nd\ne\nf\n"
    new = "--- /dev/null\n+++ b/new.md\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
    assert diff_creates_file(new) and apply_unified_diff("", new) == "hello\nworld\n"


def test_no_newline_at_end_of_file() -> None:
    diff = "@@ -5 +5 @@\n-e\n+E\n\\ No newline at end of file\n"
    assert apply_unified_diff(TEXT, diff) == "a\nb\nc\nd\nE"


@pytest.mark.parametrize(("diff", "reason"), [
    ("@@ -2 +2 @@\n-z\n+y\n", "does not apply"),
    ("just some text\n", "no hunks"),
    ("@@ -1,3 +1,3 @@\n a\n-b\n", "line counts"),
    ("@@ -1 +1 @@\n?a\n", "unexpected line"),
])
def test_bad_diffs_say_why(diff: str, reason: str) -> None:
    with pytest.raises(PatchError, match=reason):
        apply_unified_diff(TEXT, diff)
