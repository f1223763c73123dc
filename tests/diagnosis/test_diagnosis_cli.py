"""`evoharness diagnose` / `label` / `import` as a user runs them."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys

import pytest

from evoharness.cli import main


def test_diagnose_json_shape_on_tau_bench(shared_data, capsys):
    path = shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"
    assert main(["diagnose", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 12  # the vendored sample: 6 with reward 1, 6 with reward 0
    assert out["composition"]["healthy"] == 0.5
    assert set(out["composition"]) == {"healthy", "F1", "F2", "F3", "F4", "E"}
    assert set(out["lever"]) >= {"harness", "weights"}
    assert 0 <= out["delivery_rate"] <= 1 and out["mean_score"] == 0.5
    t = next(t for t in out["trajectories"] if t["failure_class"] != "healthy")
    assert set(t) >= {"id", "task_id", "failure_class", "first_signal", "lever"}
    assert set(t["first_signal"]) == {"id", "step", "evidence"}
    healthy = [t for t in out["trajectories"] if t["failure_class"] == "healthy"]
    assert len(healthy) == 6 and all(t["first_signal"] is None and t["lever"] == "none" for t in healthy)


def test_diagnose_text_table(shared_data, capsys):
    assert main(["diagnose", str(shared_data / "mini_swe_agent_sample")]) == 0
    out = capsys.readouterr().out
    for word in ("Healthy", "F1", "F4", "Delivery", "Mean score", "Score|delivered", "Recommendation:",
                 "Most frequent first signals", "mini-swe-agent:"):
        assert word in out
    assert "50.0%" in out


def test_diagnose_says_who_and_when_is_unscored(shared_data, capsys):
    assert main(["diagnose", str(shared_data / "who_and_when")]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 trajectories are unscored" in out
    assert "  0.0%" in out  # healthy share


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"traj": [')
    assert main(["diagnose", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "line 1" in err[0]
    assert main(["diagnose", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    # the judge's options without the judge are refused, not silently ignored; one line, exit 2
    sample = str(tmp_path / "missing.json")  # options are checked before any file is read
    for opts in (["--judge-window", "5"], ["--context", "4096"], ["--labeller", "rules", "--judge-window", "0"],
                 ["--context", "100"], ["--judge-window", "-1"], ["--model", "openai:http://127.0.0.1:9/v1"]):
        assert main(["diagnose", sample, *opts]) == 2, opts
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {opts[-2]} is for --labeller llm"], (opts, err)  # the option named once
    # with the judge, an out-of-range value is still refused by its range
    judge = ["--labeller", "llm", "--model", "openai:http://127.0.0.1:9/v1"]
    for opts, said in ((["--context", "100"], "error: --context: must be >= 512 tokens, not 100"),
                       (["--judge-window", "-1"], "error: --judge-window: must be >= 0, not -1")):
        assert main(["diagnose", sample, *judge, *opts]) == 2, opts
        assert capsys.readouterr().err.strip().splitlines() == [said], opts


def test_skip_invalid_reports_and_labels_the_rest(shared_data, tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(json.loads((shared_data / "tau_bench_airline_gpt4o" /
                                           "gpt-4o-airline.json").read_text())[:3]))
    (tmp_path / "bad.json").write_bytes(b"\x00\x01binary")
    assert main(["diagnose", str(tmp_path), "--json"]) == 2
    capsys.readouterr()
    assert main(["diagnose", str(tmp_path), "--json", "--skip-invalid"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["n"] == 3
    assert "skipped:" in cap.err and "bad.json" in cap.err


def test_label_and_import_write_files(shared_data, tmp_path, capsys):
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(shared_data / "mini_swe_agent_sample"), "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4 and all("failure_class" in r and "lever" in r for r in rows)
    canon = tmp_path / "c.jsonl"
    assert main(["import", str(shared_data / "mini_swe_agent_sample"), "--out", str(canon), "--split", "dev"]) == 0
    assert main(["diagnose", str(canon), "--json"]) == 0
    capsys.readouterr()


def test_an_output_in_an_input_directory_is_not_read_and_an_input_file_is_not_overwritten(shared_data, tmp_path,
                                                                                          capsys):
    sample = shared_data / "mini_swe_agent_sample"
    labelled, imported = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sample, labelled)
    shutil.copytree(sample, imported)
    labels, canon = labelled / "labels.jsonl", imported / "out" / "canonical.jsonl"
    for _ in range(2):  # the second run finds the first one's output among the traces
        assert main(["label", str(labelled), "--out", str(labels)]) == 0, capsys.readouterr().err
        assert len(labels.read_text().splitlines()) == 4
        assert main(["import", str(imported), "--out", str(canon)]) == 0, capsys.readouterr().err
        assert len(canon.read_text().splitlines()) == 4  # not read back while written (it grew without end)
    capsys.readouterr()
    for cmd in ("label", "import"):  # an input file named as the output: refused before it is emptied
        assert main([cmd, str(canon), "--out", str(canon)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"error: --out: {canon} is also an input: write the output to another file"]
        assert len(canon.read_text().splitlines()) == 4
    link = tmp_path / "link.jsonl"  # the input under another name (a hard link): refused the same way
    os.link(canon, link)
    for cmd in ("label", "import"):
        assert main([cmd, str(canon), "--out", str(link)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"error: --out: {link} is also an input: write the output to another file"]
        assert len(canon.read_text().splitlines()) == 4
    link.unlink()
    # an input file inside an input directory, named as the output: its format is not the command's own, so it
    # is an input, not an earlier run's output -- refused, not emptied unread
    trace = next(f for f in sorted((imported / "trajs").rglob("*.json")))
    before = trace.read_bytes()
    for cmd in ("label", "import"):
        assert main([cmd, str(imported), "--out", str(trace)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"error: --out: {trace} is a trace file in the input directory {imported}, not one this "
                       "command wrote: write the output to another file"], err
        assert trace.read_bytes() == before


def test_config_override_changes_threshold(shared_data, capsys):
    path = shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"
    assert main(["--set", "diagnosis.healthy_threshold=0.0", "diagnose", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["composition"]["healthy"] == 1.0
    assert main(["--set", "diagnosis.healthy_threshold=7", "diagnose", str(path)]) == 2
    assert "healthy_threshold" in capsys.readouterr().err


def test_streamed_json_is_the_document_json_dumps_writes(shared_data, capsys):
    from evoharness.diagnosis.config import DiagnosisConfig
    from evoharness.diagnosis.labeller import label_all
    from evoharness.diagnosis.report import diagnosis_dict
    from evoharness.traces.importers import load_paths

    path = shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"
    assert main(["diagnose", str(path), "--json"]) == 0
    whole = diagnosis_dict(label_all(load_paths([path])), DiagnosisConfig())
    assert capsys.readouterr().out == json.dumps(whole, indent=2) + "\n"


def test_runs_read_twice_are_counted_each_and_a_warning_says_so(shared_data, tmp_path, capsys):
    """A directory holding a trace file and its imported copy (or two runs in files of one name, whose ids are made
    of it): diagnose counted every run twice and label wrote two lines per id, unsaid -- the example ids of a signal
    even named one run twice. `import` warned; diagnose and label now say it in the same words."""
    traces = tmp_path / "traces"
    shutil.copytree(shared_data / "tau_bench_airline_gpt4o", traces)
    assert main(["import", str(traces), "--out", str(traces / "imported.jsonl")]) == 0
    n = len((traces / "imported.jsonl").read_text().splitlines())
    capsys.readouterr()
    assert main(["diagnose", str(traces), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["n"] == 2 * n  # each is counted, as import writes each
    assert err.splitlines() == [f"warning: {n} of {2 * n} trajectories have the id of an earlier one (e.g. "
                                "gpt-4o-airline:0:0: the same runs in two files, or two runs in files of the same "
                                "name?); each is counted, but what keys by id (dataset enqueue and export, "
                                "calibrate) keeps one of each"]
    assert main(["label", str(traces), "--out", str(tmp_path / "labels.jsonl")]) == 0
    assert capsys.readouterr().err.startswith(f"warning: {n} of {2 * n} trajectories have the id of an earlier one")
    assert main(["diagnose", str(traces / "imported.jsonl")]) == 0  # ids read once: no warning
    assert capsys.readouterr().err == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["diagnose", "label", "import"])
def test_reading_many_trajectories_shows_progress_on_a_terminal(shared_data, tmp_path, monkeypatch, command):
    """diagnose / label / import of 100,000 runs (minutes of labelling) said nothing until the end. On a terminal a
    line every 10 s now counts the trajectories read (here every trajectory: the interval is 0); a log or a pipe
    gets none."""
    from evoharness.cli_support import Ticker

    monkeypatch.setattr(Ticker, "EVERY", 0.0)
    args = {"diagnose": ["diagnose"], "label": ["label", "--out", str(tmp_path / "l.jsonl")],
            "import": ["import", "--out", str(tmp_path / "t.jsonl")]}[command]
    src = shared_data / "tau_bench_airline_gpt4o"
    for stderr, lines in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stderr)
        assert main([*args, str(src)]) == 0
        ticks = [line for line in stderr.getvalue().splitlines() if "trajectories read" in line]
        n = len(json.loads((src / "gpt-4o-airline.json").read_text()))
        assert len(ticks) == (n if lines else 0), stderr.getvalue()
        if lines:
            assert ticks[-1].endswith(f"] {n:,} trajectories read") and ticks[-1].startswith("[")
