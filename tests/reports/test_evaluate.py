"""`evoharness evaluate`: seed vs evolved on a split, against the noise model's threshold."""

from __future__ import annotations

import json
import math

import git
import pytest

from evoharness.reports.measure import Arm, noise_of, verdict_of
from tests.reports.conftest import cli

INPROCESS = ("--set", "sandbox.backend=inprocess")


def _evaluate(capsys, *args: str) -> dict:
    assert cli(*INPROCESS, "evaluate", *args, "--json") == 0
    return json.loads(capsys.readouterr().out)


def test_seed_vs_a_harness_with_a_merged_fix_is_better_beyond_noise(done_run, tmp_path, capsys):
    settings, outcome = done_run
    harness = settings.run.harness
    out = tmp_path / "ev.json"
    ev = _evaluate(capsys, "--harness", str(harness), "--env", "synthetic", "--model", "scripted:weak",
                   "--rollouts", "4", "--split", "heldout", "--out", str(out))
    assert json.loads(out.read_text()) == ev
    repo = git.Repo(harness)
    root = repo.git.rev_list("--max-parents=0", "main").split()[-1]
    assert ev["baseline"]["commit"] == root and ev["candidate"]["commit"] == repo.commit("main").hexsha
    assert len(ev["tasks"]) == 6 and ev["k"] == 4 and ev["seeds"] == [0, 1, 2, 3]
    b, c = ev["baseline"], ev["candidate"]
    assert sum(len(v) for v in b["per_task"].values()) == 24
    assert ev["difference"] == pytest.approx(c["mean"] - b["mean"])
    assert ev["resolvable"] == pytest.approx(3 * ev["sigma"] / 2)
    assert ev["difference"] > ev["resolvable"] and ev["verdict"] == "better"
    comp_b, comp_c = b["composition"]["composition"], c["composition"]["composition"]
    assert comp_c["healthy"] > comp_b["healthy"]
    assert comp_c["F2"] + comp_c["F3"] < comp_b["F2"] + comp_b["F3"]  # the fix removed process failures


def test_a_revision_against_itself_is_within_noise_and_the_text_says_so(done_run, tmp_path, capsys):
    settings, _ = done_run
    args = ["--harness", str(settings.run.harness), "--rollouts", "2", "--split", "dev", "--tasks", "4",
            "--baseline", "main", "--candidate", "main", "--out", str(tmp_path / "same.json")]
    assert cli(*INPROCESS, "evaluate", *args) == 0
    text = capsys.readouterr().out
    ev = json.loads((tmp_path / "same.json").read_text())
    assert ev["difference"] == 0.0 and ev["verdict"] == "within noise"
    assert "difference +0.000" in text and "within noise" in text and f"{ev['resolvable']:.3f}" in text


def test_oracle_model_scores_above_the_weak_model_on_the_same_harness(done_run, tmp_path, capsys):
    settings, _ = done_run
    common = ["--harness", str(settings.run.harness), "--rollouts", "2", "--split", "heldout",
              "--baseline", "seed", "--candidate", "seed"]
    weak = _evaluate(capsys, *common, "--model", "scripted:weak", "--out", str(tmp_path / "w.json"))
    oracle = _evaluate(capsys, *common, "--model", "scripted:oracle", "--out", str(tmp_path / "o.json"))
    assert oracle["candidate"]["mean"] > weak["candidate"]["mean"] + weak["resolvable"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--split", "test"], "unknown split"),
    (["--baseline", "no-such-rev"], "unknown revision"),
    (["--model", "nonsense:model"], "model"),
    (["--rollouts", "0"], "--rollouts"),
])
def test_bad_input_is_one_error_line(done_run, tmp_path, capsys, args, needle):
    settings, _ = done_run
    code = cli(*INPROCESS, "evaluate", "--harness", str(settings.run.harness), "--out", str(tmp_path / "x.json"),
               *args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and needle in err[0], err
    assert not (tmp_path / "x.json").exists()


def test_harness_or_run_and_an_output_are_required(tmp_path, capsys):
    assert cli("evaluate", "--out", str(tmp_path / "x.json")) == 2
    assert "--harness DIR or --run RUN" in capsys.readouterr().err
    assert cli("evaluate", "--harness", str(tmp_path)) == 2
    assert "--out" in capsys.readouterr().err


def _arm(per_task: dict[str, list[float]]) -> Arm:
    return Arm(rev="x", commit="0" * 40, mean=0.0, composition={}, per_task=per_task)


def test_noise_is_the_pooled_within_task_sd_of_both_arms_over_sqrt_tasks():
    b = _arm({"t1": [0.0, 1.0], "t2": [1.0, 1.0]})
    c = _arm({"t1": [1.0, 1.0], "t2": [0.0, 1.0]})
    sigma, resolvable = noise_of(b, c, k=2, z=3.0, floor=0.0)
    pooled = math.sqrt((0.5 + 0.0 + 0.0 + 0.5) / 4)  # four groups of two: df 4
    assert sigma == pytest.approx(pooled / math.sqrt(2))
    assert resolvable == pytest.approx(3 * sigma / math.sqrt(2))
    assert noise_of(_arm({"t": [1.0, 1.0]}), _arm({"t": [1.0, 1.0]}), 2, 3.0, floor=0.01)[0] == 0.01


@pytest.mark.parametrize(("diff", "resolvable", "verdict"), [
    (0.10, 0.05, "better"), (-0.10, 0.05, "worse"), (0.05, 0.05, "within noise"), (-0.01, 0.05, "within noise"),
    (None, 0.05, "within noise"),
])
def test_verdict_table(diff, resolvable, verdict):
    assert verdict_of(diff, resolvable) == verdict
