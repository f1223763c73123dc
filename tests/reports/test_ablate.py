"""`evoharness ablate`: leave-one-out over merged edits, in throwaway worktrees; main never moves."""

from __future__ import annotations

import json
import shutil

import git
import pytest

from evoharness.config import Settings
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, FileChange, Verdict
from evoharness.harness_repo.signing import sign
from evoharness.reports.ablate import revert_merge
from tests.reports.conftest import cli


def _git_state(path) -> dict:
    r = git.Repo(path)
    return {"refs": r.git.for_each_ref(), "worktrees": r.git.worktree("list", "--porcelain"),
            "head": r.git.symbolic_ref("HEAD"), "status": r.git.status("--porcelain")}


def test_ablate_a_run_measures_the_drop_and_leaves_every_ref_alone(own_run, tmp_path, capsys):
    root, run_dir = own_run
    summary = json.loads((run_dir / "summary.json").read_text())
    harness = summary["harness_repo"]
    before = _git_state(harness)
    out = tmp_path / "abl.json"
    assert cli("ablate", str(run_dir), "--rollouts", "8", "--out", str(out)) == 0
    assert _git_state(harness) == before  # no branch (main included) moved, no worktree left behind
    text = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["main"] == summary["main"] and len(result["edits"]) == len(summary["merged"]) == 1
    edit = result["edits"][0]
    merge = git.Repo(harness).commit(edit["merge_commit"])
    assert edit["applies"] and edit["commit"] not in before["refs"]
    # the single merge reverted: main's head minus the edit is the pre-merge tree again
    assert git.Repo(harness).commit(edit["commit"]).tree.hexsha == merge.parents[0].tree.hexsha
    for split in ("dev", "heldout"):
        ev = edit["results"][split]
        assert ev["candidate"]["commit"] == summary["main"] and ev["baseline"]["commit"] == edit["commit"]
        assert ev["difference"] > ev["resolvable"] and ev["verdict"] == "better"  # the fix matters
        assert f"drop {ev['difference']:+.3f}" in text
    assert not (run_dir / "ablation.json").exists()  # --out given


def _merge(repo, edit: Edit, round: int) -> str:
    cand = repo.create_candidate(edit, round=round)
    verdict = sign(repo.repo, Verdict(candidate=cand.branch, commit=cand.commit, base=repo.main_head(),
                                      accepted=True, reason="test: accepted"))
    return repo.merge_verified(cand.branch, verdict)


def _lessons(text: str, msg: str) -> Edit:
    return Edit(message=msg, targets="F3.no_delivery", changes=[FileChange(path="lessons.md", content=text)])


def test_a_revert_that_does_not_apply_is_reported_and_the_others_are_measured(tmp_path, capsys):
    repo = init_harness(tmp_path / "harness")
    m1 = _merge(repo, _lessons("Deliver a final answer.\n", "first lesson"), 1)
    m2 = _merge(repo, _lessons("Deliver a final answer before the last step.\n", "refine the lesson"), 2)
    m3 = _merge(repo, Edit(message="raise steps", targets="F3.step_budget_exhausted", changes=[FileChange(
        path="policies.yaml", content=(repo.path / "policies.yaml").read_text().replace("max_steps: 12",
                                                                                        "max_steps: 14"))]), 3)
    main = repo.main_head()
    before = _git_state(repo.path)

    commit, reason = revert_merge(repo, main, m1)  # m2 rewrote the lines m1 added
    assert commit is None and "does not apply cleanly" in reason and "lessons.md" in reason
    commit, reason = revert_merge(repo, main, m3)
    assert reason is None
    tree = repo.repo.commit(commit).tree
    assert b"max_steps: 12" in tree["policies.yaml"].data_stream.read()
    assert tree["lessons.md"].data_stream.read() == b"Deliver a final answer before the last step.\n"
    assert _git_state(repo.path) == before

    # the same through the CLI, on a run directory that records these merges
    home = tmp_path / "state"
    run_dir = home / "runs" / "run-hand"
    run_dir.mkdir(parents=True)
    settings = Settings.model_validate({"home": home, "run": {"harness": repo.path, "rollouts": 1, "dev_limit": 2,
                                                             "heldout_limit": 2},
                                        "sandbox": {"backend": "inprocess"}})
    (run_dir / "settings.json").write_text(settings.model_dump_json())
    merged = [{"branch": f"candidate/r{i}", "commit": repo.repo.commit(m).parents[1].hexsha, "merge_commit": m,
               "round": i, "targets": "x"} for i, m in enumerate((m1, m2, m3), start=1)]
    (run_dir / "summary.json").write_text(json.dumps({
        "run_id": "run-hand", "status": "done", "harness_repo": str(repo.path), "main": main, "merged": merged,
        "anchors": [{"round": 0, "commit": repo.repo.git.rev_list("--max-parents=0", main), "mean": 0.5,
                     "sigma": 0.1, "k": 1}]}))
    assert cli("--set", f"home={home}", "ablate", "run-hand", "--split", "dev") == 0
    text = capsys.readouterr().out
    assert "candidate/r1: revert does not apply cleanly: conflicts in lessons.md" in text
    assert "candidate/r2 [dev]" in text and "candidate/r3 [dev]" in text
    result = json.loads((run_dir / "ablation.json").read_text())
    assert [e["applies"] for e in result["edits"]] == [False, True, True]
    assert result["splits"] == ["dev"] and set(result["edits"][1]["results"]) == {"dev"}
    assert _git_state(repo.path) == before
    # the report shows the conflict in its ablation table and plot
    assert cli("--set", f"home={home}", "report", "run-hand", "--out", str(tmp_path / "rep")) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "revert does not apply cleanly: conflicts in lessons.md" in md
    assert (tmp_path / "rep" / "ablation.png").read_bytes()[:4] == b"\x89PNG"


def test_ablate_of_a_run_that_merged_nothing(own_run, capsys):
    root, run_dir = own_run
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["merged"] = []
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert cli("ablate", str(root)) == 0
    assert "merged no edits: nothing to ablate" in capsys.readouterr().out
    assert json.loads((run_dir / "ablation.json").read_text())["edits"] == []
    shutil.rmtree(run_dir)
    assert cli("ablate", str(root)) == 2  # summary.json names a run whose directory is gone
    assert "run directory is gone" in capsys.readouterr().err


def test_a_second_ablate_or_evaluate_without_out_keeps_the_stored_result(own_run, tmp_path, capsys):
    """`ablate RUN` twice replaced the run's ablation.json silently (the first, perhaps with more rollouts or
    both splits, was lost); now the second is refused before any rollout, saying how to replace it."""
    root, run_dir = own_run
    assert cli("ablate", str(root), "--split", "dev", "--rollouts", "2") == 0
    stored = (run_dir / "ablation.json").read_bytes()
    capsys.readouterr()
    assert cli("ablate", str(root), "--split", "heldout", "--rollouts", "1") == 2
    out, err = capsys.readouterr()
    path = run_dir / "ablation.json"
    assert err.splitlines() == [f"error: {path}: already holds the ablation of this run, kept; pass --out {path} "
                                "to replace it, or --out OTHER.json to keep both"]
    assert out == "" and (run_dir / "ablation.json").read_bytes() == stored
    assert cli("ablate", str(root), "--split", "heldout", "--rollouts", "1", "--out", str(path)) == 0  # as told
    assert json.loads(path.read_text())["splits"] == ["heldout"]
    # evaluate --run stores evaluation-<split>.json the same way
    assert cli("evaluate", "--run", str(root), "--split", "dev", "--rollouts", "1") == 0
    evaluation = next(run_dir.glob("evaluation*dev*.json"))
    stored = evaluation.read_bytes()
    capsys.readouterr()
    assert cli("evaluate", "--run", str(root), "--split", "dev", "--rollouts", "2") == 2
    assert capsys.readouterr().err.startswith(f"error: {evaluation}: already holds the dev evaluation of this run")
    assert evaluation.read_bytes() == stored


def test_an_out_never_replaces_what_the_run_recorded_or_writes_into_its_harness(own_run, tmp_path, capsys):
    """`ablate RUN --out RUN_DIR/summary.json` (settings.json, the demo's summary.json) replaced the run's own
    record and the run could no longer be read; a report or result written into the harness repository left
    untracked files in the tree the run evolves. Refused before any rollout; a result file may be named."""
    root, run_dir = own_run
    recorded = [run_dir / "summary.json", run_dir / "settings.json", root / "summary.json",
                next(p for p in (root / "state").rglob("*.sqlite*") if p.is_file())]
    before = {p: p.read_bytes() for p in recorded}
    for path in recorded:
        assert cli("ablate", str(root), "--split", "dev", "--rollouts", "1", "--out", str(path)) == 2
        assert capsys.readouterr().err == (f"error: {path}: is a file the run recorded (its state, settings or "
                                           "summary), never replaced; name another file\n")
    assert cli("evaluate", "--run", str(root), "--split", "dev", "--out", str(run_dir / "settings.json")) == 2
    assert "is a file the run recorded" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in recorded} == before
    harness = root / "harness"
    for args in (["ablate", str(root), "--out", str(harness / "ablation.json")],
                 ["report", str(root), "--out", str(harness / "prompts")]):
        assert cli(*args) == 2
        assert capsys.readouterr().err.startswith(f"error: {args[-1]}: is inside the run's harness repository (")
    assert git.Repo(harness).git.status("--porcelain") == ""
    assert cli("report", str(root), "--out", str(run_dir)) == 0  # a directory that gets new files: fine


def test_a_copied_demo_directory_is_its_own_run_not_the_original(own_run, tmp_path, capsys):
    """summary.json records the run directory's absolute path: `ablate COPY` read and wrote the original's."""
    root, run_dir = own_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert cli("ablate", str(copy), "--split", "dev", "--rollouts", "1") == 0
    assert f"wrote {copy / 'state' / 'runs' / run_dir.name / 'ablation.json'}" in capsys.readouterr().out
    assert not (run_dir / "ablation.json").exists()


def test_a_copied_demo_directory_measures_the_copys_harness(own_run, tmp_path, capsys):
    """The run records its harness's absolute path: `ablate COPY` rolled out the original's harness (results for
    another repository, silently; with the original gone, an error about a directory the user never named)."""
    root, run_dir = own_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    original = _git_state(root / "harness")
    assert cli("ablate", str(copy), "--split", "dev", "--rollouts", "1", "--out", str(tmp_path / "a.json")) == 0
    assert _git_state(root / "harness") == original
    # the original's harness replaced by another repository (a demo run again into the same directory)
    shutil.rmtree(root / "harness")
    init_harness(root / "harness")
    capsys.readouterr()
    assert cli("ablate", str(copy), "--split", "dev", "--rollouts", "1", "--out", str(tmp_path / "b.json")) == 0
    result = json.loads((tmp_path / "b.json").read_text())
    summary = json.loads((copy / "summary.json").read_text())
    assert result["main"] == summary["main"] and result["edits"][0]["applies"]
    assert git.Repo(copy / "harness").commit(result["edits"][0]["commit"])  # the revert was made in the copy
    assert cli("report", str(copy), "--out", str(tmp_path / "rep")) == 0
    assert f"| Harness repo | {copy / 'harness'} (main" in (tmp_path / "rep" / "report.md").read_text()
    # a copy without the harness that was inside the copied directory: one error line, nothing measured
    shutil.rmtree(copy / "harness")
    capsys.readouterr()
    assert cli("ablate", str(copy), "--split", "dev", "--rollouts", "1", "--out", str(tmp_path / "c.json")) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"error: {copy / 'state' / 'runs' / run_dir.name}: the run was recorded under {root}, with its "
                    f"harness repository at {root / 'harness'}; its copy under {copy} has no {copy / 'harness'} "
                    "(copy the harness with the run, or run it from where it was)")
    assert not (tmp_path / "c.json").exists()


def test_a_moved_run_directory_keeps_a_harness_that_lay_outside_it(tmp_path):
    from evoharness.graph.moved import moved_harness

    (tmp_path / "b" / "demo" / "harness").mkdir(parents=True)
    old, new = (tmp_path / side / "demo" / "state" / "runs" / "run-1" for side in ("a", "b"))
    assert moved_harness(new, old, tmp_path / "a" / "demo" / "harness") == tmp_path / "b" / "demo" / "harness"
    assert moved_harness(new, old, tmp_path / "proj" / "h") == tmp_path / "proj" / "h"  # outside what moved
    assert moved_harness(old, old, tmp_path / "a" / "demo" / "harness") == tmp_path / "a" / "demo" / "harness"
    assert moved_harness(new, None, tmp_path / "x") == tmp_path / "x"  # nothing recorded: as recorded


def test_a_run_home_moved_alone_keeps_the_harness_that_stayed(tmp_path):
    from evoharness.errors import InputError
    from evoharness.graph.moved import moved_harness

    (tmp_path / "x" / "u" / "h").mkdir(parents=True)  # the harness stays at ~/h; ~/.evoharness moved to /y
    old = tmp_path / "x" / "u" / ".evoharness" / "runs" / "r"
    new = tmp_path / "y" / ".evoharness" / "runs" / "r"
    new.mkdir(parents=True)
    assert moved_harness(new, old, tmp_path / "x" / "u" / "h") == tmp_path / "x" / "u" / "h"  # was refused
    old.mkdir(parents=True)  # the original run is still there: a copy without its harness is refused, as before
    with pytest.raises(InputError):
        moved_harness(new, old, tmp_path / "x" / "u" / "h")


class _Cut:
    """What `ablate` / `compare` return, measured already, whose file the disk then refuses: the file size limit
    (RLIMIT_FSIZE, which fails a write as a full disk does) is set as the measurement ends."""

    def __init__(self, limits: list) -> None:
        self.limits = limits

    def __call__(self, *args, **kwargs) -> _Cut:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        self.limits.append((soft, hard))
        resource.setrlimit(resource.RLIMIT_FSIZE, (4_096, hard))
        return self

    def model_dump_json(self, indent=None) -> str:
        return json.dumps({"edits": ["x" * 100_000]}, indent=indent)


@pytest.mark.parametrize("command", ["ablate", "evaluate --run", "evaluate --harness"])
def test_a_result_the_disk_refuses_is_no_cut_file(own_run, tmp_path, capsys, monkeypatch, command):
    """ablation.json and evaluation-<split>.json were written in place: a full disk left a cut file, which `report`
    then refused ("unreadable") and `ablate` kept ("already holds the ablation of this run, kept"). Now a result is
    whole or absent, and an --out given keeps an earlier file whole."""
    import resource

    root, run_dir = own_run
    limits: list = []
    monkeypatch.setattr("evoharness.reports.jobs.ablate", _Cut(limits))
    monkeypatch.setattr("evoharness.reports.jobs.compare", _Cut(limits))
    monkeypatch.setattr("evoharness.reports.measure.compare", _Cut(limits))
    harness = json.loads((run_dir / "summary.json").read_text())["harness_repo"]
    args = {"ablate": ["ablate", str(root)], "evaluate --run": ["evaluate", "--run", str(root), "--split", "dev"],
            "evaluate --harness": ["evaluate", "--harness", harness, "--out", str(tmp_path / "ev.json")]}[command]
    (tmp_path / "ev.json").write_text('{"an earlier evaluation": true}')
    try:
        code = cli(*args)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits[0])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]  # progress aside
    written = {"ablate": run_dir / "ablation.json", "evaluate --run": run_dir / "evaluation-dev.json",
               "evaluate --harness": tmp_path / "ev.json"}[command]
    assert limits and code == 2 and err == [f"error: {written}: file too large"], err  # which file the disk refused
    assert not list(run_dir.glob("ablation*.json")) and not list(run_dir.glob("evaluation*.json"))
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    assert (tmp_path / "ev.json").read_text() == '{"an earlier evaluation": true}'
