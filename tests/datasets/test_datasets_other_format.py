"""The dataset commands read canonical trajectory JSON lines (what `evoharness import` writes). Given a trace file in
another format -- tau-bench's results JSON, a Who&When log, the files `diagnose` takes as they are -- they said
`FILE:line 1: invalid JSON (truncated or not JSON)` of a file that is whole, valid JSON, and named no way on."""

from __future__ import annotations

import shlex

import pytest

from evoharness.cli import main


@pytest.mark.parametrize("which, fmt", [("tau_bench_airline_gpt4o/gpt-4o-airline.json", "openai"),
                                        ("who_and_when/Who&When/Algorithm-Generated/21.json", "who-and-when")])
@pytest.mark.parametrize("command", [["dataset", "enqueue"], ["dataset", "export", "--source", "all", "-o", "EXP",
                                                              "-t"]])
def test_a_trace_file_of_another_format_is_named_with_the_way_to_convert_it(shared_data, tmp_path, capsys, which,
                                                                              fmt, command):
    src = shared_data / which
    args = [str(tmp_path / "exp") if a == "EXP" else a for a in command]
    assert main(["--set", f"home={tmp_path / 'home'}", *args, str(src)]) == 2
    err = capsys.readouterr().err.splitlines()
    # the command runs as printed: Who&When's folder name holds a `&`, which a shell would take as "in the background"
    assert err == [f"error: {src}: a trace file in the {fmt} format, not canonical trajectory JSON lines (what the "
                   f"dataset commands read): convert it first, `evoharness import {shlex.quote(str(src))} --out "
                   "FILE.jsonl`"]
    assert not (tmp_path / "exp").exists()  # nothing written
    if command[1] == "enqueue":
        assert not (tmp_path / "home").exists()  # nor a queue made


def test_a_broken_line_of_a_canonical_file_is_still_named_as_before(tmp_path, capsys):
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"id": "a", "task_id": "t", "messages": [{"role": "user", "content": "hi"}]\n')  # cut short
    assert main(["--set", f"home={tmp_path / 'home'}", "dataset", "enqueue", str(bad)]) == 2
    assert capsys.readouterr().err == f"error: {bad}:line 1: invalid JSON (truncated or not JSON)\n"
