"""A commit on the harness's main made outside the run (a hand edit) while the run waits for review, or while it
is down, is kept, and the run goes on: the candidate verified against the old main is recorded as accepted, not
merged (the reason says main moved), and the next round is measured on main as it is now. Before, the merge node
raised MergeRefused: `approve` was 'error: ... main moved since verification ...; re-verify', and every later
`run --resume` the same line, while `reject` said the run was not waiting for a review -- the run could never end."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import git

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness

RUN = ["--set", "run.env=synthetic", "--set", "run.model=scripted:weak", "--set", "run.rollouts=4",
       "--set", "run.dev_limit=8", "--set", "run.heldout_limit=3", "--set", "run.max_rounds=2",
       "--set", "run.patience=2", "--set", "sandbox.backend=inprocess", "--set", "roles.kind=playbook",
       "--set", "log_level=error"]


def _hand_commit(harness) -> str:
    repo = git.Repo(harness)
    (harness / "lessons.md").write_text("- a lesson written by hand\n")
    repo.index.add(["lessons.md"])
    return repo.index.commit("hand edit", author=git.Actor("me", "me@example.com")).hexsha


def _check(harness, run_dir, foreign: str, branch: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "done"
    assert branch not in [m["branch"] for m in summary["merged"]]
    why = next(r["reason"] for r in summary["rejected"] if r["branch"] == branch)
    assert why.startswith("accepted, not merged:") and "main moved" in why, why
    repo = git.Repo(harness)
    assert foreign in [c.hexsha for c in repo.iter_commits("main", first_parent=True)]  # the hand edit is kept
    assert repo.commit("main").tree["lessons.md"].data_stream.read().startswith(b"- a lesson written by hand")
    assert summary["rounds"][0]["anchor_commit"] == foreign  # round 2 was measured on main as it is now
    # that anchor is the round's fresh one (it was None: no merge), and the bar of the next round
    first = summary["rounds"][0]
    assert first["fresh_anchor"] is not None and first["selection_optimism"] is None
    assert first["fresh_anchor"] == summary["anchors"][-1]["mean"] or len(summary["rounds"]) > 1
    if len(summary["rounds"]) > 1:
        assert summary["rounds"][1]["anchor_before"] == first["fresh_anchor"]
    assert not repo.is_dirty(untracked_files=True)


def _first_waiting(out: str) -> str | None:
    line = next((x.split("   (or:")[0].strip() for x in out.splitlines() if " approve " in x), None)
    return None if line is None else shlex.split(line)[shlex.split(line).index("approve") + 1]


def test_approving_after_a_hand_commit_on_main_records_it_not_merged_and_the_run_ends(tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = ["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'h'}", *RUN]
    assert main(["run", "--review", *opts, "--run-id", "run-x"]) == 0
    branch = _first_waiting(capsys.readouterr().out)
    foreign = _hand_commit(tmp_path / "h")
    code = main([*opts, "approve", branch, "--run", "run-x"])
    assert code == 0, capsys.readouterr().err  # 2 before: 'main moved since verification ...; re-verify'
    while waiting := _first_waiting(capsys.readouterr().out):  # round 2 asks too: reject to end the run
        assert main([*opts, "reject", waiting, "--run", "run-x"]) == 0
    _check(tmp_path / "h", tmp_path / "state" / "runs" / "run-x", foreign, branch)


def test_an_approval_that_main_moved_past_says_it_no_longer_holds_and_what_comes_next(tmp_path, capsys,
                                                                                     monkeypatch):
    """Approved, then main moved (a hand commit): the approval does not carry over to a main the candidate was not
    verified against (re-verification there is the rule), but the user read only 'accepted, not merged: main moved
    since verification (...); re-verify', with nothing to say that the approval was spent or what to do. Now the line
    and the recorded reason say the approval held for the old main and what the next round does: it proposes afresh
    and asks for review only of a candidate it accepts, never of this one again (it said 'asks for review again',
    which reads as this candidate coming back, and holds only when the next round accepts one)."""
    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    opts = ["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'h'}", *RUN]
    assert main(["run", "--review", *opts, "--run-id", "run-x"]) == 0
    branch = _first_waiting(capsys.readouterr().out)
    verified_on = git.Repo(tmp_path / "h").commit("main").hexsha
    foreign = _hand_commit(tmp_path / "h")
    assert main([*opts, "approve", branch, "--run", "run-x", "--reason", "looks right"]) == 0
    out = capsys.readouterr()
    told = f"your approval held for main at {verified_on[:10]}, where it was verified, not for main at {foreign[:10]}"
    line = next(x for x in (out.out + out.err).splitlines() if branch in x and "not merged" in x)
    assert told in line and "and is spent" in line and "asks for review only of one it accepts" in line, line
    asked = []
    while waiting := _first_waiting(out.out):
        asked.append(waiting)
        assert main([*opts, "reject", waiting, "--run", "run-x"]) == 0
        out = capsys.readouterr()
    # the failure still shows on the new main: round 2 proposes the edit again, as a candidate of its own
    assert asked and branch not in asked and all(b.startswith("candidate/r2-") for b in asked), (branch, asked)
    summary = json.loads((tmp_path / "state" / "runs" / "run-x" / "summary.json").read_text())
    assert told in next(r["reason"] for r in summary["rejected"] if r["branch"] == branch)


def test_a_run_killed_before_its_merge_and_resumed_after_a_hand_commit_keeps_it(tmp_path):
    """Unattended: the run is down (SIGKILL at the merge node), main gets a hand commit, the run resumes."""
    harness, home = tmp_path / "h", tmp_path / "state"
    init_harness(harness)
    cmd = [sys.executable, "-m", "evoharness", "--set", f"home={home}", "--set", f"run.harness={harness}", *RUN]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    trace = tmp_path / "trace.txt"
    ref = subprocess.run([*cmd, "--set", f"home={tmp_path / 'ref'}", "--set", f"run.harness={tmp_path / 'refh'}",
                          "run", "--run-id", "run-x"], env={**env, "EVOHARNESS_FAULT_TRACE": str(trace)},
                         capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    merges = json.loads((tmp_path / "ref" / "runs" / "run-x" / "summary.json").read_text())["merged"]
    assert merges and merges[0]["round"] == 1  # round 1 merges: the kill below comes before that merge
    at = next(int(n) for n, name in (x.split(" ", 1) for x in trace.read_text().splitlines()) if name == "merge:start")
    killed = subprocess.run([*cmd, "run", "--run-id", "run-x"], env={**env, "EVOHARNESS_FAULT_KILL_AT": str(at)},
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    foreign = _hand_commit(harness)
    resumed = subprocess.run([*cmd, "run", "--resume", "run-x"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]  # 2 before, and on every resume after
    _check(harness, home / "runs" / "run-x", foreign, merges[0]["branch"])
    summary = json.loads((home / "runs" / "run-x" / "summary.json").read_text())
    assert "approval" not in next(r["reason"] for r in summary["rejected"] if r["branch"] == merges[0]["branch"])


def test_a_stale_lock_on_main_pauses_the_run_and_it_merges_once_the_lock_is_gone(tmp_path):
    """A `refs/heads/main.lock` left by a git process that crashed: the merge's compare-and-swap failed and was
    read as 'main moved during the merge', so the run recorded its accepted candidate as not merged while main had
    not moved. Now the run pauses with one line naming the lock, and merges what an uninterrupted run merges."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}

    def cmd(root, *args):
        return [sys.executable, "-m", "evoharness", "--set", f"home={root / 'state'}", "--set",
                f"run.harness={root / 'h'}", *RUN, *args]

    for root in (tmp_path / "ref", tmp_path / "locked"):
        init_harness(root / "h")
    lock = tmp_path / "locked" / "h" / ".git" / "refs" / "heads" / "main.lock"
    lock.touch()
    stopped = subprocess.run(cmd(tmp_path / "locked", "run", "--run-id", "run-x"), env=env, capture_output=True,
                             text=True, timeout=300)
    assert stopped.returncode == 2 and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    errors = [line for line in stopped.stderr.splitlines() if not line.startswith("[")]
    assert len(errors) == 1 and "paused" in errors[0] and str(lock) in errors[0], errors
    lock.unlink()
    resumed = subprocess.run(cmd(tmp_path / "locked", "run", "--resume", "run-x"), env=env, capture_output=True,
                             text=True, timeout=300)
    ref = subprocess.run(cmd(tmp_path / "ref", "run", "--run-id", "run-x"), env=env, capture_output=True, text=True,
                         timeout=300)
    assert resumed.returncode == 0 and ref.returncode == 0, (resumed.stderr[-2000:], ref.stderr[-2000:])

    def merged(root):
        summary = json.loads((root / "state" / "runs" / "run-x" / "summary.json").read_text())
        return [m["branch"] for m in summary["merged"]], git.Repo(root / "h").commit("main").tree.hexsha

    assert merged(tmp_path / "locked") == merged(tmp_path / "ref") and merged(tmp_path / "ref")[0]


def test_uncommitted_changes_the_merge_would_overwrite_pause_the_run_and_are_kept(tmp_path, capsys):
    """main checked out with a local edit of policies.yaml, which the verified candidate changes: main moved, the
    files could not follow, and the index kept the old tree (`git diff --cached` the merge reversed: the user's
    next `git commit -a` reverted it). Now the run pauses before main moves; the edit is kept."""
    opts = {root: ["--set", f"home={root / 'state'}", "--set", f"run.harness={root / 'h'}", *RUN]
            for root in (tmp_path / "ref", tmp_path / "dirty")}
    for root in opts:
        init_harness(root / "h")
    harness = tmp_path / "dirty" / "h"
    (harness / "policies.yaml").write_text((harness / "policies.yaml").read_text() + "# my local note\n")
    (harness / "lessons.md").write_text("- a local lesson\n")
    assert main([*opts[tmp_path / "dirty"], "run", "--run-id", "run-x"]) == 2
    err = capsys.readouterr().err
    assert "uncommitted changes" in err and "policies.yaml" in err and "paused" in err, err
    repo = git.Repo(harness)
    assert len(repo.commit("main").parents) < 2 and not repo.index.diff("HEAD")  # main did not move; index clean
    assert (harness / "policies.yaml").read_text().endswith("# my local note\n")
    repo.git.checkout("--", "policies.yaml")  # the user discards the edit in the way; keeps lessons.md's
    assert main([*opts[tmp_path / "dirty"], "run", "--resume", "run-x"]) == 0
    assert main([*opts[tmp_path / "ref"], "run", "--run-id", "run-x"]) == 0
    assert repo.commit("main").tree.hexsha == git.Repo(tmp_path / "ref" / "h").commit("main").tree.hexsha
    assert not repo.index.diff("HEAD") and (harness / "lessons.md").read_text() == "- a local lesson\n"


def test_a_locked_index_pauses_the_run_before_a_round_and_it_merges_once_the_lock_is_gone(tmp_path, capsys):
    """A `.git/index.lock` (a git running in the harness repo, or one killed that left it) was found only when the
    verified candidate was merged: the run measured its seed anchor, made a candidate and spent the round's
    verification rollouts, then paused. Now it pauses before any rollout, naming the lock, and once the lock is gone
    `run --resume` merges what an uninterrupted run merges."""
    opts = {root: ["--set", f"home={root / 'state'}", "--set", f"run.harness={root / 'h'}", *RUN]
            for root in (tmp_path / "ref", tmp_path / "locked")}
    for root in opts:
        init_harness(root / "h")
    harness = tmp_path / "locked" / "h"
    lock = harness / ".git" / "index.lock"
    lock.touch()
    assert main([*opts[tmp_path / "locked"], "run", "--run-id", "run-x"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and "its index is locked" in err[0] and str(lock) in err[0] and "paused" in err[0], err
    repo = git.Repo(harness)
    assert repo.git.for_each_ref("refs/heads/candidate/") == ""  # no round's work was done
    run_dir = tmp_path / "locked" / "state" / "runs" / "run-x"
    trajectories = run_dir / "trajectories.jsonl"
    assert not trajectories.exists() or trajectories.read_text() == ""  # no rollout was spent
    lock.unlink()
    assert main([*opts[tmp_path / "locked"], "run", "--resume", "run-x"]) == 0
    assert main([*opts[tmp_path / "ref"], "run", "--run-id", "run-x"]) == 0
    assert repo.commit("main").tree.hexsha == git.Repo(tmp_path / "ref" / "h").commit("main").tree.hexsha
    assert repo.commit("main").tree.hexsha != repo.commit("main~1").tree.hexsha
