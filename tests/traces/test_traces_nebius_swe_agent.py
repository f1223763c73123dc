"""nebius' ``SWE-agent-trajectories`` rows (tests/fixtures/traces/nebius_swe_agent: hand-written in the dataset's
columns, make_sample.py there) are read as SWE-agent ran: each ``ai`` turn's fenced command a ``bash`` call, the next
user turn its result, ``target`` the verdict, ``generated_patch`` the delivered patch. Before, a file of them was
"unrecognised JSONL record" (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_file, load_paths
from evoharness.traces.importers.nebius_swe_agent import command

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "nebius_swe_agent" / "sample.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rows_are_detected_and_read_turn_by_turn():
    assert detect_format(SAMPLE) == "nebius-swe-agent"
    resolved, cycle, budget = load_file(SAMPLE)
    row = _rows()[0]
    assert [(t.id, t.score, t.termination.value) for t in (resolved, cycle, budget)] == [
        ("sample:example-org__tinyconf-12:0", 1.0, "delivered"),
        ("sample:example-org__tinyconf-12:1", 0.0, "delivered"),
        ("sample:example-org__tinyconf-12:2", 0.0, "step_budget")]
    assert len(resolved.messages) == len(row["trajectory"])  # step i is turn i
    assert resolved.messages[0] == {"role": "system", "content": row["trajectory"][0]["system_prompt"]}
    assert resolved.model == "swe-agent-llama-70b" and resolved.task.startswith("We're currently solving")
    assert resolved.final_answer == row["generated_patch"] and budget.final_answer is None
    commands = [c.args["command"] for c in resolved.tool_calls()]
    assert [c.name for c in resolved.tool_calls()] == ["bash"] * len(commands)
    assert commands[0] == "create reproduce.py" and commands[-1] == "submit"
    assert commands[5] == "edit 8:8\n    return value.strip().lower() in TRUE\nend_of_edit"  # indentation kept
    results = [m for m in resolved.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [c.id for c in resolved.tool_calls()][:-1]  # submit: no answer
    assert results[0]["content"].endswith("(Open file: /tinyconf/reproduce.py)\n(Current directory: /tinyconf)\nbash-$")


def test_the_linter_refusing_an_edit_is_a_tool_error_and_the_cost_limit_a_budget():
    _, cycle, budget = load_file(SAMPLE)
    [refusal] = cycle.events
    assert refusal.type == "tool_error" and cycle.messages[refusal.step]["role"] == "tool"
    assert cycle.messages[refusal.step]["content"].startswith("Your proposed edit has introduced new syntax error(s)")
    assert [(e.type, e.step, e.detail) for e in budget.events] == [("budget_exhausted", 11, "exit_cost")]


@pytest.mark.parametrize(("text", "expected"), [
    ("DISCUSSION\nLet's look.\n```\nls -F\n```", "ls -F"),
    ("Run it.\n```bash\npython reproduce.py\n```\n", "python reproduce.py"),
    # an edit whose text holds a fenced block: the outer block is the command (SWE-agent's parser)
    ("Fix the docs.\n```\nedit 3:5\n```python\nx = 1\n```\nend_of_edit\n```",
     "edit 3:5\n```python\nx = 1\n```\nend_of_edit"),
    ("First `ls`, then:\n```\nls\n```\nor\n```\nsubmit\n```", "submit"),  # the last block
    ("I think the fix is done.", None),
])
def test_the_command_is_the_last_fenced_block_as_swe_agent_parses_it(text, expected):
    assert command(text) == expected


def test_a_reply_without_a_command_makes_no_call_and_the_next_turn_is_the_user_s(tmp_path):
    row = _rows()[0]
    row["trajectory"][2]["text"] = "I am not sure what to do."
    (t,) = load_file(_write(tmp_path / "rows.jsonl", [row]))
    assert "tool_calls" not in t.messages[2] and t.messages[3]["role"] == "user"


def test_a_second_observation_in_a_row_answers_the_same_call_again(tmp_path):
    row = _rows()[1]
    row["trajectory"].insert(6, dict(row["trajectory"][5]))  # edit 1:1's answer twice
    (t,) = load_file(_write(tmp_path / "rows.jsonl", [row]))
    assert [m.get("tool_call_id") for m in t.messages[5:7]] == [t.messages[4]["tool_calls"][0]["id"]] * 2
    assert [m["role"] for m in t.messages[5:8]] == ["tool", "tool", "assistant"]  # no user message: none was sent


def test_without_target_a_row_is_unscored_and_a_json_list_of_rows_reads_the_same(tmp_path):
    rows = _rows()
    del rows[0]["target"]
    listed = tmp_path / "rows.json"
    listed.write_text(json.dumps(rows))
    assert detect_format(listed) == "nebius-swe-agent"
    assert [t.score for t in load_paths([listed])] == [None, 0.0, 0.0]


@pytest.mark.parametrize(("change", "reason"), [
    (lambda r: r.update(target="yes"), "target must be true or false (or 1 / 0), got 'yes'"),
    (lambda r: r["trajectory"][3].update(role="assistant"), "trajectory[3] is not a turn with role system, user or ai"),
    (lambda r: r["trajectory"].__setitem__(4, "ls"), "trajectory[4] is not a turn with role system, user or ai"),
    (lambda r: r["trajectory"][2].update(text=["ls"]), "trajectory[2].text must be a string, got list"),
    (lambda r: r.update(instance_id=""), "instance_id must be a non-empty string"),
])
def test_a_bad_row_is_one_error_line_naming_it_and_skipped_with_skip_invalid(tmp_path, capsys, change, reason):
    rows = _rows()
    change(rows[1])
    path = _write(tmp_path / "rows.jsonl", rows)
    with pytest.raises(InputError, match=reason.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        list(load_paths([path]))
    capsys.readouterr()
    assert main(["import", str(path), "--out", str(tmp_path / "out.jsonl")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path}") and "line 2" in line and reason in line
    assert main(["import", str(path), "--out", str(tmp_path / "out.jsonl"), "--skip-invalid"]) == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


def test_a_cut_short_line_is_one_error_naming_it(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    lines = SAMPLE.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:500] + "\n")
    assert main(["import", str(path), "--out", str(tmp_path / "out.jsonl")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path}") and "line 2" in line and "invalid JSON" in line


def test_a_parquet_shard_of_the_dataset_is_one_error_that_says_how_to_read_it(tmp_path, capsys):
    """Before: 'not JSON: binary content'. pyarrow is no dependency of evoharness, so the dataset's parquet files are
    exported as JSON lines first; the error says so."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "train-00000-of-00012.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()), path)
    assert main(["import", str(path), "--out", str(tmp_path / "out.jsonl")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"error: {path}: a parquet file, not JSON: export its rows as JSON lines (datasets' "
                    "Dataset.to_json; docs/traces.md, nebius-swe-agent)")
