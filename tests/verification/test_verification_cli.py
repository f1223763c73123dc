"""`evoharness noise` and `evoharness verify` (with a scripted runner in place of the sandbox)."""

from __future__ import annotations

import json

import pytest

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit
from evoharness.verification import cli as vcli
from evoharness.verification.retests import RetestLog
from evoharness.verification.sim import ScriptedRunner, SimHarness, SimTask, SimWorld

ND = "F3.no_delivery"
TASKS = ",".join(f"d{i}" for i in range(8))


def test_noise_reproduces_the_papers_table(capsys):
    assert main(["noise", "--sigma", "0.023", "--rollouts", "1,2,4,8,16"]) == 0
    out = capsys.readouterr().out
    for k, v in [(1, "0.07"), (2, "0.05"), (4, "0.035"), (8, "0.025"), (16, "0.02")]:
        assert f"| {k} | " in out and f"| {v} |" in out
    assert main(["noise", "--sigma", "0.023", "--rollouts", "2", "--json", "--effect", "0.05"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0]["table"] == 0.05 and data["rollouts_needed"] == 2


def test_noise_bad_input_is_one_line(capsys):
    assert main(["noise", "--rollouts", "1,x"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --rollouts")
    for opt, value in (("--z", "-1"), ("--z", "0"), ("--effect", "-0.1"), ("--effect", "0")):
        assert main(["noise", opt, value]) == 2, (opt, value)  # was a traceback, or a table of negatives
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {opt} must be positive"], err
    for opt, value in (("--sigma", "nan"), ("--z", "inf"), ("--effect", "nan"), ("--effect", "1e-300")):
        assert main(["noise", opt, value]) == 2, (opt, value)  # were ValueError / OverflowError tracebacks
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and opt.strip("-") in err[0], err


@pytest.fixture
def setup(tmp_path, monkeypatch):
    hr = init_harness(tmp_path / "harness")
    fix = hr.create_candidate(Edit(message="Stop without an answer less often", targets=ND,
                                   changes=[{"path": "lessons.md", "content": "- Always answer.\n"}]),
                              round=1)
    null = hr.create_candidate(Edit(message="Reword a lesson", targets=ND,
                                    changes=[{"path": "lessons.md", "content": "- Be nice.\n"}]), round=1)
    tasks = [SimTask(f"d{i}", "dev", 1.0, 0.0, {ND: 0.9} if i < 5 else {}) for i in range(8)]
    world = SimWorld(tasks, noise_sd=0.0)
    world.add(hr.main_head(), SimHarness(), "main")
    world.add(fix.commit, SimHarness(factor={ND: 0.0}), "fix")
    world.add(null.commit, SimHarness(), "null")
    runner = ScriptedRunner(world)
    monkeypatch.setattr(vcli, "make_runner", lambda settings, env, model, harness: runner)
    real_check = vcli.check_task_ids
    monkeypatch.setattr(vcli, "check_task_ids", lambda env, tasks: None)  # the simulated world's own task ids
    runner.real_check = real_check
    return hr, fix, null, runner


def test_verify_prints_the_gate_table_with_numbers(setup, capsys):
    hr, fix, _, runner = setup
    rc = main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "4",
               "--budget", "500"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "plan: behaviour_aware, 5 targeted" in out and "needs k>=" in out
    assert "ACCEPTED" in out
    for gate in ("behaviour", "sequential_gain", "no_regression", "attribution", "guard"):
        assert f"| {gate} | pass |" in out
    assert "resolvable=" in out and "incidence_baseline=" in out and "boundary=" in out
    paid = runner.rollouts
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "4"]) == 0
    assert runner.rollouts == paid  # rerun: every rollout comes from the cache
    assert "rollouts paid 0 (" in capsys.readouterr().out


def test_verify_rejects_a_null_edit_with_exit_1_and_json(setup, capsys):
    hr, _, null, _ = setup
    rc = main(["verify", null.branch, "--harness", str(hr.path), "--tasks", TASKS, "--json", "--record"])
    assert rc == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["accepted"] is False and verdict["commit"] == null.commit
    assert {g["gate"] for g in verdict["gates"] if not g["passed"]} >= {"behaviour", "sequential_gain"}
    assert hr.verdict_of(null.commit) is not None  # --record stored it as a note


def test_verify_says_undecided_and_how_many_more_rollouts_decide_it(setup, capsys):
    hr, _, _, runner = setup
    faint = hr.create_candidate(Edit(message="Answer a little more often", targets=ND,
                                     changes=[{"path": "lessons.md", "content": "- Answer when you can.\n"}]),
                                round=1)
    runner.world.add(faint.commit, SimHarness(factor={ND: 0.8}), "faint")  # 0.9 -> 0.72: a gain of 0.18
    assert main(["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]) == 1
    out = capsys.readouterr().out
    assert "UNDECIDED (undecided: the targeted gain did not cross" in out and "REJECTED" not in out
    assert "| sequential_gain | FAIL |" in out and out.count("| FAIL |") == 1
    assert "about 140 more rollouts needed; re-run with --rollouts 11" in out
    assert "one re-verification is allowed" in out
    paid = runner.rollouts
    # what it asked for decides it, and the rollouts already paid are reused
    assert main(["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "11"]) == 0
    out = capsys.readouterr().out
    assert "ACCEPTED" in out and runner.rollouts - paid < 2 * 5 * 22


def test_verify_with_too_small_budget_spends_nothing(setup, capsys):
    hr, fix, _, runner = setup
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--budget", "10"]) == 2
    assert "budget exhausted" in capsys.readouterr().err
    assert runner.rollouts == 0
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--anchor-rollouts", "1"]) == 2
    assert "--anchor-rollouts must be 2 to 1,000 rollouts per task, not 1" in capsys.readouterr().err


def test_verify_rollouts_past_a_rounds_seeds_is_one_error_line_before_any_rollout(setup, capsys):
    """--rollouts 600 under the default sequential_max_factor 2 gave each task 1,200 seeds, into the next round's."""
    hr, fix, _, runner = setup
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "600"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --rollouts: 600 rollouts per task at verification.sequential_max_factor 2 is 1,200 seeds per task in "
        "one round, past the 1,000 a round has (round r's fresh seeds are 1,000 x (r + 1) + i): at most 500 at "
        "verification.sequential_max_factor 2 (or verification.sequential = false)"]
    assert runner.rollouts == 0
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "600",
                 "--set", "verification.sequential=false", "--budget", "0"]) == 2
    assert "budget exhausted" in capsys.readouterr().err  # taken (off sequential): stopped by the budget instead


def test_verify_unknown_strategy_and_missing_tasks_are_clear_errors(setup, capsys):
    hr, fix, _, _ = setup
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--strategy", "x"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", "@/nonexistent"]) == 2
    assert "/nonexistent: no such file or directory" in capsys.readouterr().err


def test_verify_tasks_from_a_file_that_is_no_text_file_is_one_error_line(setup, tmp_path, capsys):
    """--tasks @FIFO hung, @/dev/zero grew memory without end, bytes not UTF-8 were a UnicodeDecodeError traceback."""
    import os

    hr, fix, _, runner = setup
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "bin.txt").write_bytes(b"d0\n\xff\n")
    device = "not a regular file (a FIFO, socket or device is refused); expected a task list file"
    for path, reason in ((tmp_path / "fifo", device), ("/dev/zero", device),
                         (tmp_path / "bin.txt", "not UTF-8 text (byte 4); a task list is one id a line")):
        assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", f"@{path}"]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]
    assert runner.rollouts == 0


def test_verify_keys_rollouts_as_runs_do(setup, monkeypatch):
    """`verify` builds the run's chain: same cache file, model spec and env version, so it reuses a run's rollouts."""
    import os
    from pathlib import Path

    from evoharness.config import Settings
    from evoharness.envs import get_environment
    from evoharness.verification.cache import RolloutCache, cache_key
    from evoharness.verification.chain import env_version

    hr, fix, _, _ = setup
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--rollouts", "2"]) == 0
    run = Settings().run
    cache = RolloutCache(Path(os.environ["EVOHARNESS_HOME"]) / "rollout-cache.sqlite")
    key = cache_key(hr.tree_hash(hr.main_head()), "d0", 0, 0, run.model, env_version(run.env, get_environment(run.env)))
    assert cache.has(key)  # exactly the key a run on the defaults (graph/wiring.py) looks up
    cache.close()


def test_verify_with_unknown_task_ids_fails_before_spending(setup, capsys, monkeypatch):
    hr, fix, _, runner = setup
    monkeypatch.setattr(vcli, "check_task_ids", runner.real_check)
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", "contact_0,nope,d0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown task id(s) in synthetic: 'nope', 'd0'" in err[0]
    assert runner.rollouts == 0


def test_verify_with_an_unknown_strategy_fails_before_spending(setup, capsys):
    """`--strategy behaviour` (found by scripts/fuzz_cli.py --seed 9) measured main's anchor, paying its rollouts,
    and only then said 'unknown strategy': the name is now checked with the other arguments, before any rollout."""
    hr, fix, _, runner = setup
    assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS, "--strategy", "behaviour"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown strategy 'behaviour' (valid: behaviour_aware" in err[0], err
    assert runner.rollouts == 0


def _faint(hr, runner, content="- Answer when you can.\n"):
    faint = hr.create_candidate(Edit(message="Answer a little more often", targets=ND,
                                     changes=[{"path": "lessons.md", "content": content}]), round=1)
    runner.world.add(faint.commit, SimHarness(factor={ND: 0.8}), "faint")  # a gain of 0.18: undecided at k=4
    return faint


def test_a_second_re_verification_of_an_undecided_candidate_is_refused_before_spending(setup, capsys):
    """Test, re-verification, then refused: a third test would let a null edit pass with more than 2x alpha."""
    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main(args) == 1 and "UNDECIDED" in capsys.readouterr().out  # no --record: recorded all the same
    assert main([*args, "--rollouts", "4"]) == 1  # the same test again (from the cache): it counts all the same
    out = capsys.readouterr().out
    assert "re-verification of" in out and "the last one allowed" in out
    assert "UNDECIDED" in out and "undecided again after its one re-verification" in out and "re-run with" not in out
    paid = runner.rollouts
    for k in ("11", "4"):  # what the first verdict asked for, or the first k again: refused alike
        assert main([*args, "--rollouts", k]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {faint.commit[:10]}: already re-verified once"), err
        assert "undecided, undecided" in err[0]
    assert runner.rollouts == paid  # refused before any rollout
    tests = RetestLog(hr).tests(faint.commit, hr.main_head())
    assert [(t["outcome"], t["k"]) for t in tests] == [("undecided", 4), ("undecided", 4)]


def test_the_same_edit_recommitted_is_the_same_candidate_for_the_bound(setup, capsys):
    """An amended or re-made commit of the same tree (same edit, new sha) reads the same cached rollouts and is
    the same hypothesis: its tests count with the first commit's, so re-committing does not buy a third test."""
    import git

    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main(args) == 1
    assert main([*args, "--rollouts", "4"]) == 1
    capsys.readouterr()
    g = git.Repo(hr.path)
    old = g.commit(faint.commit)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z"}
    again = g.git.commit_tree(old.tree.hexsha, "-p", old.parents[0].hexsha, "-m", old.message, env=env)
    assert again != old.hexsha
    g.git.branch("-f", faint.branch, again)  # what `git commit --amend --no-edit` on the branch does
    runner.world.add(again, SimHarness(factor={ND: 0.8}), "faint again")
    paid = runner.rollouts
    assert main([*args, "--rollouts", "11"]) == 2  # was 0: the third test ran, and accepted
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {again[:10]}: already re-verified once"), err
    assert runner.rollouts == paid
    assert [t["outcome"] for t in RetestLog(hr).tests(again, hr.main_head())] == ["undecided", "undecided"]


def test_the_one_re_verification_may_accept_and_a_re_run_of_an_accepted_verdict_is_not_limited(setup, capsys):
    hr, fix, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main(args) == 1
    assert main([*args, "--rollouts", "11"]) == 0 and "ACCEPTED" in capsys.readouterr().out
    assert main([*args, "--rollouts", "11"]) == 0  # replayed from the cache: the same verdict
    for _ in range(3):  # never undecided: nothing to bound
        assert main(["verify", fix.branch, "--harness", str(hr.path), "--tasks", TASKS]) == 0


def test_an_undecided_verdict_a_run_noted_counts_as_the_first_test(setup, capsys):
    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main([*args, "--record", "--json"]) == 1  # as a run does: the verdict in the candidate's note
    assert len(RetestLog(hr).tests(faint.commit, hr.main_head())) == 1  # the note and the record: one test
    RetestLog(hr)._update(hr.repo.commit(faint.commit).hexsha, lambda tests: [])  # only the verdict note is left
    assert [t["outcome"] for t in RetestLog(hr).tests(faint.commit, hr.main_head())] == ["undecided"]
    assert main([*args, "--rollouts", "4"]) == 1
    assert main([*args, "--rollouts", "11"]) == 2
    assert "already re-verified once" in capsys.readouterr().err


def test_a_test_that_produced_no_verdict_leaves_no_record_and_a_dead_reservation_does_not_count(setup, capsys):
    import socket

    from evoharness.verification.retests import refusal

    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main([*args, "--budget", "10"]) == 2  # budget exhausted before any rollout: not a test
    log = RetestLog(hr)
    assert log.tests(faint.commit, hr.main_head()) == []
    sha = hr.repo.commit(faint.commit).hexsha
    dead = {"base": hr.main_head(), "outcome": "running", "host": socket.gethostname(), "pid": 2 ** 22 + 12345}
    log._update(sha, lambda tests: [dead])
    assert log.tests(faint.commit, hr.main_head()) == []  # its process is gone
    live = {**dead, "host": "another-host"}
    assert "in progress" in refusal([live])
    assert refusal([{"outcome": "undecided"}]) is None and refusal([{"outcome": "rejected"}] * 3) is None
    assert "already re-verified" in refusal([{"outcome": "undecided"}, {"outcome": "rejected"}])
    assert refusal([{"outcome": "undecided"}, {"outcome": "accepted"}]) is None


def test_a_verdict_on_the_branch_after_dropped_hunks_is_recorded_on_that_commit_too(setup):
    """Refused hunks dropped: the verdict is on the branch's new head, which the next `verify` resolves to."""
    from evoharness.harness_repo.models import Verdict

    hr, fix, null, _ = setup
    log, base = RetestLog(hr), hr.main_head()
    with log.test(fix.commit, base, 4) as slot:
        assert slot["number"] == 1 and not slot["reverification"]
        slot["verdict"] = Verdict(candidate=fix.branch, commit=null.commit, base=base, accepted=False,
                                  measurements={"needs_rollouts": 80, "suggested_k": 9})
    assert [t["outcome"] for t in log.tests(null.commit, base)] == ["undecided"]
    assert [t["outcome"] for t in log.tests(fix.commit, base)] == ["undecided"]
    assert log.check(null.commit, base) == (2, True)
    assert log.tests(null.commit, "0" * 40) == []  # another main head: another hypothesis


def _twice_undecided(hr, runner, capsys):
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main(args) == 1
    assert main([*args, "--rollouts", "4"]) == 1
    assert main([*args, "--rollouts", "11"]) == 2
    capsys.readouterr()
    return faint, args


def test_an_empty_commit_on_main_is_the_same_main_for_the_bound(setup, capsys):
    """A new main head with main's tree (an empty commit) is the same hypothesis; it bought a third test, which
    accepted (exit 0). A main head that changes the tree starts afresh."""
    import git

    hr, _, _, runner = setup
    faint, args = _twice_undecided(hr, runner, capsys)
    g = git.Repo(hr.path)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    old = hr.main_head()
    empty = g.git.commit_tree(g.commit(old).tree.hexsha, "-p", old, "-m", "nothing", env=env)
    g.git.update_ref(hr.main_ref, empty)
    runner.world.add(empty, SimHarness(), "main, once more")
    paid = runner.rollouts
    assert main([*args, "--rollouts", "11"]) == 2  # was 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {faint.commit[:10]}: already re-verified once"), err
    assert runner.rollouts == paid
    # main moved for real (another tree): another hypothesis
    (hr.path / "notes.txt").write_text("main moved\n")
    g.index.add(["notes.txt"])
    moved = g.git.commit_tree(g.git.write_tree(), "-p", empty, "-m", "moved", env=env)
    g.git.update_ref(hr.main_ref, moved)
    runner.world.add(moved, SimHarness(), "main, moved")
    assert RetestLog(hr).tests(faint.commit, moved) == []


def test_another_notes_ref_does_not_start_the_count_again(setup, capsys):
    """`--set harness_repo.notes_ref=other` read an empty record under refs/notes/other-tests: a third test ran and
    accepted (exit 0). The tests recorded under any notes ref count."""
    hr, _, _, runner = setup
    faint, args = _twice_undecided(hr, runner, capsys)
    paid = runner.rollouts
    assert main(["--set", "harness_repo.notes_ref=other", *args, "--rollouts", "11"]) == 2  # was 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already re-verified once" in err[0], err
    assert runner.rollouts == paid


def test_a_verdict_noted_under_another_notes_ref_counts(setup, capsys):
    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    assert main(["--set", "harness_repo.notes_ref=other", *args, "--record", "--json"]) == 1
    RetestLog(hr)._update(hr.repo.commit(faint.commit).hexsha, lambda tests: [])  # (the default ref's: none)
    log = RetestLog(hr)
    log.ref = "other-tests"
    log._update(hr.repo.commit(faint.commit).hexsha, lambda tests: [])  # only the verdict note under 'other' left
    assert [t["outcome"] for t in RetestLog(hr).tests(faint.commit, hr.main_head())] == ["undecided"]
    assert main([*args, "--rollouts", "4"]) == 1
    assert main([*args, "--rollouts", "11"]) == 2
    assert "already re-verified once" in capsys.readouterr().err


def test_a_reservation_left_on_another_host_is_released_on_the_users_word(setup, capsys):
    """A verification killed on another host left its reservation, which blocked every later test of the
    candidate until the note was edited by hand (docs/verification.md)."""
    import os
    import socket

    hr, _, _, runner = setup
    faint = _faint(hr, runner)
    args = ["verify", faint.branch, "--harness", str(hr.path), "--tasks", TASKS]
    log, sha = RetestLog(hr), hr.repo.commit(faint.commit).hexsha
    left = {"base": hr.main_head(), "outcome": "running", "host": "another-host", "pid": 4242, "k": 4,
            "at": "2026-12-04T10:00:00Z"}
    log._update(sha, lambda tests: [left])
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "in progress (pid 4242 on another-host" in err[0] and "--release-reservation" in err[0]
    assert runner.rollouts == 0
    # one whose process runs on this host is no leftover: refused, kept
    here = {**left, "host": socket.gethostname(), "pid": os.getpid()}
    log._update(sha, lambda tests: [*tests, here])
    release = ["verify", faint.branch, "--harness", str(hr.path), "--release-reservation"]
    assert main(release) == 2
    assert f"runs on this host (pid {os.getpid()}" in capsys.readouterr().err
    log._update(sha, lambda tests: [t for t in tests if t != here])
    assert main(release) == 0
    out = capsys.readouterr().out
    assert "released the reservation of pid 4242 on another-host (since 2026-12-04T10:00:00Z)" in out
    assert "1 reservation(s)" in out
    assert log.tests(faint.commit, hr.main_head()) == []
    assert main(args) == 1 and "UNDECIDED" in capsys.readouterr().out  # the test runs now
    assert main(release) == 0 and ": none was held" in capsys.readouterr().out
    assert main(["verify", faint.branch, "--harness", str(hr.path)]) == 2
    assert capsys.readouterr().err.strip() == "error: evoharness verify: missing option --tasks (see evoharness " \
                                              "verify --help)"
