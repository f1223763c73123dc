"""A run's engineer reuses a candidate branch only when it is its own node's, re-run after a crash.

Round numbers start at 1 in every run, so a second run on one harness found the first run's `candidate/r1-...` for
the same signal and took it as its own: walk's service, run r4's loop guard approved but not merged (main moved by
hand meanwhile), then run r5 on the same home verified that branch again -- cut from the old main, a tree without
main's new commit -- against the new main, and asked for a review of a candidate the merge must refuse ("not based
on main's head"). A branch the first run rejected on an unchanged main was verified again in the second, the
re-rolling of one edit until noise lets it through that the rejected-twin check is there to stop.
"""

from __future__ import annotations

from evoharness.graph.desk import Desk
from evoharness.graph.progress import Progress
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, Verdict
from evoharness.roles.models import Pattern

SIGNAL = "F3.repeated_action"
PATTERN = Pattern(id=f"p-{SIGNAL}", signal=SIGNAL, failure_class="F3", count=3, share=0.6, task_ids=["t1", "t2"],
                  root_cause="no guard", surface="lessons.md")


def _desk(tmp_path, repo) -> Desk:
    return Desk(None, repo, None, Progress(quiet=True), run_dir=tmp_path, max_candidates=1, evidence_paths=[],
                heldout_tasks=[])


def _candidate(repo, text="- Do not repeat a call.\n"):
    return repo.create_candidate(Edit(message="Loop guard", targets=SIGNAL,
                                      changes=[{"path": "lessons.md", "content": text}]), round=1)


def test_a_fresh_candidate_of_this_round_is_reused(tmp_path):
    repo = init_harness(tmp_path / "harness")
    made = _candidate(repo)  # the engineer node made it, then the process died before its checkpoint
    assert _desk(tmp_path, repo)._existing_candidate(1, PATTERN).branch == made.branch


def test_another_runs_candidate_on_an_older_main_is_not_reused(tmp_path):
    repo = init_harness(tmp_path / "harness")
    _candidate(repo)
    main = repo.repo.heads["main"]
    main.checkout()
    (tmp_path / "harness" / "prompts.md").write_text("Be terse.\n")
    repo.repo.index.add(["prompts.md"])
    repo.repo.index.commit("hand edit")
    assert _desk(tmp_path, repo)._existing_candidate(1, PATTERN) is None


def test_another_runs_rejected_candidate_is_not_reused(tmp_path):
    repo = init_harness(tmp_path / "harness")
    old = _candidate(repo)
    repo.reject(old.branch, Verdict(candidate=old.branch, commit=old.commit, base=old.base, accepted=False,
                                    reason="failed: behaviour"))
    assert _desk(tmp_path, repo)._existing_candidate(1, PATTERN) is None
