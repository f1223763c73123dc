"""Edits are validated before anything is written; rejections name the reason."""

from __future__ import annotations

import os
import subprocess

import pytest

from evoharness.errors import EditRejected
from evoharness.harness_repo.config import HarnessRepoConfig
from evoharness.harness_repo.models import Edit
from evoharness.harness_repo.repo import HarnessRepo

from .helpers import git


def snapshot(hr: HarnessRepo) -> tuple[str, str, str, str]:
    """Refs, loose objects, working tree status and file listing: what 'nothing written' means."""
    objects = sorted(str(p) for p in (hr.path / ".git" / "objects").rglob("*") if p.is_file())
    files = sorted(str(p) for p in hr.path.rglob("*") if ".git" not in p.parts)
    return (git(hr.path, "for-each-ref"), "\n".join(objects), git(hr.path, "status", "--porcelain"),
            "\n".join(files))


def edit(path: str, **change) -> Edit:
    change = change or {"content": "x\n"}
    return Edit(message="try an edit", targets="F2.format_rejected", changes=[{"path": path, **change}])


@pytest.mark.parametrize(("path", "reason"), [
    ("harness.toml", "protected"),
    ("tests/test_scorer.py", "protected"),
    ("scorer/score.py", "protected"),
    (".gitignore", "protected"),
    ("tools/.gitattributes", "protected"),
    (".git/config", ".git"),
    (".git/hooks/pre-commit", ".git"),
    ("prompts/.git/HEAD", ".git"),
    ("../outside.md", "'..'"),
    ("prompts/../../etc/passwd", "'..'"),
    ("/etc/passwd", "absolute"),
    ("/tmp/x/prompts/system.md", "absolute"),
    ("README.md", "outside the editable surfaces"),
    ("tools/noop.py/inner.py", "parent of the path is a file"),
])
def test_bad_paths_are_rejected_and_nothing_is_written(harness: HarnessRepo, path: str, reason: str) -> None:
    before = snapshot(harness)
    with pytest.raises(EditRejected, match=reason) as exc:
        harness.create_candidate(edit(path), 1)
    assert exc.value.path == path
    assert snapshot(harness) == before
    assert harness.candidates() == []


def _commit_symlinks(hr: HarnessRepo, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, hr.path / "prompts" / "escape")
    os.symlink("/etc/hostname", hr.path / "prompts" / "linked.md")
    git(hr.path, "add", "prompts/escape", "prompts/linked.md")
    git(hr.path, "-c", "user.name=h", "-c", "user.email=h@x", "commit", "-qm", "symlinks (by a human)")


@pytest.mark.parametrize(("path", "where"), [
    ("prompts/escape/evil.md", "prompts/escape"),
    ("prompts/linked.md", "prompts/linked.md"),
])
def test_edits_through_symlinks_are_rejected(harness: HarnessRepo, tmp_path, path: str, where: str) -> None:
    _commit_symlinks(harness, tmp_path)
    before = snapshot(harness)
    with pytest.raises(EditRejected, match=f"symlink \\({where}\\)"):
        harness.create_candidate(edit(path), 1)
    assert snapshot(harness) == before
    assert list((tmp_path / "outside").iterdir()) == []


@pytest.mark.parametrize(("path", "content", "reason"), [
    ("tools/broken.py", "def f(:\n", "Python does not compile"),
    ("policies.yaml", "max_steps: [12\n", "YAML does not parse"),
    ("tools/conf.toml", "a = \n", "TOML does not parse"),
    ("middleware/data.json", "{nope", "JSON does not parse"),
    ("prompts/system.md", "{% if task %}unclosed", "template does not parse"),
])
def test_files_must_parse(harness: HarnessRepo, path: str, content: str, reason: str) -> None:
    before = snapshot(harness)
    with pytest.raises(EditRejected, match=reason):
        harness.create_candidate(edit(path, content=content), 1)
    assert snapshot(harness) == before


def test_size_limits(tmp_path) -> None:
    from evoharness.harness_repo.init import init_harness

    hr = init_harness(tmp_path / "h", config=HarnessRepoConfig(max_file_bytes=100, max_files=2))
    with pytest.raises(EditRejected, match="limit is 100"):
        hr.create_candidate(edit("lessons.md", content="x" * 101), 1)
    three = Edit(message="m", targets="F3.x", changes=[{"path": f"prompts/{i}.md", "content": "a"} for i in "abc"])
    with pytest.raises(EditRejected, match="touches 3 files"):
        hr.create_candidate(three, 1)


def test_diff_edits_apply_and_bad_diffs_are_rejected(harness: HarnessRepo) -> None:
    diff = "--- a/policies.yaml\n+++ b/policies.yaml\n@@ -2,1 +2,1 @@\n-max_steps: 12\n+max_steps: 20\n"
    cand = harness.create_candidate(edit("policies.yaml", diff=diff), 1)
    assert "max_steps: 20" in git(harness.path, "show", f"{cand.commit}:policies.yaml")
    stale = diff.replace("12", "99", 1)
    with pytest.raises(EditRejected, match="does not apply"):
        harness.create_candidate(edit("policies.yaml", diff=stale), 1)
    with pytest.raises(EditRejected, match="does not exist"):
        harness.create_candidate(edit("prompts/new.md", diff="@@ -1 +1 @@\n-a\n+b\n"), 1)


def test_delete_and_noop(harness: HarnessRepo) -> None:
    cand = harness.create_candidate(edit("tools/noop.py", delete=True), 1)
    assert "tools/noop.py" not in git(harness.path, "ls-tree", "-r", "--name-only", cand.commit)
    with pytest.raises(EditRejected, match="changes nothing"):
        harness.create_candidate(edit("lessons.md", content=""), 1)
    with pytest.raises(EditRejected, match="does not exist"):
        harness.create_candidate(edit("tools/absent.py", delete=True), 1)


def test_candidate_commit_carries_trailers_and_working_tree_is_untouched(harness: HarnessRepo) -> None:
    e = Edit(message="Guard loops", targets="F3.repeated_action", rationale="Loops burn the budget.",
             changes=[{"path": "lessons.md", "content": "- no loops\n"}], evidence=["t1@4", "t2"],
             predicted_flips=["task-7"], critic="accept: attributable")
    cand = harness.create_candidate(e, 3)
    body = git(harness.path, "log", "-1", "--format=%B", cand.commit)
    for line in ["Targets: F3.repeated_action", "Failure-Class: F3", "Evidence: t1@4, t2",
                 "Predicted-Flips: task-7", "Critic: accept: attributable"]:
        assert line in body
    trailers = subprocess.run(["git", "-C", str(harness.path), "interpret-trailers", "--parse"], input=body,
                              capture_output=True, text=True).stdout
    assert "Targets: F3.repeated_action" in trailers  # git itself reads them as trailers
    assert cand.branch == "candidate/r3-guard-loops" and cand.base == harness.main_head()
    assert (cand.evidence, cand.predicted_flips, cand.rationale) == (["t1@4", "t2"], ["task-7"],
                                                                       "Loops burn the budget.")
    assert (harness.path / "lessons.md").read_text() == ""
    assert git(harness.path, "status", "--porcelain") == ""
    again = harness.create_candidate(e, 3)
    assert again.branch == "candidate/r3-guard-loops-2"


@pytest.mark.parametrize(("field", "value"), [("message", "Guard \ud83d"), ("rationale", "cut \udc00"),
                                              ("evidence", ["t1\ud83d"]), ("critic", "ok \ud83d")])
def test_an_edit_whose_text_no_utf8_file_can_hold_is_rejected(harness: HarnessRepo, field, value) -> None:
    """An Edit built in code (a role's output parsed with json.loads) reached the commit's encoding: a traceback."""
    e = edit("lessons.md").model_copy(update={field: value})  # unvalidated, as a role may build one
    before = snapshot(harness)
    with pytest.raises(EditRejected, match=f"{field} holds half a UTF-16 surrogate pair"):
        harness.create_candidate(e, 1)
    assert snapshot(harness) == before
