"""scripts/fuzz_cli.py, briefly: every command of the CLI once with mutated arguments, each exiting 0 or 2 with one
`error:` line and no traceback; and its checks catch what they are for. The long run is the script itself
(`scripts/fuzz_cli.py --budget 600`)."""

from __future__ import annotations

import io
import random
import subprocess
from pathlib import Path

import pytest

from evoharness.cli import command
from tests.modules import load_file

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fuzz_cli.py"


@pytest.fixture(scope="module")
def fuzz():
    return load_file(SCRIPT, "fuzz_cli", register=True)


def _leaves(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [" ".join(path)]
    return [leaf for name, sub in subs.items() for leaf in _leaves(sub, (*path, name))]


def test_the_commands_are_read_from_the_cli_itself(fuzz):
    table = fuzz.commands()
    assert sorted(table) == sorted(_leaves(command()))
    assert {"dataset export", "candidate new", "serve", "schema"} <= set(table)
    flags = {p.flag for p in table["rollout"]}
    assert {"--harness", "--env", "--out", "--set", "--config"} <= flags
    # an argument is passed as its value alone: typer's own click copy made `isinstance(p, click.Argument)` false,
    # and `label paths t.jsonl` was refused ('paths: no such file') before any label was made
    assert [p.name for p in table["label"] if p.flag is None] == ["paths"]
    assert [p.name for p in table["show"] if p.flag is None] == ["candidate"]


def test_the_checks_catch_a_traceback_a_second_line_an_odd_exit_and_a_changed_input(fuzz):
    def problems(rc, err, before=None, after=None, name="diagnose"):
        case = fuzz.Case(name, [name], rc=rc, err=err)
        fuzz.check(case, before or {}, after if after is not None else (before or {}))
        return case.problems

    assert problems(2, "error: x: no such file or directory\n") == []
    assert problems(0, "") == []
    assert problems(1, "Traceback (most recent call last):\nValueError\n") == ["traceback", "exit 1"]
    assert problems(2, "error: a\nerror: b\n") == ["2 error lines"]
    assert problems(2, "error: main\nfoo: no such candidate\n")[0].startswith("stderr lines that are no error")
    assert problems(2, "warning: 3 records skipped\nerror: x\n") == []
    assert problems(2, "") == ["0 error lines"]
    assert problems(2, "error: x\n", {"t.jsonl": "a"}, {"t.jsonl": "b"}) == ["refused, but changed or removed t.jsonl"]
    assert problems(2, "error: x\n", {"t.jsonl": "a"}, {}) == ["refused, but changed or removed t.jsonl"]
    assert problems(1, "", name="verify") == []  # rejected: verify's documented exit 1
    # a refused write that names nothing (standard output on /dev/full said only this), and an output taken inside .git
    assert problems(2, "error: no space left on device\n") == [
        "a refused write names no output: 'error: no space left on device'"]
    assert problems(2, "error: standard output: no space left on device\n") == []
    case = fuzz.Case("import", ["import", "t.jsonl", "--out", "h/.git/x"], rc=0)
    fuzz.check(case, {}, {})
    assert case.problems == ["took an output inside a git directory: h/.git/x"]
    case = fuzz.Case("init", ["init", "h/.GIT/h2"], rc=0)
    fuzz.check(case, {}, {})
    assert case.problems == ["took an output inside a git directory: h/.GIT/h2"]
    # a refusal that leaves a new file at its output; the progress lines of work whose result a full device refused
    case = fuzz.Case("dataset export", ["dataset", "export", "--out", "ex"], rc=2, err="error: x\n")
    fuzz.check(case, {"t.jsonl": "a"}, {"t.jsonl": "a", "ex/data.jsonl": "b", "other": "c"})
    assert case.problems == ["refused, but left an output behind: ex/data.jsonl"]
    case = fuzz.Case("evaluate", ["evaluate", "--out", "full"], rc=2,
                     err="[   0.0s] main on dev: 2 rollouts planned\nerror: full: no space left on device\n")
    fuzz.check(case, {}, {})
    assert case.problems == []
    case.argv, case.problems = ["evaluate", "--out", "e.json"], []
    fuzz.check(case, {}, {})
    assert case.problems == ["stderr lines that are no error or warning: '[   0.0s] main on dev: 2 rollouts planned'"]
    retry = "warning: http://127.0.0.1:9/v1/traces: Connection refused; retrying in 0.9 s\n"
    assert problems(2, retry + "error: --endpoint: ... 0 of 16 traces sent\n", name="export-otel") == []
    # the old retry line, without its warning prefix, is no longer let through
    old = "export-otel: http://127.0.0.1:9/v1/traces: Connection refused; retrying in 0.9 s\n"
    assert problems(2, old + "error: --endpoint: ... 0 of 16 traces sent\n", name="export-otel") != []


def test_every_command_once_exits_0_or_2_with_one_error_line(fuzz):
    out = io.StringIO()
    table = fuzz.commands()
    # a case's limit: approve / reject continue a real run (~13 s at load 16), so 20 s was a flake under load
    counts = fuzz.fuzz(budget_s=900, n=len(table), seed=0, timeout=60, out=out)
    assert {name: c["cases"] for name, c in counts.items()} == {name: 1 for name in table}
    assert sum(c["failures"] for c in counts.values()) == 0, out.getvalue()


def test_a_case_forked_from_a_process_holding_much_memory_still_has_room(fuzz, tmp_path):
    """A case's address-space limit counts from what the fuzzing process already holds: forked from a pytest worker
    that had run two thousand tests, a flat 4 GiB limit sat below the child's inherited size, and this rollout hung
    on a MemoryError (the clean-clone CI at e64012a, case 9)."""
    import mmap

    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    fuzz.build_workspace(workspace, runs=False)  # (the runs: ~20 s this test does not need)
    scratch.mkdir()
    case = fuzz.Case("rollout", ["rollout", "--harness", "h", "--env", "synthetic", "--out", "out-out/", "--model",
                                 "standin:weak", "--tasks", "2", "--seed", "0", "--commit", "main", "--workers", "1"])
    held = mmap.mmap(-1, 6 << 30)  # address space only, never touched: as a long-lived parent holds it
    try:
        fuzz.run_case(case, workspace, scratch, [], timeout=60)
    finally:
        held.close()
    assert (case.rc, case.problems) == (0, []), (case.rc, case.problems, case.err[-2000:])


def test_a_locked_index_or_a_merge_in_progress_told_as_uncommitted_changes_is_a_failure(fuzz, tmp_path):
    """The harness repo's odd states (GIT_STATES) are files written into its .git; a refusal that tells a locked index
    or a merge in progress as the user's uncommitted changes (what merge._check_worktree said before) is a failure."""
    told = "error: run r1 paused: the harness repository h has main checked out with uncommitted changes ...\n"
    for state, failed in (("index.lock", True), ("merge in progress", True), ("detached", False), (None, False)):
        case = fuzz.Case("verify", ["verify"], rc=2, err=told, git_state=state)
        fuzz.check(case, {}, {})
        assert case.problems == ([f"{state} in the harness repo named as uncommitted changes"] if failed else []), state
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path / "h")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "h"), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q",
                    "--allow-empty", "-m", "seed"], check=True)
    maker = fuzz.Maker(random.Random(0), [], tmp_path)
    made = set()
    for _ in range(200):
        files = []
        assert maker.one_change("h", files) == "h"
        if maker.git_state is not None:
            made.add(maker.git_state)
            assert files and all(name.startswith("h/.git/") and b"MAIN" not in data for name, data in files)
        maker.git_state = None
    assert made == set(fuzz.GIT_STATES)


def test_show_pr_verify_and_evaluate_get_working_values_that_reach_their_work(fuzz, tmp_path):
    """The workspace had no candidate branch and evaluate was given neither --harness nor --out: the fuzz's working
    values for show, pr and verify named a candidate that did not exist, and evaluate's were refused, so every case of
    the four was a refusal of its arguments (docs/security.md, the twenty-first session). Now the workspace holds a
    candidate with a verdict and a remote, and ``NEEDED`` gives each command what it needs to do its work."""
    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    fuzz.build_workspace(workspace, runs=False)  # (the runs: ~20 s this test does not need)
    scratch.mkdir()
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(0), [], workspace)
    for name, extra, codes in (("show", {}, {0}), ("verify", {}, {0, 1}),
                               ("evaluate", {"out": "out-eval.json"}, {0}),
                               ("pr", {"allow_unverified": True, "body_out": "out-body.md"}, {0})):
        params = table[name]
        values = {p.name: maker.valid(name, p) for p in params
                  if p.required or p.name in fuzz.NEEDED.get(name, ())}
        values.update({"candidate": fuzz.CANDIDATE} if "candidate" in values else {}, **extra)
        case = fuzz.Case(name, maker.assemble(name, params, values))
        fuzz.run_case(case, workspace, scratch, [], timeout=180)
        assert case.rc in codes and case.problems == [], (case.argv, case.rc, case.problems, case.err[-2000:])


def test_run_is_given_the_workspace_harness_and_its_deep_cases_change_it(fuzz, tmp_path, monkeypatch):
    """`run` has no --harness (it evolves the run.harness setting), so every case of it ran on the default ./harness,
    which the workspace has not: a refusal of its settings, and the harness repo's git states (GIT_STATES) never
    reached it (checked by hand only, the twenty-third session). Now ``SETTINGS_NEEDED`` gives it the workspace's repo
    and a small run that ends, and a deep case changes that repo as it does a --harness."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # fuzz_importers, as the script's own run finds it
    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    fuzz.build_workspace(workspace, runs=False)  # (the runs: ~20 s this test does not need)
    scratch.mkdir()
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(0), [], workspace)
    case = fuzz.Case("run", maker.assemble("run", table["run"], {}))
    fuzz.run_case(case, workspace, scratch, [], timeout=180)
    assert case.rc == 0 and case.problems == [], (case.argv, case.rc, case.problems, case.err[-2000:])
    states = set()
    for _ in range(300):
        argv, files = maker.deep("run", table["run"])
        assert "run.harness=h" in argv
        states.add(maker.git_state)
    assert set(fuzz.GIT_STATES) <= states, states


def test_every_trace_input_is_fuzzed_as_a_file_and_with_public_traces(fuzz, tmp_path, monkeypatch):
    """`diagnose`, `label` and `import` take their traces as text (a path or a run id), as do `export-otel`, `dataset
    enqueue` and `dataset export -t`: the fuzz read them as strings, gave two of them "x" as the working value, and
    no deep case ever changed a trace file of any of them. Now each is a path: its working value is the synthetic
    rollouts or a copy of a public trace set (tau-bench, Who&When Algorithm-Generated, mini-swe-agent; none of a
    held-out set), and deep and hostile cases hand it a mutated or damaged copy."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # fuzz_importers, as the script's own run finds it
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    fuzz.real_traces(workspace)
    assert all((workspace / name).stat().st_size > 1000 for name in fuzz.REAL_FILES)
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(1), ["run.seed"], workspace)
    (workspace / "t.jsonl").write_bytes((workspace / "real.jsonl").read_bytes())
    for name, param in fuzz.TRACE_INPUTS.items():
        assert next(p for p in table[name] if p.name == param).kind in ("path", "list-path"), name
        given, mutated = set(), 0
        for _ in range(200):
            argv, files = maker.argv(name, table[name])
            given.update(a for a in argv if a in fuzz.REAL_FILES)
            mutated += any(f.startswith("mut-") and f"{f}" in argv for f, _ in files)
        assert given and mutated >= 10, (name, given, mutated)
        assert given <= ({"real.jsonl"} if name in fuzz.CANONICAL_ONLY else set(fuzz.REAL_FILES)), (name, given)


@pytest.mark.parametrize("kind", ["truncated", "nan", "huge number", "empty", "binary", "deep", "not utf-8", "bom",
                                  "crlf"])
def test_each_damage_changes_a_public_trace_file(fuzz, kind, monkeypatch, tmp_path):
    fuzz.real_traces(tmp_path)
    raw = (tmp_path / "tau.json").read_bytes()
    rng = random.Random(3)
    monkeypatch.setattr(rng, "choice", lambda seq: kind if seq is fuzz.DAMAGES else random.Random(4).choice(seq))
    out = fuzz.damaged(raw, ".json", rng)
    assert out != raw
    if kind in ("nan", "huge number", "deep"):
        assert any(x in out for x in (b"NaN", b"Infinity", b"1e999", b"1" * 5000, b"1e308", b"9" * 400,
                                      b"123456789012345678901234567890", b"[" * 100_000)), kind


def test_dataset_export_gets_working_values_that_reach_its_work(fuzz, tmp_path, monkeypatch):
    """Its working --source was "file", which is no source (healthy | queue | all), and --trajectories was optional:
    in 22 cases of `fuzz_cli.py --seed 12` not one exported anything. A case of working values exports now."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    fuzz.build_workspace(workspace, runs=False)  # (the runs: ~20 s this test does not need)
    scratch.mkdir()
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(0), [], workspace)
    values = {p.name: maker.valid("dataset export", p) for p in table["dataset export"]
              if p.required or p.name in fuzz.NEEDED["dataset export"] or p.name == "source"}
    values["out"] = "out-x"  # (a working value may also be out-x.jsonl: a file name, refused for a directory)
    case = fuzz.Case("dataset export", maker.assemble("dataset export", table["dataset export"], values))
    fuzz.run_case(case, workspace, scratch, [], timeout=120)
    assert case.rc == 0 and case.problems == [], (case.argv, case.rc, case.err[-2000:])


@pytest.fixture(scope="module")
def with_runs(fuzz, tmp_path_factory):
    """A workspace with RUNS (~20 s to build), shared by the tests that only copy it."""
    workspace = tmp_path_factory.mktemp("fuzz") / "workspace"
    fuzz.build_workspace(workspace)
    return workspace


def test_report_ablate_approve_and_reject_get_runs_that_reach_their_work(fuzz, with_runs, tmp_path, monkeypatch):
    """The workspace held no run, so every case of `report`, `ablate`, `approve` and `reject` was 'no such run'
    (the twenty-fifth session's note). Now it holds one that ended with an edit merged (``run-done``) and one waiting
    for review (``run-review``): each command's working values do its work, on the case's copy alone (the original's
    harness repos and home unchanged: a copied run maps its harness to the copy's), and a deep case changes the run --
    a file of its directory, the checkpoint database (cut: a half-written one), or its harness repo."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # fuzz_importers, as the script's own run finds it
    workspace, scratch = with_runs, tmp_path / "scratch"
    scratch.mkdir()
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(0), [], workspace)
    assert len(maker.awaiting) == 2 and all(b.startswith("candidate/r1-") for b in maker.awaiting), maker.awaiting
    original = fuzz._stats(workspace)
    for name, extra in (("report", {"out": "out-report/"}), ("ablate", {"split": "dev"}),
                        ("approve", {"candidate": maker.awaiting[0]}), ("reject", {"candidate": maker.awaiting[1]})):
        run_arg, run_id = fuzz.RUN_ARGS[name]
        params = table[name]
        values = {p.name: maker.valid(name, p) for p in params if p.required}
        values.update({run_arg: run_id}, **extra)
        case = fuzz.Case(name, maker.assemble(name, params, values))
        fuzz.run_case(case, workspace, scratch, [], timeout=240)
        assert case.rc == 0 and case.problems == [], (case.argv, case.rc, case.problems, case.err[-2000:])
        done = {"report": "wrote out-report/report.md", "ablate": "the edit", "approve": "Merged (1)",
                "reject": "rejected by reviewer"}[name]
        assert done in case.out + case.err, (name, case.out[-2000:])
    assert fuzz._stats(workspace) == original
    changes = set()
    for _ in range(300):
        maker.run_change = None  # (argv() resets it for each case)
        argv, files = maker.deep("approve", table["approve"])
        changes.add(maker.run_change)
        if maker.run_change and maker.run_change.startswith("checkpoints"):
            assert any(f == fuzz.CHECKPOINTS for f, _ in files)
    assert {"run directory", "harness repo", "checkpoints cut", "checkpoints page", "checkpoints journal",
            "checkpoints empty", "candidate branch moved", "candidate branch damaged"} <= changes, changes


def test_evaluate_export_otel_dataset_export_and_run_resume_get_runs_that_reach_their_work(fuzz, with_runs, tmp_path,
                                                                                            monkeypatch):
    """`evaluate --run` got "run-none" beside NEEDED's --harness (a refusal of the pair, every case), and export-otel,
    `dataset export -t` and `run --resume` got no run id (the twenty-sixth session's note). Now half their cases get
    a run of the workspace (``RUN_INPUTS``, without the options it replaces): each does its work on the case's copy
    alone, and a deep case may change the run as it does approve's."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    workspace, scratch = with_runs, tmp_path / "scratch"
    scratch.mkdir()
    table, maker = fuzz.commands(), fuzz.Maker(random.Random(0), ["run.seed"], workspace)
    original = fuzz._stats(workspace)
    done = {"evaluate": "evaluation-dev.json", "export-otel": "exported", "dataset export": "wrote",
            "run": "is waiting for review"}
    for name, (param, run_id, replaced) in fuzz.RUN_INPUTS.items():
        params = table[name]
        maker.by_run = True
        chosen = maker.run_way(name, [p for p in params if p.required or p.name in fuzz.NEEDED.get(name, ())], params)
        assert param in {p.name for p in chosen} and not replaced & {p.name for p in chosen}, name
        values = {p.name: maker.valid(name, p) for p in chosen}
        values[param] = [run_id] if isinstance(values[param], list) else run_id  # (a tenth are the other run)
        values.update({"evaluate": {"split": "dev", "rollouts": "1"}, "export-otel": {"out": "o.jsonl"},
                       "dataset export": {"out": "out-x"}}.get(name, {}))
        case = fuzz.Case(name, maker.assemble(name, params, values))
        fuzz.run_case(case, workspace, scratch, [], timeout=240)
        assert case.rc == 0 and case.problems == [], (case.argv, case.rc, case.problems, case.err[-2000:])
        assert done[name] in case.out + case.err, (name, case.out[-2000:], case.err[-2000:])
        given, changed = 0, set()
        for _ in range(200):
            argv, _ = maker.argv(name, params)
            given += maker.by_run and any(r in argv for r in fuzz.RUNS)
            changed.add(maker.run_change)
            if maker.by_run and replaced:  # (an --out evaluate's run may take: a deep case's output)
                assert not any(f"--{r.replace('_', '-')}" in argv for r in replaced - {"out"}), argv
        assert 50 <= given <= 150 and {"run directory", "harness repo"} <= changed, (name, given, changed)
    assert fuzz._stats(workspace) == original
