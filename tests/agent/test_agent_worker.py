"""The worker entry point the sandbox runs, and model construction."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evoharness.agent.models import LangChainChatModel
from evoharness.agent.runner import make_model
from evoharness.agent.scripted import WeakScriptedModel
from evoharness.agent.worker import main
from evoharness.errors import InputError
from evoharness.sandbox.scoring import HostScorer, parse_worker_output
from evoharness.traces.models import Termination


def request(tmp_path, harness_dir, **kw):
    req = {"harness_dir": str(harness_dir), "env_spec": "synthetic", "task_id": "status_A-100",
           "model_spec": "scripted:oracle", "seed": 3, "rollout": 1, "split": "dev", "harness_commit": "c0ffee"}
    req.update(kw)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(req))
    return path


def test_worker_subprocess_writes_trajectory(harness, tmp_path):
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "evoharness.agent.worker", str(request(tmp_path, harness())), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = parse_worker_output(out.read_bytes())
    traj = got.trajectory
    assert [c.name for c in got.env_calls] == ["get_order"] and got.env_calls[0].result
    assert traj.score == 1.0 and traj.rollout == 1 and traj.harness_commit == "c0ffee" and traj.split == "dev"
    assert traj.model == "scripted:oracle" and traj.meta["seed"] == 3
    # the host's replay of the recorded calls reproduces them and gives the same score
    assert HostScorer("synthetic").settle(traj, got.env_calls, "status_A-100").score == 1.0
    assert "tampered" not in traj.meta


def test_worker_broken_harness_exits_zero_with_failed_trajectory(harness, tmp_path):
    h = harness(files={"middleware/bad.py": "def after_model(:\n"})
    out = tmp_path / "out.json"
    assert main([str(request(tmp_path, h)), str(out)]) == 0
    traj = parse_worker_output(out.read_bytes()).trajectory
    assert traj.termination == Termination.error and "SyntaxError" in traj.events[0].detail


@pytest.mark.parametrize("patch", [{"task_id": "nope"}, {"env_spec": "mystery"}, {"model_spec": "gpt:x"},
                                   {"seed": "not a number"}])
def test_worker_unusable_input_exits_two(harness, tmp_path, patch):
    out = tmp_path / "out.json"
    assert main([str(request(tmp_path, harness(), **patch)), str(out)]) == 2
    assert not out.exists()
    assert main(["only-one-arg"]) == 2


def test_a_bad_request_is_one_error_line_naming_each_field(harness, tmp_path, capsys):
    """The host records a failed worker's last stderr line as the rollout's failure reason: pydantic's dump
    ended in a link to its docs."""
    bad = request(tmp_path, harness(), seed="abc")
    bad.write_text(json.dumps({k: v for k, v in json.loads(bad.read_text()).items() if k != "task_id"}))
    out = tmp_path / "out.json"
    assert main([str(bad), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: bad request {bad}: "), err
    assert "task_id: Field required" in err and "seed: Input should be a valid integer" in err and "'abc'" in err
    assert not out.exists()

    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([json.loads(request(tmp_path, harness()).read_text()), {"harness_dir": "h"}]))
    assert main(["--batch", str(batch), str(tmp_path / "outdir")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: bad batch {batch}: request 1: env_spec: Field"), err
    assert not (tmp_path / "outdir").exists()


def test_make_model_specs():
    assert isinstance(make_model("scripted:weak", 1), WeakScriptedModel)
    oracle = make_model("scripted:oracle", 1)
    assert oracle.name == "scripted:oracle" and oracle.rates["malformed"] == 0.0
    m = make_model("openai:http://127.0.0.1:9/v1#tiny-model", 5)  # constructed, no request made
    assert isinstance(m, LangChainChatModel) and m.llm.model_name == "tiny-model"
    with pytest.raises(InputError):
        make_model("openai:http://x", 0)
    with pytest.raises(InputError):
        make_model("claude", 0)
