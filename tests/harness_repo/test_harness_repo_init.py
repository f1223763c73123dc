"""The seed harness repo, its manifest, adoption and commit identity."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2
import pytest
import yaml

from evoharness.errors import InputError
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.manifest import Manifest, glob_match
from evoharness.harness_repo.repo import HarnessRepo

from .helpers import git, lesson_edit

SEED = ["prompts/system.md", "lessons.md", "policies.yaml", "middleware/__init__.py", "middleware/README.md",
        "middleware/noop.py", "tools/__init__.py", "tools/README.md", "tools/noop.py", "harness.toml"]


def test_init_writes_the_seed_layout_in_one_commit(harness: HarnessRepo) -> None:
    root = harness.path
    for rel in SEED:
        assert (root / rel).is_file(), rel
    assert git(root, "rev-list", "--count", "main") == "1"
    assert git(root, "status", "--porcelain") == ""
    toml = tomllib.loads((root / "harness.toml").read_text())
    assert toml["agent"]["kind"] == "builtin"
    assert "lessons.md" in toml["surfaces"] and "harness.toml" in toml["protected"]
    assert harness.manifest.main_branch == "main"


def test_commits_work_without_a_global_git_identity(harness: HarnessRepo) -> None:
    # conftest isolates HOME, so there is no ~/.gitconfig user here
    assert git(harness.path, "log", "-1", "--format=%an <%ae>") == "evoharness <evoharness@localhost>"
    cand = harness.create_candidate(lesson_edit(), 1)
    assert git(harness.path, "log", "-1", "--format=%cn <%ce>", cand.commit) == "evoharness <evoharness@localhost>"


def test_repo_config_identity_wins(harness: HarnessRepo) -> None:
    git(harness.path, "config", "user.name", "Ada")
    git(harness.path, "config", "user.email", "ada@example.org")
    cand = harness.create_candidate(lesson_edit(), 1)
    assert git(harness.path, "log", "-1", "--format=%an <%ae>", cand.commit) == "Ada <ada@example.org>"


def test_seed_prompt_renders_with_only_the_agent_variables(harness: HarnessRepo) -> None:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    template = env.from_string((harness.path / "prompts/system.md").read_text())
    policies = yaml.safe_load((harness.path / "policies.yaml").read_text())
    text = template.render(task="Book a flight", tools=[{"name": "search", "description": "find flights"}],
                           lessons="- Check the date first.", policies=policies)
    assert "Book a flight" in text and "`search`: find flights" in text
    assert "Check the date first" in text and "at most 12 steps" in text
    assert "Lessons" not in template.render(task="t", tools=[], lessons="", policies=policies)


def test_seed_policies_have_the_documented_keys(harness: HarnessRepo) -> None:
    policies = yaml.safe_load((harness.path / "policies.yaml").read_text())
    assert policies == {
        "max_steps": 12, "loop_guard": {"enabled": False, "max_repeats": 2},
        "checkpoint_nudge": {"enabled": False, "every": 4}, "exit_gate": {"enabled": False},
        "repair_tool_calls": False,
    }


def test_init_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("hi")
    with pytest.raises(InputError, match="not an empty directory"):
        init_harness(tmp_path / "x")


def test_init_of_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="is a file; name an absent or empty directory"):
        init_harness(tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "hi"


def test_adopt_adds_a_manifest_to_an_existing_repo(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    (root / "lessons.md").write_text("old\n")
    git(root, "add", "lessons.md")
    git(root, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "existing")
    hr = HarnessRepo.adopt(root)
    assert hr.manifest.main_branch == "trunk"
    assert "harness.toml" in git(root, "show", "--name-only", "--format=", "trunk")
    cand = hr.create_candidate(lesson_edit("new\n"), 2)
    assert cand.branch == "candidate/r2-add-a-loop-lesson"
    with pytest.raises(InputError, match="already exists"):
        HarnessRepo.adopt(root)


def test_opening_a_repo_without_manifest_says_how_to_fix(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    with pytest.raises(InputError, match="evoharness init"):
        HarnessRepo(tmp_path)


def test_command_agent_needs_a_command() -> None:
    with pytest.raises(InputError, match="agent.command"):
        Manifest.parse('[agent]\nkind = "command"\n')
    m = Manifest.parse('[agent]\nkind = "command"\ncommand = "python run.py"\n')
    assert Manifest.parse(m.to_toml()) == m


@pytest.mark.parametrize(("pattern", "path", "hit"), [
    ("prompts/**", "prompts/a/b.md", True), ("prompts/**", "prompts.md", False),
    ("lessons.md", "lessons.md", True), ("lessons.md", "x/lessons.md", False),
    ("**/.git*", "tools/.gitignore", True), (".git*", ".gitattributes", True),
    ("tools/*.py", "tools/a/b.py", False),
])
def test_glob_matching(pattern: str, path: str, hit: bool) -> None:
    assert glob_match(pattern, path) is hit
