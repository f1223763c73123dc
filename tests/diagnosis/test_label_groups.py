"""benchmarks/label_groups.py: Algorithm-Generated cut by what a log is (its input, never its human label), each group
beside the trivial labellers, and a rule's gain per group (the figures less those without that one detector)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
HANDOFF = ("You are given: (1) a task and advises from your manager with a specific plan and (2) a general task.\n\n"
           "# General Task\nHow many athletes did the smallest team send to the 1928 Summer Olympics?")


def _write(folder: Path, stem: str, qid: str, level: str, history: list[dict], step: int, agent: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps({
        "question": "How many athletes did the smallest team send to the 1928 Summer Olympics?", "question_ID": qid,
        "level": level, "history": history, "mistake_agent": agent, "mistake_step": str(step), "mistake_reason": "r"}))


def test_groups_come_from_the_input_and_a_rule_is_credited_where_it_turns_a_record_right(tmp_path, capsys):
    mod = load_file(ROOT / "benchmarks" / "label_groups.py", "label_groups")
    folder = tmp_path / "who_and_when" / "Who&When" / "Algorithm-Generated"
    # a GAIA log whose expert makes up data (F1.unsupported_fact at history step 2, the humans' step; without the rule
    # the fallback takes the first reasoning turn, step 1)
    _write(folder, "1", "4d51c4bf-4b0e-4f3d-897b-3f6687a7d9f2", "1", [
        {"role": "assistant", "name": "Planner_Expert", "content": HANDOFF},
        {"role": "assistant", "name": "Data_Expert", "content": "I will look for the official results page."},
        {"role": "assistant", "name": "Data_Expert", "content": "The site is down, so let's simulate the dataset."},
        {"role": "assistant", "name": "Computer_terminal",
         "content": "exitcode: 0 (execution succeeded)\nCode output: 3"},
        {"role": "assistant", "name": "Verification_Expert", "content": "The answer is 3. TERMINATE"},
    ], 2, "Data_Expert")
    # an AssistantBench log (a hex question id) with a web agent and no code run
    _write(folder, "2", "6b078778a4a0c4fd3f6f6d34a5c4d3a8b3e0f7d3c2b1a09f8e7d6c5b4a39281", "Hard", [
        {"role": "assistant", "name": "WebSearch_Expert", "content": HANDOFF},
        {"role": "assistant", "name": "WebSearch_Expert", "content": "I searched and found the team list."},
        {"role": "assistant", "name": "Verification_Expert", "content": "The answer is 1. TERMINATE"},
    ], 2, "Verification_Expert")
    assert mod.main(["--data", str(tmp_path), "--rules", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    groups = out["groups"]
    assert set(groups["family"]) == {"GAIA", "AssistantBench"}
    assert groups["code runs"]["runs all clean"]["n"] == {"n": 1} and groups["code runs"]["no run"]["n"] == {"n": 1}
    assert set(groups["web"]) == {"a web/search agent", "no web/search agent"}
    assert groups["family"]["GAIA"]["evoharness"]["exact"] == 1  # the made-up data is the humans' step
    assert groups["family"]["GAIA"]["last message"]["exact"] == 0
    f1 = out["rules"]["F1.unsupported_fact"]
    assert f1["right"] == ["1"] and f1["by_group"]["family"]["GAIA"] == [1, 0]  # exact +1; the agent the same
    assert f1["by_group"]["family"]["AssistantBench"] == [0, 0]


def test_a_folder_without_algorithm_generated_logs_is_one_error_line(tmp_path, capsys):
    mod = load_file(ROOT / "benchmarks" / "label_groups.py", "label_groups")
    assert mod.main(["--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
