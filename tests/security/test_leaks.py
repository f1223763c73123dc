"""The edit-content leak guard: no task text, expected answer or scorer code copied into a harness."""

from __future__ import annotations

import inspect

import pytest

from evoharness.cli import main
from evoharness.envs import get_environment
from evoharness.errors import EditRejected
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.leaks import LeakGuard
from evoharness.harness_repo.models import Edit
from evoharness.roles.fixes import FIXES


@pytest.fixture(scope="module")
def guard():
    return LeakGuard(get_environment("synthetic"))


def _lesson(text: str) -> Edit:
    return Edit(message="Add a lesson", targets="F3.repeated_action", changes=[{"path": "lessons.md",
                                                                                 "content": text + "\n"}])


def test_task_text_answers_and_scorer_code_are_refused(guard):
    env = get_environment("synthetic")
    held = env.list_tasks("heldout")[0]
    with pytest.raises(EditRejected, match="copies the text of task"):
        guard.check(_lesson(f"When asked: {held.prompt} -- look it up first and reply."))
    with pytest.raises(EditRejected, match="expected answer of task 'contact_0'"):
        guard.check(_lesson("Ada Lovelace's address is ada@example.org."))
    scorer = inspect.getsource(type(env).score)
    with pytest.raises(EditRejected, match="scorer code"):
        guard.check(Edit(message="m", targets="t", changes=[{"path": "middleware/x.py", "content": scorer}]))


@pytest.mark.parametrize("fix", FIXES, ids=lambda f: f.key)
def test_playbook_lessons_and_the_seed_pass(guard, fix, tmp_path):
    guard.check(Edit(message=fix.subject, targets=fix.signals[0], rationale=fix.root_cause,
                     changes=[{"path": "lessons.md", "content": fix.lesson}]))


def test_cli_candidate_new_with_env_refuses_a_leak(tmp_path, capsys):
    hr = init_harness(tmp_path / "h")
    path = tmp_path / "edit.json"
    path.write_text(_lesson("The answer for Ada is ada@example.org.").model_dump_json())
    assert main(["candidate", "new", "--harness", str(hr.path), "--edit", str(path), "--env", "synthetic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected answer" in err[0]
    assert main(["candidate", "new", "--harness", str(hr.path), "--edit", str(path)]) == 0  # without --env: no check
