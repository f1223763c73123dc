"""`evoharness export-otel`: our rollouts as OTLP GenAI spans, read back by the OTLP importer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import load_paths
from evoharness.traces.store import write_trajectories

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _shape(t):
    return [(m["role"], m.get("content") or None, m.get("tool_call_id"),
             [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
              for c in m.get("tool_calls") or []])
            for m in t.messages]


def test_round_trip_through_otlp_json_keeps_conversation_and_outcome(tmp_path, capsys):
    src = list(load_paths([FIXTURES / "tau2" / "results.json"]))
    broken = (TraceBuilder("t-err").system("be careful").user("delete file x")
              .call("rm", {"path": "x"}, "Error: permission denied").event("tool_error", "permission denied")
              .end("error").build(score=0.0, harness_commit="abc123", split="dev", rollout=2))
    src.append(broken)
    jsonl = tmp_path / "trajectories.jsonl"
    write_trajectories(jsonl, src)
    out = tmp_path / "spans.jsonl"
    assert main(["export-otel", str(jsonl), "--out", str(out)]) == 0
    assert "exported 4 trajectories as 4 traces" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert len(lines) == 4
    spans = [s for line in lines for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    n_assistant = sum(m["role"] == "assistant" for t in src for m in t.messages)
    n_calls = sum(len(m.get("tool_calls") or []) for t in src for m in t.messages)
    assert len(spans) == len(src) + n_assistant + n_calls
    assert len({s["traceId"] for s in spans}) == 4
    back = list(load_paths([out]))
    assert [t.id for t in back] == [t.id for t in src]
    for a, b in zip(src, back, strict=True):
        assert (b.task_id, b.score, b.termination, b.final_answer, b.rollout, b.split, b.harness_commit) == (
            a.task_id, a.score, a.termination, a.final_answer, a.rollout, a.split, a.harness_commit)
        assert _shape(b) == _shape(a)
        assert [(e.type, e.step, e.detail) for e in b.events] == [(e.type, e.step, e.detail) for e in a.events]
    root = next(s for s in spans if s["name"].startswith("invoke_agent") and any(
        a["key"] == "evoharness.trajectory_id" and a["value"]["stringValue"] == "t-err#0" for a in s["attributes"]))
    attrs = {a["key"]: next(iter(a["value"].values())) for a in root["attributes"]}
    assert attrs["evoharness.failure_class"] != "healthy" and attrs["evoharness.first_signal"]
    assert attrs["evoharness.harness_commit"] == "abc123" and root["status"]["code"] == 2
    tool = next(s for s in spans if s["name"] == "execute_tool rm")
    assert tool["status"]["code"] == 2 and back[-1].events[0].type == "tool_error"


def test_run_dir_verdicts_and_bad_usage(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    t = TraceBuilder("t1").user("hi").deliver("hello").build(score=1.0, harness_commit="c0ffee")
    write_trajectories(run / "trajectories.jsonl", [t])
    (run / "summary.json").write_text(json.dumps({"merged": [], "rejected": [
        {"branch": "candidate/r1-x", "commit": "c0ffee", "reason": "no gain"}]}))
    out = tmp_path / "o.jsonl"
    assert main(["export-otel", str(run), "-o", str(out)]) == 0
    root = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = {a["key"]: next(iter(a["value"].values())) for s in root for a in s["attributes"]}
    assert attrs["evoharness.verdict"] == "rejected" and attrs["evoharness.candidate"] == "candidate/r1-x"
    capsys.readouterr()
    assert main(["export-otel", str(run)]) == 2
    assert "exactly one of --out FILE or --endpoint URL" in capsys.readouterr().err
    assert main(["export-otel", str(tmp_path), "-o", str(out)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    demo = tmp_path / "demo-out" / "20261205-074143"  # a demo directory, as `diagnose` and `report` take it
    (demo / "state" / "runs").mkdir(parents=True)
    (demo / "summary.json").write_text(json.dumps({"run_id": "run-b"}))
    for rid in ("run-a", "run-b"):  # `demo --resume` adds a run; summary.json names the latest
        (demo / "state" / "runs" / rid).mkdir()
        write_trajectories(demo / "state" / "runs" / rid / "trajectories.jsonl", [t.model_copy(update={"id": rid})])
    (demo / "state" / "runs" / "run-b" / "summary.json").write_text((run / "summary.json").read_text())
    assert main(["export-otel", str(demo), "-o", str(out)]) == 0
    spans = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = {a["key"]: next(iter(a["value"].values())) for s in spans for a in s["attributes"]}
    assert attrs["evoharness.trajectory_id"] == "run-b" and attrs["evoharness.verdict"] == "rejected"
    (demo / "summary.json").unlink()  # no summary: several runs are one error line naming them
    capsys.readouterr()
    assert main(["export-otel", str(demo), "-o", str(out)]) == 2
    assert "holds several runs (run-a, run-b)" in capsys.readouterr().err
    for name in ("", "  ", "evo\nharness"):  # '' was accepted: traces filed under an empty service.name
        assert main(["export-otel", str(run), "-o", str(tmp_path / "n.jsonl"), "--service-name", name]) == 2
        [err] = capsys.readouterr().err.splitlines()  # one line, from the option check or the CLI's blank check
        assert err.startswith("error: ") and "--service-name" in err
        assert not (tmp_path / "n.jsonl").exists()
    # --out naming the input (the run's own files, a trace file, a hard link to it) is refused, the input kept
    single = tmp_path / "single.jsonl"
    write_trajectories(single, [t])
    (tmp_path / "link.jsonl").hardlink_to(single)
    before = {p: p.read_bytes() for p in (run / "trajectories.jsonl", run / "summary.json", single)}
    for src, dest in ((run, run / "trajectories.jsonl"), (run, run / "summary.json"), (single, single),
                      (single, tmp_path / "link.jsonl")):
        assert main(["export-otel", str(src), "-o", str(dest)]) == 2, dest
        assert capsys.readouterr().err.splitlines() == [
            f"error: --out: {dest} is also an input: write the output to another file"]
    assert {p: p.read_bytes() for p in before} == before
    # an [otel] install missing a piece (the JSON encoder, the HTTP exporter) is one error line naming the
    # extra, not a traceback
    for module in ("opentelemetry.exporter.otlp.json.common.trace_encoder",
                   "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, module, None)  # what an absent package looks like to `import`
            dest = ["-o", str(out)] if "json" in module else ["--endpoint", "http://127.0.0.1:9"]
            assert main(["export-otel", str(run), *dest]) == 2, module
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "pip install 'evoharness[otel]'" in err[0], err


def test_a_dead_receiver_fails_within_the_timeout_with_one_error_line(tmp_path, capsys):
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [TraceBuilder(f"t{i}").user("hi").deliver("hello").build(score=1.0) for i in range(2)])
    t0 = time.monotonic()
    assert main(["export-otel", str(src), "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "1.5"]) == 2
    took = time.monotonic() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --endpoint: the OTLP receiver at ") and "within --timeout 1.5 s" in err[-1]
    assert "0 of 2 traces sent" in err[-1]
    # before it: only our own retry lines, warnings as every command's (the exporter's multi-line warnings are not
    # passed on; until the twenty-sixth session they began "export-otel: ", no warning line as the others are)
    assert all(line.startswith(f"warning: http://127.0.0.1:{port}: ") and "retrying in" in line
               for line in err[:-1]), err
    assert took < 12, took  # was ~20 s whatever the caller wanted (the exporter's fixed 30 s deadline)
    for bad in ("0", "-1", "nan", "inf", "1e-300", "1e300"):
        assert main(["export-otel", str(src), "--endpoint", f"http://127.0.0.1:{port}", "--timeout", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --timeout: must be 0.1 to 3600 seconds, got ") and "\n" not in err, err


def test_an_export_the_disk_refuses_keeps_the_earlier_file_whole(tmp_path, capsys):
    """`--out` was opened in place: a full disk (here the file size limit, RLIMIT_FSIZE, which fails writes as a full
    disk does) or Ctrl-C mid-write left a cut OTLP file where an earlier, whole one had been. Now it is written aside
    and renamed into place on success, as `import` and `label` write theirs."""
    import resource

    src = list(load_paths([FIXTURES / "tau2" / "results.json"]))
    jsonl = tmp_path / "trajectories.jsonl"
    write_trajectories(jsonl, src * 40)
    out = tmp_path / "spans.jsonl"
    out.write_text('{"an earlier export": true}\n')
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))
    try:
        code = main(["export-otel", str(jsonl), "--out", str(out)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err == [f"error: {out}: file too large"], err  # the output the disk refused, named
    assert out.read_text() == '{"an earlier export": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.jsonl", "trajectories.jsonl"]  # no temp file left


def test_a_merged_candidates_reason_is_its_verdicts_and_the_approval(tmp_path, capsys):
    """export-otel's evoharness.reason was empty (absent) on every rollout of a merged candidate: summary.json's
    merged entries have no `reason` key. Now it is the verdict's reason from the run's rounds and, when a person
    approved the merge, the approval with its reason (`approve --reason`), as `review` prints them."""
    run = tmp_path / "run"
    run.mkdir()
    rollouts = [TraceBuilder(f"t-{c}").user("hi").deliver("hello").build(score=1.0, harness_commit=c)
                for c in ("aa11", "bb22", "cc33")]
    write_trajectories(run / "trajectories.jsonl", rollouts)

    def cand(branch, commit, reason):
        return {"branch": branch, "commit": commit, "verdict": {"candidate": branch, "commit": commit,
                                                                "accepted": True, "reason": reason, "approval": ""}}
    dropped = "all gates passed (after dropping 1 of 2 hunks with no attributable gain)"
    (run / "summary.json").write_text(json.dumps({
        "rounds": [{"round": 1, "candidates": [cand("candidate/r1-a", "aa11", "all gates passed"),
                                               cand("candidate/r1-b", "bb22", "all gates passed")]},
                   {"round": 2, "candidates": [cand("candidate/r2-c", "cc33", dropped)]}],
        "merged": [{"branch": "candidate/r1-a", "commit": "aa11", "merge_commit": "m1", "round": 1, "reading": 0.9,
                    "targets": "F3.no_delivery", "approval": "approved by reviewer: the lesson reads right"},
                   {"branch": "candidate/r2-c", "commit": "cc33", "merge_commit": "m2", "round": 2, "reading": 0.9,
                    "targets": "F3.no_delivery"}],
        "rejected": [{"branch": "candidate/r1-b", "commit": "bb22", "round": 1,
                      "reason": "accepted but superseded by candidate/r1-a (main moved: re-verify next round)"}]}))
    out = tmp_path / "o.jsonl"
    assert main(["export-otel", str(run), "-o", str(out)]) == 0
    roots = {}
    for line in out.read_text().splitlines():
        for s in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            attrs = {a["key"]: next(iter(a["value"].values())) for a in s["attributes"]}
            if "evoharness.harness_commit" in attrs:
                roots[attrs["evoharness.harness_commit"]] = attrs["evoharness.verdict"], attrs.get("evoharness.reason")
    assert roots == {
        "aa11": ("merged", "all gates passed; approved by reviewer: the lesson reads right"),
        "bb22": ("rejected", "accepted but superseded by candidate/r1-a (main moved: re-verify next round)"),
        "cc33": ("merged", dropped)}


@pytest.mark.parametrize("summary", ['[]', '"done"', '{"rounds": 5}', '{"merged": 5, "rejected": {"commit": "aa11"}}',
                                     '{"rounds": [{"candidates": 3}], "merged": [{"commit": "aa11"}]}'])
def test_a_summary_of_the_wrong_shape_is_one_error_line_or_passed_over_never_a_traceback(tmp_path, capsys, summary):
    """A hand-edited or truncated-and-rewritten summary.json: a summary that is no JSON object is one error: line
    naming it (as one that is no JSON is), nothing written; a field of the wrong type is read as absent."""
    run = tmp_path / "run"
    run.mkdir()
    t = TraceBuilder("t1").user("hi").deliver("hello").build(score=1.0, harness_commit="aa11")
    write_trajectories(run / "trajectories.jsonl", [t])
    (run / "summary.json").write_text(summary)
    out = tmp_path / "o.jsonl"
    rc = main(["export-otel", str(run), "-o", str(out)])
    err = capsys.readouterr().err
    if summary.startswith("{"):
        assert rc == 0 and out.is_file(), err
    else:
        assert rc == 2 and err.splitlines() == [f"error: {run / 'summary.json'}: unreadable run summary: not a JSON "
                                                "object"], err
        assert not out.exists()


@pytest.mark.parametrize("calls", ["bad", {"id": "c1"}, [None, 5, "x"], [{"id": "c1", "function": "get"}],
                                   [{"id": "c1", "function": None}]])
def test_tool_calls_of_the_wrong_shape_are_passed_over_never_a_traceback(tmp_path, capsys, calls):
    """A canonical trace keeps its messages as given (any JSON): an assistant turn whose tool_calls is a string, an
    object or a list of non-objects was an AttributeError traceback ('str' object has no attribute 'get'), where
    `diagnose` and `label` read the same file."""
    rec = {"id": "odd", "task_id": "t", "final_answer": "done", "score": 1.0,
           "messages": [{"role": "user", "content": "look it up"},
                        {"role": "assistant", "content": "on it", "tool_calls": calls},
                        {"role": "assistant", "content": "done"}]}
    src = tmp_path / "odd.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "spans.jsonl"
    assert main(["export-otel", str(src), "--out", str(out)]) == 0
    assert "exported 1 trajectories as 1 traces" in capsys.readouterr().out
    spans = [s for rs in json.loads(out.read_text())["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert len(tools) == sum(isinstance(c, dict) for c in (calls if isinstance(calls, list) else ()))
