"""`evoharness label --labeller llm --model openai:URL` writes the LLM judge's labels, so `calibrate` can score the
judge against a human sample of the user's own runs.

Until the sixteenth session only `diagnose` took `--labeller llm`, and `calibrate` reads the lines `label` writes:
the judge could be calibrated on nothing but the public sets (`benchmarks/label_accuracy.py`). The endpoint here is a
local fake answering on loopback (no network model)."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.cli import main
from tests.http_fakes import completion, replying


def _failed_run(shared_data, tmp_path) -> str:
    rows = json.loads((shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())
    path = tmp_path / "failed.json"
    path.write_text(json.dumps([next(r for r in rows if not r["reward"])]))
    return str(path)


def test_label_writes_the_judges_labels_and_calibrate_scores_them(shared_data, tmp_path, capsys):
    sample = _failed_run(shared_data, tmp_path)
    rules = tmp_path / "rules.jsonl"
    assert main(["label", sample, "--out", str(rules)]) == 0
    ruled = json.loads(rules.read_text())
    assert ruled["labeller"] == "rules" and ruled["failure_class"] == "F4"
    step = ruled["first_signal"]["step"]  # a step the judge is shown (its excerpt is around the rules' signals)
    verdict = {"failed_here": True, "failure_class": "F1", "step": step, "agent": "", "quote": "",
               "reason": "claims what no tool result says"}
    judged = tmp_path / "llm.jsonl"
    with replying(lambda: completion(json.dumps(verdict))) as url:
        assert main(["label", sample, "--out", str(judged), "--labeller", "llm", "--model", f"openai:{url}#m"]) == 0
    line = json.loads(judged.read_text())
    assert (line["labeller"], line["failure_class"], line["first_signal"]["step"]) == ("llm", "F1", step)
    assert line["schema_version"] == ruled["schema_version"]
    capsys.readouterr()

    human = tmp_path / "human.jsonl"
    human.write_text(json.dumps({"trajectory_id": line["trajectory_id"], "failure_class": "F1", "step": step}) + "\n")
    assert main(["calibrate", str(judged), "--human", str(human), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert (scored["n"], scored["accuracy"], scored["step_exact"]) == (1, 1.0, 1)
    assert main(["calibrate", str(rules), "--human", str(human), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == 0.0  # the rules said F4


def test_label_says_how_many_fell_back_and_refuses_judge_options_without_the_judge(shared_data, tmp_path, capsys):
    sample = _failed_run(shared_data, tmp_path)
    out = tmp_path / "labels.jsonl"
    with replying(lambda: completion("no JSON here")) as url:
        assert main(["label", sample, "--out", str(out), "--labeller", "llm", "--model", f"openai:{url}#m"]) == 0
    assert json.loads(out.read_text())["labeller"].startswith("rules (llm fallback: ")
    assert "llm judge: 0 runs judged by the model, 1 fell back to the rule labeller" in capsys.readouterr().err

    missing = str(tmp_path / "missing.json")  # options are checked before any file is read
    for argv, said in ((["--judge-timeout", "30"], "error: --judge-timeout is for --labeller llm"),
                       (["--labeller", "llm"], "error: --labeller llm needs --model openai:URL[#model]"),
                       (["--labeller", "llm", "--model", "openai:http://127.0.0.1:9/v1#m", "--context", "10"],
                        "error: --context: must be >= 512 tokens, not 10")):
        assert main(["label", missing, "--out", str(tmp_path / "x.jsonl"), *argv]) == 2, argv
        assert capsys.readouterr().err.strip().splitlines() == [said], argv
    assert not (tmp_path / "x.jsonl").exists()


def test_the_judges_rule_labels_carry_the_rules_fingerprint_and_its_verdicts_none(shared_data, tmp_path, capsys):
    """A line the judge left to its rule labeller (a fallback: here a reply that is no JSON) is the rules' label and
    carries their fingerprint, so `dataset export --labels` reuses it; the model's own verdict carries none and is
    labelled again (no_fingerprint). Until the eighteenth session every line of `--labeller llm` had none."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.traces.importers import load_paths
    from evoharness.traces.store import write_trajectories

    src = tmp_path / "failed.jsonl"  # canonical lines: the labels carry each line's digest
    write_trajectories(src, load_paths([Path(_failed_run(shared_data, tmp_path))]))
    fell, judged = tmp_path / "fell.jsonl", tmp_path / "judged.jsonl"
    with replying(lambda: completion("no JSON here")) as url:
        assert main(["label", str(src), "--out", str(fell), "--labeller", "llm", "--model", f"openai:{url}#m"]) == 0
    line = json.loads(fell.read_text())
    assert line["labeller"].startswith("rules (llm fallback: ")
    assert line["labeller_fingerprint"] == Labeller().fingerprint

    step = line["first_signal"]["step"]
    verdict = {"failed_here": True, "failure_class": "F1", "step": step, "agent": "", "quote": "", "reason": "r"}
    with replying(lambda: completion(json.dumps(verdict))) as url:
        assert main(["label", str(src), "--out", str(judged), "--labeller", "llm", "--model", f"openai:{url}#m"]) == 0
    line = json.loads(judged.read_text())
    assert (line["labeller"], line["failure_class"], line["labeller_fingerprint"]) == ("llm", "F1", None)
    capsys.readouterr()

    for labels, said in ((fell, "1 label reused"), (judged, "0 labels reused, 1 labelled again")):
        assert main(["dataset", "export", "-o", str(tmp_path / labels.stem), "--source", "all", "-t", str(src),
                     "--labels", str(labels)]) == 0
        assert said in capsys.readouterr().out
    # the reused fallback label is the class the export's own labelling gives (the rules': F4), not the judge's F1
    meta = json.loads((tmp_path / "judged" / "metadata.jsonl").read_text())
    assert meta["failure_class"] == json.loads((tmp_path / "fell" / "metadata.jsonl").read_text())["failure_class"]
