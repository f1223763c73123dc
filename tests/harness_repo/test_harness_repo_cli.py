"""The CLI: init, candidate new, review, show, pr (against a local bare remote)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.harness_repo.repo import HarnessRepo

from .helpers import git, verdict_for

MINIMAL = {"message": "Add a loop lesson", "targets": "F3.repeated_action",
           "changes": [{"path": "lessons.md", "content": "- Never repeat a failing call.\n"}]}


@pytest.fixture
def cli_harness(tmp_path: Path, capsys) -> Path:
    root = tmp_path / "h"
    assert main(["init", str(root)]) == 0
    assert "initialised harness" in capsys.readouterr().out
    return root


def write_edit(tmp_path: Path, edit: dict) -> Path:
    path = tmp_path / "edit.json"
    path.write_text(json.dumps(edit))
    return path


def test_candidate_new_prints_the_branch(cli_harness: Path, tmp_path: Path, capsys) -> None:
    rc = main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(write_edit(tmp_path, MINIMAL)),
               "--round", "2"])
    assert rc == 0
    assert capsys.readouterr().out.strip() == "candidate/r2-add-a-loop-lesson"
    assert "Never repeat" in git(cli_harness, "show", "candidate/r2-add-a-loop-lesson:lessons.md")


@pytest.mark.parametrize(("edit", "reason"), [
    ({**MINIMAL, "changes": [{"path": "harness.toml", "content": "x"}]}, "harness.toml: path is protected"),
    ({**MINIMAL, "changes": [{"path": "../x.md", "content": "x"}]}, "'..' is not allowed"),
    ({"message": "m", "changes": [{"path": "lessons.md", "content": "x"}]}, "targets: Field required"),
    ({**MINIMAL, "changes": [{"path": "lessons.md"}]}, "give exactly one of"),
])
def test_candidate_new_rejects_with_the_reason(cli_harness: Path, tmp_path: Path, capsys, edit, reason) -> None:
    rc = main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(write_edit(tmp_path, edit))])
    err = capsys.readouterr().err
    assert rc == 2 and reason in err and "Traceback" not in err
    assert git(cli_harness, "for-each-ref", "refs/heads/candidate/") == ""


def test_candidate_new_on_a_missing_file_or_repo(cli_harness: Path, tmp_path: Path, capsys) -> None:
    assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(tmp_path / "nope.json")]) == 2
    assert "nope.json: no such file or directory" in capsys.readouterr().err
    edit = write_edit(tmp_path, MINIMAL)
    assert main(["candidate", "new", "--harness", str(tmp_path / "nowhere"), "--edit", str(edit)]) == 2
    assert "nowhere: no such file or directory" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    assert main(["candidate", "new", "--harness", str(tmp_path / "plain"), "--edit", str(edit)]) == 2
    assert "plain: not a git repository" in capsys.readouterr().err
    assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(edit), "--round", "-1"]) == 2
    assert capsys.readouterr().err.splitlines() == ["error: --round must be 0 to 10,000, not -1"]
    assert git(cli_harness, "for-each-ref", "refs/heads/candidate/") == ""  # no branch `candidate/r-1-...`


def test_candidate_new_on_an_edit_file_that_is_not_json_text(cli_harness: Path, tmp_path: Path, capsys) -> None:
    cases = {  # each was a traceback (UnicodeDecodeError, RecursionError)
        b"\xff\xfe\x00binary": "not UTF-8 text (EDIT.json is JSON)",
        b"[" * 100_000 + b"]" * 100_000: "JSON nested too deeply",
        b"[1, 2]": "EDIT.json: Input should be a valid dictionary or instance of Edit",
    }
    for i, (data, reason) in enumerate(cases.items()):
        edit = tmp_path / f"edit{i}.json"
        edit.write_bytes(data)
        assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(edit)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {edit}: {reason}"]
    assert git(cli_harness, "for-each-ref", "refs/heads/candidate/") == ""


def test_candidate_new_on_an_edit_that_is_no_file(cli_harness: Path, tmp_path: Path, capsys) -> None:
    """A FIFO hung the read; /dev/zero grew memory until the kernel stepped in."""
    import os

    os.mkfifo(tmp_path / "fifo.json")
    device = "not a regular file (a FIFO, socket or device is refused); expected a JSON edit file (EDIT.json)"
    for path, reason in ((tmp_path / "fifo.json", device), (Path("/dev/zero"), device),
                         (tmp_path, "is a directory, not a JSON edit file (EDIT.json)")):
        assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(path)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]
    assert git(cli_harness, "for-each-ref", "refs/heads/candidate/") == ""


def _make(cli_harness: Path, tmp_path: Path, capsys, edit: dict = MINIMAL) -> str:
    assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(write_edit(tmp_path, edit)),
                 "--round", "1"]) == 0
    return capsys.readouterr().out.strip()


def test_review_lists_status_and_diffstat(cli_harness: Path, tmp_path: Path, capsys) -> None:
    branch = _make(cli_harness, tmp_path, capsys)
    other = _make(cli_harness, tmp_path, capsys, {**MINIMAL, "message": "Second idea"})
    hr = HarnessRepo(cli_harness)
    hr.record_verdict(verdict_for(hr, branch))
    assert main(["review", "--harness", str(cli_harness), "--json"]) == 0
    rows = {r["branch"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[branch]["status"] == "verified" and rows[other]["status"] == "pending"
    assert rows[branch]["targets"] == "F3.repeated_action" and len(rows[branch]["commit"]) == 40
    assert rows[branch]["diffstat"] == {"files": ["lessons.md"], "insertions": 1, "deletions": 0}
    assert rows[branch]["verdict"].startswith("accepted, gates 2/2")
    assert main(["review", "--harness", str(cli_harness)]) == 0
    text = capsys.readouterr().out
    assert f"{branch}  " in text and "verified" in text and "+1 -0" in text


def test_review_calls_a_superseded_candidate_accepted_not_merged_as_the_run_summary_does(
        cli_harness: Path, tmp_path: Path, capsys) -> None:
    branch = _make(cli_harness, tmp_path, capsys)
    other = _make(cli_harness, tmp_path, capsys, {**MINIMAL, "message": "Second idea"})
    hr = HarnessRepo(cli_harness)
    v = verdict_for(hr, branch)  # what the gate records for an accepted candidate another one beat to main
    hr.reject(branch, v.model_copy(update={
        "accepted": False, "reason": "accepted but superseded by candidate/r1-x (main moved: re-verify next round)"}))
    hr.reject(other, verdict_for(hr, other).model_copy(update={"accepted": False, "reason": "gain too small"}))
    assert main(["review", "--harness", str(cli_harness), "--json"]) == 0
    rows = {r["branch"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[branch]["status"] == "superseded"
    assert rows[branch]["verdict"] == ("accepted, not merged, gates 2/2: superseded by candidate/r1-x "
                                       "(main moved: re-verify next round)")
    assert rows[other]["status"] == "rejected" and rows[other]["verdict"] == "rejected, gates 2/2: gain too small"
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", "nowhere"]) == 2
    assert "accepted, not merged (superseded by candidate/r1-x" in capsys.readouterr().err


def test_show_prints_evidence_and_diff(cli_harness: Path, tmp_path: Path, capsys) -> None:
    branch = _make(cli_harness, tmp_path, capsys, {**MINIMAL, "evidence": ["traj-17@3"], "critic": "accept"})
    assert branch.startswith("candidate/r1-add-a")
    assert main(["show", "r1-add-a", "--harness", str(cli_harness)]) == 0  # a unique prefix is enough
    out = capsys.readouterr().out
    assert "evidence   traj-17@3" in out and "+- Never repeat a failing call." in out and "status     pending" in out
    assert main(["show", "candidate/none", "--harness", str(cli_harness)]) == 2
    assert "no such candidate" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["- Never repeat a failing call.\n", "no newline at the end"])
def test_show_ends_its_output_with_a_newline(cli_harness: Path, tmp_path: Path, capsys, content: str) -> None:
    # the diff is the last thing printed: without a final newline the shell's prompt joined its last line
    branch = _make(cli_harness, tmp_path, capsys, {**MINIMAL, "changes": [{"path": "lessons.md", "content": content}]})
    assert main(["show", branch, "--harness", str(cli_harness)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and not out.endswith("\n\n")
    assert out.rstrip("\n").splitlines()[-1] in ("+" + content.rstrip("\n"), "\\ No newline at end of file")


def test_pr_pushes_to_a_bare_remote_and_writes_the_body(cli_harness: Path, tmp_path: Path, capsys) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(cli_harness, "remote", "add", "origin", str(remote))
    branch = _make(cli_harness, tmp_path, capsys,
                   {**MINIMAL, "evidence": ["traj-1", "traj-2"], "predicted_flips": ["task-9"],
                    "rationale": "Agents loop on failing calls."})
    hr = HarnessRepo(cli_harness)
    hr.record_verdict(verdict_for(hr, branch))
    body_file = tmp_path / "body.md"
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", "origin",
                 "--body-out", str(body_file)]) == 0
    assert git(remote, "rev-parse", branch) == hr.head_of(branch)
    assert "targeted gain beyond noise" in git(remote, "notes", "--ref=evoharness", "show", hr.head_of(branch))
    body = body_file.read_text()
    assert "### Hypothesis" in body and "Agents loop on failing calls." in body
    assert "- `traj-1`" in body and "- `traj-2`" in body and "`task-9`" in body
    assert "| gate | result | numbers | reason |" in body
    assert "| behaviour | pass | before=0.6000, after=0.2000 |  |" in body
    assert "1 file(s), +1 -0" in body and "- `lessons.md`" in body


def test_pr_to_an_unknown_remote_fails_cleanly(cli_harness: Path, tmp_path: Path, capsys) -> None:
    branch = _make(cli_harness, tmp_path, capsys)
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", "nowhere", "--allow-unverified"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: nowhere: not a remote of {cli_harness} (it has no remote; add one with")
    assert err.count("\n") == 1
    missing = tmp_path / "missing.git"
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(missing), "--allow-unverified"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {missing}: push failed: '{missing}' does not appear to be a git repository\n"


def test_pr_whose_body_cannot_be_written_pushes_nothing(cli_harness: Path, tmp_path: Path, capsys) -> None:
    """The branch was pushed first and the body written after: a --body-out that cannot be written failed with
    the branch already on the remote. Now the body is staged first; a failed push leaves an earlier body."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    branch = _make(cli_harness, tmp_path, capsys)
    hr = HarnessRepo(cli_harness)
    hr.record_verdict(verdict_for(hr, branch))
    (tmp_path / "afile").write_text("x")
    for body_out, reason in ((tmp_path, "is a directory"), (tmp_path / "afile" / "body.md", "afile: file exists")):
        assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(remote),
                     "--body-out", str(body_out)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("error: ") and reason in line, line
        assert git(remote, "for-each-ref") == ""  # nothing pushed
    earlier = tmp_path / "body.md"
    earlier.write_text("an earlier body\n")
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(tmp_path / "missing.git"),
                 "--body-out", str(earlier)]) == 2
    assert "push failed" in capsys.readouterr().err and earlier.read_text() == "an earlier body\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".body")) == []  # no staged file left
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(remote), "--body-out", str(earlier)]) == 0
    assert git(remote, "rev-parse", branch) == HarnessRepo(cli_harness).head_of(branch)
    assert "### Hypothesis" in earlier.read_text()


def _bare_remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    return remote


@pytest.mark.parametrize("state", ["pending", "rejected", "stale", "forged"])
def test_pr_refuses_a_candidate_verification_did_not_accept(cli_harness: Path, tmp_path: Path, capsys,
                                                            state: str) -> None:
    """`pr` pushed any candidate as a plain branch: a reviewer could merge an edit verification rejected."""
    remote = _bare_remote(tmp_path)
    branch = _make(cli_harness, tmp_path, capsys)
    hr = HarnessRepo(cli_harness)
    if state == "rejected":
        hr.reject(branch, verdict_for(hr, branch, accepted=False))
    elif state == "stale":  # accepted, but measured against a main that has moved since
        hr.record_verdict(verdict_for(hr, branch, base="0" * 40))
    elif state == "forged":  # a note claiming acceptance that this repository's verifier did not sign
        from evoharness.harness_repo.models import Verdict

        hr.record_verdict(Verdict(**verdict_for(hr, branch).model_dump(exclude={"signature"})))
    body = tmp_path / "body.md"
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(remote), "--body-out", str(body)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    reason = {"pending": "not verified", "rejected": "rejected by verification (gates 0/2: no gain)",
              "stale": "verified against an older main", "forged": "not verified (a note claims a verdict"}[state]
    assert line.startswith(f"error: {branch}: {reason}") and "--allow-unverified" in line, line
    assert git(remote, "for-each-ref") == "" and not body.exists()  # nothing pushed, no body


def test_pr_allow_unverified_pushes_it_marked_do_not_merge(cli_harness: Path, tmp_path: Path, capsys) -> None:
    remote = _bare_remote(tmp_path)
    branch = _make(cli_harness, tmp_path, capsys)
    hr = HarnessRepo(cli_harness)
    hr.reject(branch, verdict_for(hr, branch, accepted=False))
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(remote), "--allow-unverified"]) == 0
    out = capsys.readouterr().out
    first, _, body = out.partition("\n\n")
    assert first == (f"pushed {branch} to {remote} as do-not-merge/{branch}: DO NOT MERGE, "
                     "rejected by verification (gates 0/2: no gain)")
    assert body.startswith("## DO NOT MERGE: Add a loop lesson\n\n> **Do not merge.** This candidate is rejected")
    assert "**rejected, gates 0/2: no gain**" in body  # the verdict table is still there
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/heads/") == f"refs/heads/do-not-merge/{branch}"
    assert git(remote, "rev-parse", f"do-not-merge/{branch}") == hr.head_of(branch)


def test_pr_of_a_verified_candidate_is_not_marked(cli_harness: Path, tmp_path: Path, capsys) -> None:
    remote = _bare_remote(tmp_path)
    branch = _make(cli_harness, tmp_path, capsys)
    hr = HarnessRepo(cli_harness)
    hr.record_verdict(verdict_for(hr, branch))
    assert main(["pr", branch, "--harness", str(cli_harness), "--remote", str(remote), "--allow-unverified"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"pushed {branch} to {remote}\n\n## Add a loop lesson\n") and "DO NOT MERGE" not in out
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/heads/") == f"refs/heads/{branch}"


def test_pr_of_a_branch_evoharness_did_not_make_is_one_error_line(cli_harness: Path, tmp_path: Path,
                                                                   capsys) -> None:
    """A hand-made candidate/ branch (no Targets: trailer): `pr` raised StopIteration (a traceback)."""
    remote = _bare_remote(tmp_path)
    git(cli_harness, "checkout", "-q", "-b", "candidate/r1-handmade")
    (cli_harness / "lessons.md").write_text("- hand made\n")
    git(cli_harness, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "hand made")
    git(cli_harness, "checkout", "-q", "main")
    for extra in ([], ["--allow-unverified"]):
        assert main(["pr", "candidate/r1-handmade", "--harness", str(cli_harness), "--remote", str(remote),
                     *extra]) == 2
        assert capsys.readouterr().err == "error: candidate/r1-handmade: branch has no commit with a Targets: trailer\n"
    assert git(remote, "for-each-ref") == ""


def test_the_remote_to_add_is_a_command_that_runs_as_printed(tmp_path: Path, capsys) -> None:
    """A harness at a path with a space: `git -C /x/my harness remote add ...` as printed ran git in `/x/my`."""
    import shlex

    root = tmp_path / "my harness"
    assert main(["init", str(root)]) == 0
    capsys.readouterr()
    branch = _make(root, tmp_path, capsys)
    assert main(["pr", branch, "--harness", str(root), "--remote", "nowhere", "--allow-unverified"]) == 2
    err = capsys.readouterr().err
    command = err.split("add one with `")[1].split("`")[0]
    assert shlex.split(command) == ["git", "-C", str(root), "remote", "add", "nowhere", "URL"]


@pytest.mark.parametrize(("edit", "reason"), [
    # half a UTF-16 surrogate pair ("\ud83d", a writer cutting text by UTF-16 units): a UnicodeEncodeError traceback
    ({**MINIMAL, "changes": [{"path": "lessons.md", "content": "- cut \ud83d\n"}]},
     "lessons.md: content holds half a UTF-16 surrogate pair ('\\ud83d'), which no UTF-8 file can hold"),
    ({**MINIMAL, "changes": [{"path": "prompts/\udc00.md", "content": "x\n"}]}, "path holds half a UTF-16"),
    # a path with a line break printed the error over two lines
    ({**MINIMAL, "changes": [{"path": "prompts/a\nb.md", "content": "x\n"}]},
     "error: 'prompts/a\\nb.md': path contains a control character"),
    # a class that is none: committed as `Failure-Class: F9`
    ({**MINIMAL, "failure_class": "F9"}, "failure_class: unknown class 'F9' (classes: F1, F2, F3, F4, E)"),
    # "yes", 1 or "no" for delete: coerced to a bool, so "yes" deleted lessons.md and "no" beside content wrote it
    ({**MINIMAL, "changes": [{"path": "lessons.md", "delete": "yes"}]},
     "changes.0.delete: Input should be a valid boolean (true or false, got 'yes')"),
    ({**MINIMAL, "changes": [{"path": "lessons.md", "delete": 1}]},
     "changes.0.delete: Input should be a valid boolean (true or false, got 1)"),
    ({**MINIMAL, "changes": [{"path": "lessons.md", "content": "x\n", "delete": "no"}]},
     "changes.0.delete: Input should be a valid boolean"),
    # a key the edit does not have was ignored: a misspelt message or rationale was committed without it
    ({**MINIMAL, "rationle": "why"}, "rationle: unknown key; did you mean rationale? (an edit has: message, targets, "
                                     "changes, failure_class, evidence, predicted_flips, critic, rationale)"),
    ({**MINIMAL, "changes": [{"path": "lessons.md", "content": "x\n", "mode": "0755"}]},
     "changes.0.mode: unknown key (a change has: path, content, diff, delete)"),
    # a NUL ends a git commit message: the candidate was committed without its Targets/Evidence trailers
    ({**MINIMAL, "message": "Add\u0000 a lesson"}, "message holds a NUL character"),
    ({**MINIMAL, "evidence": ["t1\u0000"]}, "evidence holds a NUL character"),
    ({**MINIMAL, "critic": "ok\u0000"}, "critic holds a NUL character"),
    ({**MINIMAL, "rationale": "because\u0000"}, "rationale holds a NUL character"),
    # a blank message was committed with an empty subject line
    ({**MINIMAL, "message": " \n\t"}, "message is blank (the commit subject)"),
    # a NUL in a lesson or prompt: committed, and git stores such a file as binary, so `show` and the PR diff said
    # only 'Binary files a/lessons.md and b/lessons.md differ' (what the edit wrote was hidden from review)
    ({**MINIMAL, "changes": [{"path": "lessons.md", "content": "- a\u0000b\n"}]},
     "error: lessons.md: file holds a NUL character (at offset 3)"),
    ({**MINIMAL, "changes": [{"path": "prompts/system.md", "content": "\u0000"}]},
     "error: prompts/system.md: file holds a NUL character (at offset 0)"),
])
def test_candidate_new_refuses_hostile_text_in_one_line(cli_harness: Path, tmp_path: Path, capsys, edit,
                                                        reason) -> None:
    path = tmp_path / "edit.json"
    path.write_text(json.dumps(edit, ensure_ascii=True))
    rc = main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and reason in err and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert git(cli_harness, "for-each-ref", "refs/heads/candidate/") == ""


@pytest.mark.parametrize(("data", "branch"), [
    (b"\xef\xbb\xbf" + json.dumps(MINIMAL).encode(), "candidate/r0-add-a-loop-lesson"),  # Notepad's UTF-8 BOM
])
def test_candidate_new_reads_an_edit_with_a_byte_order_mark(cli_harness: Path, tmp_path: Path, capsys, data,
                                                            branch) -> None:
    """It was "invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)", where every trace reader skips one."""
    path = tmp_path / "edit.json"
    path.write_bytes(data)
    assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(path)]) == 0
    assert capsys.readouterr().out.strip() == branch


def test_candidate_new_on_an_empty_edit_file_says_it_is_empty(cli_harness: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "edit.json"
    for data in (b"", b" \n\n"):
        path.write_bytes(data)
        assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(path)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: empty file (EDIT.json is a JSON object)"]


@pytest.mark.parametrize("argv", [["review"], ["show", "main"], ["rollout", "--env", "synthetic", "--tasks", "1",
                                                                   "--sandbox", "inprocess", "--out", "o.jsonl"]])
def test_main_at_a_commit_the_repository_lacks_is_one_error_line(cli_harness: Path, tmp_path: Path, capsys,
                                                                 monkeypatch, argv) -> None:
    """refs/heads/main naming an object the repository does not hold (a damaged or partly copied repository; found by
    scripts/fuzz_cli.py --seed 5, its 'main missing commit' state) was a ValueError traceback in review and show
    (reading the manifest) and in rollout (exporting the tree)."""
    monkeypatch.chdir(tmp_path)
    (cli_harness / ".git" / "refs" / "heads" / "main").write_text("0" * 40 + "\n")
    assert main([*argv, "--harness", str(cli_harness)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {cli_harness}: ") and "damaged" in err[0], err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("head", [b"garbage\n", b"", None])
@pytest.mark.parametrize("argv", [["review"], ["show", "main"], ["rollout", "--env", "synthetic", "--tasks", "1",
                                                                   "--sandbox", "inprocess", "--out", "o.jsonl"]])
def test_a_damaged_head_is_named_not_called_no_repository(cli_harness: Path, tmp_path: Path, capsys, monkeypatch,
                                                          argv, head) -> None:
    """A .git/HEAD git cannot read (garbage, empty, deleted) made git refuse the whole directory: review and show said
    'not a git repository' of a harness repo, and rollout used the work tree as a plain harness directory, whatever
    commit it was asked for (its trajectories carried no commit). Now each names the damaged HEAD and stops."""
    monkeypatch.chdir(tmp_path)
    if head is None:
        (cli_harness / ".git" / "HEAD").unlink()
    else:
        (cli_harness / ".git" / "HEAD").write_bytes(head)
    assert main([*argv, "--harness", str(cli_harness)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {cli_harness}: a damaged git repository: "), err
    assert f"{cli_harness}/.git/HEAD " in err[0] and "ref: refs/heads/main" in err[0], err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("name", ["/", "a..b", "x/", "a b", "v.lock", "@{x}", "", ".hidden"])
def test_a_notes_ref_git_cannot_name_is_one_setting_error(cli_harness: Path, tmp_path: Path, capsys, monkeypatch,
                                                          name) -> None:
    """`harness_repo.notes_ref = "/"` (found by scripts/fuzz_cli.py --seed 8, a value of the example config changed)
    was taken, and verify ended in a GitCommandError traceback writing its test record to refs/notes//-tests. A name
    git refuses as a ref is now the setting's one error line, before any work."""
    monkeypatch.chdir(tmp_path)
    assert main(["candidate", "new", "--harness", str(cli_harness), "--edit", str(write_edit(tmp_path, MINIMAL))]) == 0
    branch = capsys.readouterr().out.strip()
    assert main(["--set", f"harness_repo.notes_ref={name}", "verify", branch, "--harness", str(cli_harness),
                 "--tasks", "contact_0", "--env", "synthetic", "--model", "standin:weak", "--rollouts", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "harness_repo.notes_ref" in err[0], err
    assert git(cli_harness, "for-each-ref", "refs/notes/") == ""


def _main_commit_object_removed(h: Path) -> str:
    sha = git(h, "rev-parse", "main")
    (h / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    return f"refs/heads/main names commit {sha[:10]}, which cannot be read (the object is missing)"


def _bad_config(h: Path) -> str:
    (h / ".git" / "config").write_text("[core\nbad")
    return "a damaged git repository: git refuses it: bad config line 1 in file "


def _main_deleted(h: Path) -> str:
    git(h, "checkout", "-q", "-b", "other")
    git(h, "branch", "-q", "-D", "main")
    return "harness.toml on branch 'other' names 'main' as the main branch, which the repository lacks"


@pytest.mark.parametrize("state", [_main_commit_object_removed, _bad_config, _main_deleted])
@pytest.mark.parametrize("argv", [["review"], ["show", "main"], ["rollout", "--env", "synthetic", "--tasks", "1",
                                                                   "--sandbox", "inprocess", "--out", "o.jsonl",
                                                                   "--commit", "main"]])
def test_a_repo_git_cannot_read_main_of_is_named_so(cli_harness: Path, tmp_path: Path, capsys, monkeypatch, argv,
                                                     state) -> None:
    """Found by hand through `run` and `rollout` after git-state changes (the twenty-third session): main's commit
    object gone (or main packed at a missing commit) and main deleted under a harness whose HEAD is on another
    branch were told 'no harness.toml on the main branch (run `evoharness init` or adopt)' by review, show and run;
    a .git/config git cannot parse made rollout exit 1 with nothing on stderr (git's cat-file died: a broken pipe,
    which click ends silently) and review, show and run say 'no harness.toml'. Now each is one line naming it."""
    monkeypatch.chdir(tmp_path)
    words = state(cli_harness)
    rc = main([*argv, "--harness", str(cli_harness)])
    err = capsys.readouterr().err.splitlines()
    if state is _main_deleted and argv[0] == "rollout":
        assert rc == 2 and len(err) == 1 and "'main'" in err[0], err  # git's own words: no such ref
        return
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: {cli_harness}: ") and words in err[0], err
    assert not (tmp_path / "o.jsonl").exists()
