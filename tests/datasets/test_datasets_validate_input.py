"""`dataset validate` on files that are not what it expects: problems or one `error:` line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.datasets.export_formats import hf_row_errors
from evoharness.datasets.validate import openai_errors, sharegpt_errors


@pytest.mark.parametrize(("check", "record", "problem"), [
    (openai_errors, {"messages": [{"role": ["user"], "content": "hi"}]}, "messages[0]: bad role ['user']"),
    (openai_errors, {"messages": [{"role": "tool", "tool_call_id": {"id": 1}, "content": "x"}]},
     "messages[0]: tool_call_id {'id': 1} answers no pending call"),
    (openai_errors, {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": ["f"], "arguments": "{}"}}]}]},
     "messages[0].tool_calls[0]: function ['f'] not declared in tools"),
    (sharegpt_errors, {"conversations": [{"from": {"a": 1}, "value": "x"}]},
     "conversations[0]: from {'a': 1}, expected one of ['human', 'observation']"),
    (sharegpt_errors, {"conversations": [{"from": "human", "value": "x"}, "gpt"]},
     "conversations: the last turn is not a gpt reply"),
    (hf_row_errors, {"messages": True, "tools": "[]"}, "messages: not a list"),
    (hf_row_errors, {"messages": ["user"], "tools": "[]"}, "messages[0]: bad role None"),
])
def test_a_value_of_the_wrong_type_is_a_problem_not_a_crash(check, record, problem):
    assert problem in check(record)  # each raised TypeError or AttributeError before


def test_a_file_that_is_not_jsonl_or_not_parquet_is_reported(tmp_path, capsys):
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    utf32 = tmp_path / "utf32.jsonl"
    utf32.write_bytes(b"\xff\xfe\x00\x00garbage\n")
    for fmt in ("openai", "sharegpt"):
        assert main(["dataset", "validate", str(deep), "--format", fmt]) == 2
        out, err = capsys.readouterr()
        assert out.splitlines() == ["line 1: JSON nested too deeply"] and err == "error: 1 problem in 1 record\n"
        # a UTF-32 byte-order mark: read as UTF-32 (as JSON lines in UTF-16 / UTF-32 are), which the rest is not
        assert main(["dataset", "validate", str(utf32), "--format", fmt]) == 2
        out, err = capsys.readouterr()
        assert err == f"error: {utf32}:line 1: not UTF-32 text past this line (its byte-order mark says UTF-32): " \
                      "cut short or binary\n"
    pytest.importorskip("pyarrow")
    assert main(["dataset", "validate", str(utf32), "--format", "hf"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {utf32}: not a parquet file (") and len(err.splitlines()) == 1


def test_export_of_trajectories_that_are_no_file_says_what_they_are(tmp_path, capsys):
    """A directory, FIFO or device given as --trajectories said 'trajectory file not found'."""
    import os

    os.mkfifo(tmp_path / "fifo")
    for path, reason in ((tmp_path / "fifo", "not a regular file (a FIFO, socket or device is refused)"),
                         (tmp_path, "is a directory, not a trajectory file"),
                         (tmp_path / "nope.jsonl", "no such file or directory")):
        assert main(["dataset", "export", "--out", str(tmp_path / "ex"), "--source", "healthy",
                     "--trajectories", str(path)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]
        assert not (tmp_path / "ex").exists()


def test_a_trajectory_or_label_file_is_named_as_such_not_listed_as_problems(tmp_path, capsys):
    """`dataset validate traces.jsonl` (the file an export reads) printed 50 lines such as `line 1: record: unexpected
    keys ['events', 'final_answer', ...]` and `error: 111 problems in 12 records`; a label file, 24 problems."""
    tau = str(Path(__file__).resolve().parents[1] / "fixtures/data/tau_bench_airline_gpt4o/gpt-4o-airline.json")
    traces, labels = tmp_path / "traces.jsonl", tmp_path / "labels.jsonl"
    assert main(["import", tau, "--out", str(traces)]) == 0 and main(["label", tau, "--out", str(labels)]) == 0
    capsys.readouterr()
    for path, what in ((traces, "canonical trajectories"), (labels, "labels")):
        for fmt in ([], ["--format", "sharegpt"]):
            assert main(["dataset", "validate", str(path), *fmt]) == 2
            out, err = capsys.readouterr()
            assert out == "" and err.startswith(f"error: {path}: {what} (what ") and err.count("\n") == 1
            assert "not an export: validate what `dataset export --out DIR` wrote" in err
    export = tmp_path / "sft"
    assert main(["dataset", "export", "--trajectories", str(traces), "--out", str(export)]) == 0
    assert main(["dataset", "validate", str(export)]) == 0  # an export is still checked


def test_a_task_id_no_utf8_can_hold_is_one_error_line(tmp_path, capsys):
    """`dataset export --task $'\\xff'` (an argument that is no UTF-8: Python reads it as '\\udcff') was a
    PydanticSerializationError traceback as the manifest was written."""
    from tests.datasets.helpers import make_traj

    traces = tmp_path / "t.jsonl"
    traces.write_text(make_traj("a").model_dump_json() + "\n")
    assert main(["dataset", "export", "-t", str(traces), "--task", "t1", "--task", "\udcff",
                 "--out", str(tmp_path / "ex")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --task: '\\udcff' holds half a UTF-16 surrogate pair, which no task id in UTF-8 can hold"]
    assert not (tmp_path / "ex").exists()


@pytest.mark.parametrize(("arguments", "problem"), [
    ("[" * 100_000 + "]" * 100_000, "arguments are nested too deeply"),
    ('{"n": ' + "9" * 5000 + "}", "arguments are not JSON"),  # past Python's 4,300-digit int limit
])
def test_tool_call_arguments_nested_too_deeply_or_with_a_huge_number_are_a_problem(tmp_path, capsys, arguments,
                                                                                  problem):
    """Both were tracebacks (RecursionError; ValueError) from `dataset validate` of an openai file."""
    import json

    record = {"messages": [{"role": "user", "content": "x"},
                           {"role": "assistant", "content": None, "tool_calls": [
                               {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
                           {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                           {"role": "assistant", "content": "done"}],
              "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert main(["dataset", "validate", str(path), "--format", "openai"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"line 1: messages[1].tool_calls[0]: {problem}"]
    assert err == "error: 1 problem in 1 record\n"


@pytest.mark.parametrize("value", ["nan", "-nan", "inf", "1e999", "-inf"])
def test_a_min_score_that_is_no_finite_number_says_so(value, tmp_path, capsys):
    """`--min-score nan` said 'Input should be less than or equal to 1 (got nan)': NaN is not over 1, it is no
    number to compare with (eighteenth session, fuzz leftover)."""
    from evoharness.traces.store import write_trajectories

    from .helpers import make_traj

    traces = tmp_path / "t.jsonl"
    write_trajectories(traces, [make_traj("a", score=0.0)])
    assert main(["dataset", "export", "-t", str(traces), "--min-score", value, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --min-score: ") and "a finite number from 0 to 1" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "x").exists()


def test_validate_of_an_export_whose_data_file_is_a_directory_says_so(tmp_path, capsys):
    """`dataset validate DIR` where DIR/data.jsonl is a directory said 'not a regular file (a FIFO, socket or device
    is refused)', which it is not."""
    export = tmp_path / "ex"
    (export / "data.jsonl").mkdir(parents=True)
    assert main(["dataset", "validate", str(export)]) == 2
    reason = "is a directory, not a dataset file"
    assert capsys.readouterr().err.splitlines() == [f"error: {export / 'data.jsonl'}: {reason}"]


@pytest.mark.parametrize(("fmt", "data_file"), [(None, "data.jsonl"), ("sharegpt", "data.jsonl"),
                                                 ("hf", "data/train-00000-of-00001.parquet")])
def test_validate_of_a_directory_with_no_data_file_says_what_it_looked_for(tmp_path, capsys, fmt, data_file):
    """`dataset validate EMPTY_DIR` said 'EMPTY_DIR/data.jsonl: no such file', naming a path the user never gave as
    if it were theirs. Now it names the directory and the data file it looked for there (the format's), and how to
    give one; nothing is written."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dataset", "validate", str(empty), *(["--format", fmt] if fmt else [])]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {empty}: a directory with no {data_file} in it "), err
    assert "dataset export --out DIR" in err[0], err
    assert list(empty.iterdir()) == []
