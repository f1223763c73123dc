"""mini-swe-agent runs joined with SWE-bench results in the layouts people have (built in tmp_path)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import label_all
from evoharness.errors import InputError
from evoharness.traces.importers import load_paths, mini_swe

MODEL = "anthropic/claude-sonnet-4"
TAG = "anthropic__claude-sonnet-4"  # the harness's directory / report name for MODEL


def _resolved_sample(shared_data: Path) -> tuple[str, dict]:
    """A vendored trajectory SWE-bench resolved (its report says so), with its instance id."""
    root = shared_data / "mini_swe_agent_sample"
    for report in sorted((root / "logs").glob("*/report.json")):
        if json.loads(report.read_text()).get("resolved") is True:
            iid = report.parent.name
            return iid, json.loads((root / "trajs" / iid / f"{iid}.traj.json").read_text())
    raise AssertionError("no resolved run in the vendored sample")


def _traj(out: Path, iid: str = "astropy__astropy-1", data: dict | None = None, model: str = MODEL) -> Path:
    """mini-swe-agent's output layout: <out>/<instance_id>/<instance_id>.traj.json (+ preds.json)."""
    data = data or {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                 {"role": "user", "content": "Fix the bug."},
                                 {"role": "assistant", "content": "```bash\necho done\n```"}],
                    "info": {"exit_status": "Submitted", "submission": "diff --git a/x b/x\n"}}
    data = json.loads(json.dumps(data))
    data.setdefault("info", {}).setdefault("config", {})["model"] = {"model_name": model}
    f = out / iid / f"{iid}.traj.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(data))
    preds = out / "preds.json"
    old = json.loads(preds.read_text()) if preds.is_file() else {}
    old[iid] = {"model_name_or_path": model, "instance_id": iid, "model_patch": "diff --git a/x b/x\n"}
    preds.write_text(json.dumps(old))
    return f


def _harness_report(root: Path, iid: str, resolved: bool, run: str = "run1", tag: str = TAG) -> Path:
    f = root / "logs" / "run_evaluation" / run / tag / iid / "report.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({iid: {"patch_is_None": False, "patch_exists": True, "resolved": resolved}}))
    (f.parent / "run_instance.log").write_text("log\n")
    return f


def _aggregate(path: Path, resolved: list[str], unresolved: list[str], errors: list[str] = ()) -> Path:
    """The harness's final <model>.<run_id>.json (sb-cli's report has the same id lists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = resolved + unresolved + list(errors)
    path.write_text(json.dumps({
        "total_instances": len(ids), "submitted_instances": len(ids), "completed_instances": len(ids) - len(errors),
        "resolved_instances": len(resolved), "unresolved_instances": len(unresolved),
        "empty_patch_instances": 0, "error_instances": len(errors), "completed_ids": resolved + unresolved,
        "incomplete_ids": [], "empty_patch_ids": [], "submitted_ids": ids, "resolved_ids": resolved,
        "unresolved_ids": unresolved, "error_ids": list(errors), "schema_version": 2}, indent=4))
    return path


def test_harness_run_evaluation_logs_resolved_run_is_healthy(shared_data, tmp_path):
    iid, data = _resolved_sample(shared_data)
    _traj(tmp_path / "out", iid, data)
    _harness_report(tmp_path, iid, True)
    # the whole directory: logs/run_evaluation/.../report.json and preds.json are not traces
    [t] = list(load_paths([tmp_path]))
    assert t.score == 1.0 and t.meta["report"].endswith(f"{TAG}/{iid}/report.json")
    [lab] = label_all([t])
    assert lab.failure_class == "healthy"


def test_harness_logs_unresolved(tmp_path):
    f = _traj(tmp_path / "out")
    _harness_report(tmp_path, "astropy__astropy-1", False)
    [t] = list(load_paths([f]))
    assert t.score == 0.0


def test_harness_aggregate_report_beside_the_output_dir(tmp_path):
    for iid in ("a__a-1", "a__a-2", "a__a-3"):
        _traj(tmp_path / "out", iid)
    _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], ["a__a-2"], errors=["a__a-3"])
    trajs = {t.task_id: t for t in load_paths([tmp_path])}
    assert set(trajs) == {"a__a-1", "a__a-2", "a__a-3"}  # the aggregate is no trace
    assert trajs["a__a-1"].score == 1.0 and trajs["a__a-2"].score == 0.0
    assert trajs["a__a-3"].score is None  # in error_ids only: no verdict, never a guess


def test_aggregate_inside_the_output_dir_and_pretty_printed_long_lists(tmp_path):
    """resolved_ids far past the first 64 KiB still counts (the id lists of a full run come first)."""
    f = _traj(tmp_path / "out", "a__a-1")
    many = [f"x__x-{i}" for i in range(6000)]
    _aggregate(tmp_path / "out" / f"{TAG}.run1.json", ["a__a-1"], many)
    [t] = list(load_paths([f]))
    assert t.score == 1.0


def test_sb_cli_report(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1")
    _aggregate(tmp_path / "sb-cli-reports" / "swe-bench_verified__test__run1.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 0.0 and "sb-cli-reports" in t.meta["report"]


def test_instance_absent_from_every_result_stays_unscored(tmp_path):
    _traj(tmp_path / "out", "a__a-1")
    _aggregate(tmp_path / f"{TAG}.run1.json", ["b__b-1"], ["b__b-2"])
    _harness_report(tmp_path, "b__b-1", True)
    [t] = list(load_paths([tmp_path]))  # the whole tree: preds.json, reports and logs are no traces
    assert t.score is None and t.meta["report"] is None


def test_contradicting_results_are_one_error(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1")
    _harness_report(tmp_path, "a__a-1", True)
    agg = _aggregate(tmp_path / f"{TAG}.run1.json", [], ["a__a-1"])
    with pytest.raises(InputError) as e:
        list(load_paths([f]))
    msg = str(e.value)
    assert "disagree" in msg and str(agg) in msg and "report.json" in msg and "\n" not in msg
    # skip_invalid goes on without it
    assert list(load_paths([f], skip_invalid=True)) == []


def test_aggregate_listing_an_instance_as_both_is_an_error(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1")
    _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], ["a__a-1"])
    with pytest.raises(InputError, match="both resolved and unresolved"):
        list(load_paths([f]))


def test_results_of_another_model_give_way_to_the_trajectorys_own(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1")
    _harness_report(tmp_path, "a__a-1", False, tag="openai__gpt-4o")
    _harness_report(tmp_path, "a__a-1", True)
    _aggregate(tmp_path / "openai__gpt-4o.run1.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 1.0


def test_search_is_bounded_in_depth_and_size(tmp_path, monkeypatch):
    deep = tmp_path / "a" / "b" / "c" / "d"
    f = _traj(deep, "a__a-1")
    _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], [])  # 5 directories above the trajectory's own
    [t] = list(load_paths([f]))
    assert t.score is None
    _aggregate(deep / f"{TAG}.run1.json", ["a__a-1"], [])
    big = _aggregate(deep.parent / f"{TAG}.run2.json", [], ["a__a-1"], errors=[f"x__x-{i}" for i in range(50)])
    monkeypatch.setattr(mini_swe, "SIZE_CAP", big.stat().st_size - 1)
    mini_swe._aggregate_cache.clear()
    [t] = list(load_paths([f]))
    assert t.score == 1.0  # the oversized contradicting report was never read


def test_report_beside_the_trajectory_wrapped_by_instance(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1")
    (f.parent / "report.json").write_text(json.dumps({"a__a-1": {"resolved": True}}))
    [t] = list(load_paths([tmp_path / "out"]))  # the report is joined, not read as a trace
    assert t.score == 1.0 and t.meta["report"] == str(f.parent / "report.json")


def test_model_names_with_dots_pick_their_own_aggregate(tmp_path):
    f = _traj(tmp_path / "out", "a__a-1", model="openai/gpt-4.1")
    _aggregate(tmp_path / "openai__gpt-4.1.run1.json", ["a__a-1"], [])
    _aggregate(tmp_path / "openai__gpt-4.1-mini.run1.json", [], ["a__a-1"])
    _aggregate(tmp_path / "openai__gpt-4.run1.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 1.0 and t.meta["report"].endswith("openai__gpt-4.1.run1.json")


def test_the_aggregate_report_memo_is_bounded(tmp_path):
    mini_swe._aggregate_cache.clear()
    for i in range(mini_swe._AGGREGATE_CACHE_MAX + 10):
        f = tmp_path / f"m.run{i}.json"
        f.write_text(json.dumps({"resolved_ids": [f"a__a-{i}"], "unresolved_ids": []}))
        os.utime(f, ns=(f.stat().st_mtime_ns - 3600 * 10**9,) * 2)  # one written just now is not remembered
        assert mini_swe._aggregate(f) == (frozenset({f"a__a-{i}"}), frozenset())
    assert len(mini_swe._aggregate_cache) == mini_swe._AGGREGATE_CACHE_MAX  # grew by one per file before
    mini_swe._aggregate_cache.clear()


@pytest.mark.parametrize("indent", [None, 4])
def test_an_aggregate_with_its_keys_past_the_first_64_kib_is_found(tmp_path, indent):
    """Keys sorted (json.dumps(sort_keys=True), jq -S): completed_ids, empty_patch_ids and error_ids of a full
    run come first, and no aggregate key sat in the first 64 KiB: the report was read as a trace (an import of
    the directory failed on it) and the trajectories were left unscored."""
    _traj(tmp_path / "out", "a__a-1")
    many = [f"x__x-{i}" for i in range(4000)]
    report = {"completed_ids": ["a__a-1", *many], "empty_patch_ids": [], "error_ids": many,
              "incomplete_ids": [], "resolved_ids": ["a__a-1"], "unresolved_ids": many, "schema_version": 2,
              "total_instances": len(many) + 1}
    agg = tmp_path / f"{TAG}.run1.json"
    agg.write_text(json.dumps(report, sort_keys=True, indent=indent))
    raw = agg.read_bytes()
    assert min(raw.find(k) for k in mini_swe._AGGREGATE_KEYS if k in raw) > 64 << 10
    assert mini_swe.is_sidecar(agg)
    [t] = list(load_paths([tmp_path]))  # the whole tree: the report is no trace
    assert t.score == 1.0 and t.meta["report"] == str(agg)


def test_a_trace_file_that_mentions_the_keys_is_still_a_trace(tmp_path):
    """Past the first 64 KiB a key counts only at the top level of an object of id lists and counts: a trace
    whose messages quote a report (or hold one as a tool's parsed result) is not taken for one."""
    filler = [{"role": "user", "content": "x" * 1000} for _ in range(80)]
    quoted = {"role": "tool", "content": json.dumps({"resolved_ids": ["a"], "total_instances": 1})}
    parsed = {"role": "tool", "content": "ok", "result": {"resolved_ids": ["a"], "total_instances": 1}}
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"id": "t", "messages": [*filler, quoted, parsed], "resolved_ids": ["a"]}))
    assert f.read_bytes().find(b'"resolved_ids"') > 64 << 10
    assert not mini_swe.is_sidecar(f)


def test_a_model_whose_name_starts_another_models_picks_its_own_harness_logs_and_aggregate(tmp_path):
    """openai/gpt-4 beside openai/gpt-4.1: the harness directory openai__gpt-4.1 and the aggregate
    openai__gpt-4.1.run1.json were taken for gpt-4's too (their names start with 'openai__gpt-4.'), so a gpt-4
    trajectory was an error (results disagree), or got gpt-4.1's verdict where gpt-4 had none."""
    f = _traj(tmp_path / "out", "a__a-1", model="openai/gpt-4")
    _harness_report(tmp_path, "a__a-1", True, tag="openai__gpt-4.1")
    _harness_report(tmp_path, "a__a-1", False, tag="openai__gpt-4")
    [t] = list(load_paths([f]))  # was InputError: SWE-bench results disagree
    assert t.score == 0.0 and "/openai__gpt-4/" in t.meta["report"]
    _aggregate(tmp_path / "openai__gpt-4.1.run1.json", ["a__a-1"], [])  # gpt-4.1's: a directory says so
    _aggregate(tmp_path / "openai__gpt-4.run1.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 0.0
    g = _traj(tmp_path / "out41", "a__a-1", model="openai/gpt-4.1")
    [t] = list(load_paths([g]))
    assert t.score == 1.0 and "gpt-4.1" in t.meta["report"]


def test_a_run_takes_no_verdict_from_another_runs_results(tmp_path):
    """runs/v2 (not yet evaluated) under logs/run_evaluation/v1: it took v1's 'resolved' (score 1.0)."""
    v1 = _traj(tmp_path / "runs" / "v1", "a__a-1")
    v2 = _traj(tmp_path / "runs" / "v2", "a__a-1")
    _harness_report(tmp_path, "a__a-1", True, run="v1")
    [t] = list(load_paths([v2]))
    assert t.score is None and t.meta["report"] is None
    assert "v1" in t.meta["results_set_aside"] and "beside" in t.meta["results_set_aside"]
    [t] = list(load_paths([v1]))  # v1's own folder names its run
    assert t.score == 1.0 and "results_set_aside" not in t.meta
    _harness_report(tmp_path, "a__a-1", False, run="v2")  # v2 evaluated: its own verdict, v1's set aside
    [t] = list(load_paths([v2]))
    assert t.score == 0.0 and "/v2/" in t.meta["report"]
    _aggregate(tmp_path / f"{TAG}.v2.json", [], ["a__a-1"])  # the same run's aggregate agrees
    _aggregate(tmp_path / f"{TAG}.v1.json", ["a__a-1"], [])
    assert [t.score for t in load_paths([v1, v2])] == [1.0, 0.0]


def test_results_of_several_runs_score_no_trajectory_whose_run_cannot_be_told(tmp_path, capsys):
    f = _traj(tmp_path / "out", "a__a-1")
    _harness_report(tmp_path, "a__a-1", True, run="first")
    [t] = list(load_paths([f]))
    assert t.score == 1.0  # one run's results: the trajectory's (the usual layout, any run id)
    _harness_report(tmp_path, "a__a-1", True, run="second")
    [t] = list(load_paths([f]))  # was 1.0 (they agreed) -- a guess
    assert t.score is None and "several runs (first, second)" in t.meta["results_set_aside"]
    from evoharness.cli import main
    assert main(["import", str(f), "--out", str(tmp_path / "t.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "1 of 1 trajectories left unscored" in err[0] and "several runs" in err[0]


def test_a_run_id_in_the_trajectorys_metadata_picks_its_results(tmp_path):
    data = {"run_id": "second", "messages": [{"role": "user", "content": "Fix."}],
            "info": {"exit_status": "Submitted", "submission": ""}}
    f = _traj(tmp_path / "out", "a__a-1", data)
    _harness_report(tmp_path, "a__a-1", True, run="first")
    [t] = list(load_paths([f]))
    assert t.score is None and "'second'" in t.meta["results_set_aside"]
    _aggregate(tmp_path / f"{TAG}.second.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 0.0 and t.meta["report"].endswith(".second.json")


def test_an_sb_cli_report_names_its_run(tmp_path):
    f = _traj(tmp_path / "runs" / "second", "a__a-1")
    _traj(tmp_path / "runs" / "first", "a__a-1")
    _aggregate(tmp_path / "sb-cli-reports" / "swe-bench_lite__test__first.json", ["a__a-1"], [])
    [t] = list(load_paths([f]))
    assert t.score is None and "first" in t.meta["results_set_aside"]
    _aggregate(tmp_path / "sb-cli-reports" / "swe-bench_lite__test__second.json", [], ["a__a-1"])
    [t] = list(load_paths([f]))
    assert t.score == 0.0 and t.meta["report"].endswith("__second.json")


def test_an_aggregate_evicted_by_another_thread_right_after_it_was_read_is_still_used(tmp_path, monkeypatch):
    """The service imports in threads: between storing an aggregate report's ids in the cache and reading them
    back, another thread's insert could evict them -- KeyError, a traceback for that import. The report's ids
    are used as read, not read back."""

    class EvictedAtOnce(dict):  # another thread, at the worst moment: every insert is evicted at once
        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            super().__delitem__(key)

    monkeypatch.setattr(mini_swe, "_aggregate_cache", EvictedAtOnce())
    _traj(tmp_path / "out", "a__a-1")
    _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], [])
    [t] = list(load_paths([tmp_path]))
    assert t.score == 1.0


def test_a_truncated_aggregate_report_is_a_warning_and_gives_no_verdict(tmp_path, capsys):
    """Was: no verdict and not a word (the aggregate's JSON error was swallowed)."""
    from evoharness.cli import main

    f = _traj(tmp_path / "out", "a__a-1")
    report = _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], [])
    report.write_text(report.read_text()[:60])
    [t] = list(load_paths([f]))
    assert t.score is None and t.meta["import_warnings"] == [
        {"kind": "results", "file": str(report), "reason": t.meta["import_warnings"][0]["reason"]}]
    assert "not valid JSON" in t.meta["import_warnings"][0]["reason"]
    capsys.readouterr()
    assert main(["import", str(f), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {report}: SWE-bench results not valid JSON")


def test_an_earlier_runs_results_above_a_later_runs_folder_are_not_borrowed(tmp_path, capsys):
    """exp/ holds an earlier run (its trajectories, preds.json) evaluated there; a later run in exp/retry/ was not
    evaluated. The earlier verdict was the later run's score (its run id names no folder, one run's results)."""
    from evoharness.cli import main

    earlier = _traj(tmp_path / "exp", "a__a-1")
    report = _harness_report(tmp_path / "exp", "a__a-1", True, run="eval1")
    later = _traj(tmp_path / "exp" / "retry", "a__a-1")
    [t] = list(load_paths([later]))
    assert t.score is None and t.meta["report"] is None
    assert t.meta["results_set_aside"].startswith(f"{report} belongs to the run whose output folder is "
                                                  f"{tmp_path / 'exp'} (its trajectory a__a-1/a__a-1.traj.json")
    [t] = list(load_paths([earlier]))
    assert t.score == 1.0  # still the earlier run's own
    assert main(["import", str(later), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("note: 1 of 1 trajectories left unscored") and "belongs to the run" in line
    # the later run's own results, once it is evaluated, score it (before: two runs' results, none counted)
    _aggregate(tmp_path / "exp" / "retry" / f"{TAG}.eval2.json", [], ["a__a-1"])
    [t] = list(load_paths([later]))
    assert t.score == 0.0 and t.meta["report"].endswith(".eval2.json")


def test_an_earlier_runs_preds_above_a_later_runs_own_preds_mark_its_results_as_its_own(tmp_path):
    """The earlier run's trajectory of this instance is gone, but its preds.json sits with its sb-cli report, above
    the later run's folder with a preds.json of its own."""
    later = _traj(tmp_path / "exp" / "retry", "a__a-1")
    (tmp_path / "exp" / "preds.json").write_text(json.dumps({"a__a-1": {"model_patch": "diff"}}))
    _aggregate(tmp_path / "exp" / "sb-cli-reports" / "swe-bench_lite__test__eval1.json", ["a__a-1"], [])
    [t] = list(load_paths([later]))
    assert t.score is None and "its preds.json is there, and this run has its own below it" in \
        t.meta["results_set_aside"]


@pytest.mark.parametrize("levels_up", [0, 1, 2])
def test_the_harness_run_in_or_above_the_output_folder_still_scores_it(tmp_path, levels_up):
    """The usual layouts: results in <out> or one or two folders above it, no other run's folder between."""
    out = tmp_path / "a" / "b" / "out"
    f = _traj(out, "a__a-1")
    _harness_report(out.parents[levels_up - 1] if levels_up else out, "a__a-1", True, run="whatever")
    [t] = list(load_paths([f]))
    assert t.score == 1.0 and "results_set_aside" not in t.meta


def test_a_run_id_in_the_metadata_claims_its_results_in_another_runs_folder(tmp_path):
    _traj(tmp_path / "exp", "a__a-1")
    _harness_report(tmp_path / "exp", "a__a-1", True, run="eval1")
    data = {"run_id": "eval1", "messages": [{"role": "user", "content": "Fix."}],
            "info": {"exit_status": "Submitted", "submission": ""}}
    [t] = list(load_paths([_traj(tmp_path / "exp" / "retry", "a__a-1", data)]))
    assert t.score == 1.0


def test_a_posted_document_is_not_scored_or_labelled_from_the_servers_temporary_folder(tmp_path, monkeypatch):
    """The service imports a posted body through a temporary file (load_bytes): the results lookup walked the
    server's temporary folder and those above it, so any aggregate report or ground truth lying there scored or
    labelled the posted run (and meta.report named the server's file)."""
    import tempfile

    from evoharness.traces.importers import load_bytes

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _aggregate(tmp_path / f"{TAG}.run1.json", ["a__a-1"], [])
    (tmp_path / "ground_truth.json").write_text(json.dumps(
        [{"trajectory_id": "run", "failures": [{"step_number": 1, "failure_category": "Invalid Invocation"}]}]))
    data = {"instance_id": "a__a-1", "messages": [{"role": "user", "content": "Fix."}],
            "info": {"exit_status": "Submitted", "submission": "", "config": {"model": {"model_name": MODEL}}}}
    [t] = load_bytes(json.dumps(data).encode(), source="run")
    assert t.score is None and t.meta["report"] is None
    [t] = load_bytes(json.dumps([{"role": "human", "content": "q"}, {"role": "WebSurfer", "content": "a"}]).encode(),
                     source="run")
    assert "human_failures" not in t.meta
    f = _traj(tmp_path / "out", "a__a-1", data)  # the same run as a file there is scored as before
    assert [t.score for t in load_paths([f])] == [1.0]


@pytest.mark.parametrize("broken", ["{\"a__a-1\": {\"resol", "", "{\"patch_exists\": true}", "[1, 2]"])
def test_a_broken_per_instance_report_is_a_warning_and_the_rest_is_imported(tmp_path, capsys, broken):
    """<root>/trajs/<id>/ + <root>/logs/<id>/report.json: one report cut short (empty, no 'resolved' flag) stopped
    the whole import with an error naming it; now that run is unscored, named once, and the others are scored."""
    from evoharness.cli import main

    for iid, resolved in (("a__a-1", None), ("b__b-2", True), ("c__c-3", False)):
        _traj(tmp_path / "trajs", iid)
        report = tmp_path / "logs" / iid / "report.json"
        report.parent.mkdir(parents=True)
        report.write_text(broken if resolved is None else json.dumps({iid: {"resolved": resolved}}))
    bad = tmp_path / "logs" / "a__a-1" / "report.json"
    scores = {t.task_id: t.score for t in load_paths([tmp_path])}
    assert scores == {"a__a-1": None, "b__b-2": 1.0, "c__c-3": 0.0}
    [t] = list(load_paths([tmp_path / "trajs" / "a__a-1"]))
    assert [(w["kind"], w["file"]) for w in t.meta["import_warnings"]] == [("results", str(bad))]
    capsys.readouterr()
    assert main(["import", str(tmp_path), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {bad}: SWE-bench report ") and line.endswith("no verdict from it (1 trajectory)")
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("cut", [0, 1, 8])
def test_a_broken_results_json_in_mini_swe_agents_output_folder_is_a_warning_never_a_trace(tmp_path, capsys, cut):
    """<out>/<id>/<id>.traj.json + <out>/preds.json + <out>/results/results.json cut short (empty): read as a trace
    (``error: ... empty file``, exit 2) because no ``trajs/`` sits beside ``results/``; now one warning, as there."""
    from evoharness.cli import main

    _traj(tmp_path / "out", "a__a-1")
    results = tmp_path / "out" / "results" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps({"no_generation": [], "generated": ["a__a-1"], "resolved": ["a__a-1"]})[:cut])
    [t] = list(load_paths([tmp_path / "out"]))
    assert t.score is None and [w["file"] for w in t.meta["import_warnings"]] == [str(results)]
    capsys.readouterr()
    assert main(["import", str(tmp_path / "out"), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {results}: SWE-bench results not valid JSON")


def test_warnings_carried_by_a_canonical_export_are_not_said_again(tmp_path, capsys):
    """import a folder with a broken report (one warning), then import / diagnose / label its canonical output: the
    warning was said again each time (and would be after the report was fixed); it stays in meta, said once."""
    from evoharness.cli import main

    _traj(tmp_path / "run" / "trajs", "a__a-1")
    bad = tmp_path / "run" / "logs" / "a__a-1" / "report.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"a__a-1": {"resol')
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    capsys.readouterr()
    assert main(["import", str(tmp_path / "run"), "--out", str(first)]) == 0
    assert [line.split(": ")[1] for line in capsys.readouterr().err.splitlines()] == [str(bad)]
    for argv in (["import", str(first), "--out", str(again)], ["diagnose", str(first)],
                 ["label", str(first), "--out", str(tmp_path / "labels.jsonl")]):
        assert main(argv) == 0
        assert "warning" not in capsys.readouterr().err, argv
    [t] = list(load_paths([again]))
    assert [w["file"] for w in t.meta["import_warnings"]] == [str(bad)]  # kept: the data says why it is unscored
    assert main(["diagnose", str(tmp_path / "run"), str(first)]) == 0  # the folder met again: said, for its run
    warned = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning")]
    [line] = [x for x in warned if x.startswith(f"warning: {bad}: ")]
    assert line.endswith("(1 trajectory)")
    # the run is read twice here (the folder and its export): that is said too, once (bc8d0f3)
    assert [x for x in warned if x != line] == [x for x in warned if "have the id of an earlier one" in x]
    assert len(warned) == 2


@pytest.mark.parametrize("bad_id", ["../logs/a__a-1", "<abs>", "a\x00b"])
def test_an_instance_id_that_is_a_path_takes_no_verdict_from_a_report_outside_its_own(tmp_path, bad_id):
    """logs/<instance_id>/report.json (and the harness's per-instance reports) were built from the trajectory's
    instance id as it came: "../logs/a__a-1" read another instance's report (its verdict scored the run, resolved:
    Healthy), an absolute id read a report.json anywhere on the disk, and a NUL in the id ended the import with
    'embedded null byte'. Such an id names no folder: the run is imported, unscored (an aggregate's id lists,
    matched as text, still score it)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    bad_id = str(outside) if bad_id == "<abs>" else bad_id
    (outside / "report.json").write_text(json.dumps({bad_id: {"resolved": True}}))
    other = tmp_path / "run" / "logs" / "a__a-1" / "report.json"  # another instance's verdict, in the run's logs
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"resolved": True}))
    f = _traj(tmp_path / "run" / "trajs", "evil")
    data = json.loads(f.read_text())
    f.write_text(json.dumps({**data, "instance_id": bad_id}))
    [t] = list(load_paths([f]))
    assert t.task_id == bad_id and t.score is None and t.meta["report"] is None
    _aggregate(tmp_path / "run" / f"{TAG}.run1.json", resolved=[], unresolved=[bad_id])
    [t] = list(load_paths([f]))
    assert t.score == 0.0


@pytest.mark.parametrize("bad", [True, {"id": "a__a-1"}, ["a__a-1"], "   ", 1.5])
def test_an_instance_id_that_is_no_name_gives_way_to_the_file_name(tmp_path, bad):
    """An ``instance_id`` that is not a name (a boolean, an object, a list, blanks, a float) became the run's id as
    Python prints it ("True", "{'id': 'a__a-1'}", "   "): the run lost the verdict its file name finds
    (``logs/a__a-1/report.json``) and was labelled unknown. The file name is the id then, as with no instance_id;
    a whole number stays (``"instance_id": 7`` is instance "7")."""
    f = _traj(tmp_path / "run" / "trajs", "a__a-1")
    report = tmp_path / "run" / "logs" / "a__a-1" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"resolved": True}))
    f.write_text(json.dumps({**json.loads(f.read_text()), "instance_id": bad}))
    [t] = list(load_paths([f]))
    assert (t.task_id, t.score) == ("a__a-1", 1.0)
    f.write_text(json.dumps({**json.loads(f.read_text()), "instance_id": 7}))
    [t] = list(load_paths([f]))
    assert (t.task_id, t.score) == ("7", None)


@pytest.mark.parametrize("flag", ["false", "no", "", None, [], {}, 2, 0.5])
def test_a_resolved_flag_that_is_not_true_or_false_gives_no_verdict(tmp_path, capsys, flag):
    """A per-instance report's ``resolved`` was read with ``bool()``: "false" (a string: a report written by hand, or
    converted from a table) scored the run resolved -- a failed run labelled Healthy -- and null, [] or {} scored it
    unresolved. Only true / false (or 1 / 0, as the OpenHands importer reads its records' flags) is a verdict; any
    other flag is a warning naming the file, and the run is unscored."""
    from evoharness.cli import main

    f = _traj(tmp_path / "run" / "trajs", "a__a-1")
    report = tmp_path / "run" / "logs" / "a__a-1" / "report.json"
    report.parent.mkdir(parents=True)
    for ok, want in ((True, 1.0), (False, 0.0), (1, 1.0), (0, 0.0)):
        report.write_text(json.dumps({"a__a-1": {"resolved": ok}}))
        assert [t.score for t in load_paths([f])] == [want]
    report.write_text(json.dumps({"a__a-1": {"resolved": flag}}))
    [t] = list(load_paths([f]))
    assert t.score is None and [w["file"] for w in t.meta["import_warnings"]] == [str(report)]
    capsys.readouterr()
    assert main(["import", str(f), "--out", str(tmp_path / "t.jsonl")]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {report}: SWE-bench report ") and "no verdict from it" in line
