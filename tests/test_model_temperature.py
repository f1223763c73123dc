"""An openai: agent model's sampling temperature (fix, fourth session): it was 0 in every request, with no way to
change it. `run.temperature` / `--temperature` (rollout, verify, evaluate) or `openai:URL#model?temperature=T`;
the default request is unchanged. Checked on the request bodies the clients send (no network model: an httpx
mock transport, and the loopback fake upstream behind the gateway)."""

from __future__ import annotations

import json

import httpx
import pytest

from evoharness.agent.messages import HumanMessage
from evoharness.agent.models import openai_model
from evoharness.cli import main
from evoharness.errors import InputError
from evoharness.model_specs import model_name, split_temperature, with_temperature
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.base import ProcessSandbox
from evoharness.sandbox.config import GatewayConfig
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from tests.sandbox.gateway_fakes import completion, plain_harness

SPEC = "openai:http://127.0.0.1:9/v1#m"


@pytest.mark.parametrize(("spec", "t", "out"), [
    (SPEC, None, SPEC),
    (SPEC, 0.0, SPEC),  # the default adds nothing: specs, trajectories and cache keys as before
    (SPEC, 0.7, SPEC + "?temperature=0.7"),
    (SPEC, 2, SPEC + "?temperature=2.0"),
    (SPEC + "?temperature=0.7", 0.7, SPEC + "?temperature=0.7"),
    (SPEC + "?temperature=0.7", None, SPEC + "?temperature=0.7"),
    ("standin:weak", 0, "standin:weak"),
    ("standin:weak", None, "standin:weak"),
])
def test_with_temperature(spec, t, out):
    assert with_temperature(spec, t) == out
    assert model_name(out) == ("m" if spec.startswith("openai:") else spec)


@pytest.mark.parametrize(("spec", "t", "reason"), [
    (SPEC, 2.5, "--temperature: must be 0 to 2, not 2.5"),
    (SPEC, -0.1, "--temperature: must be 0 to 2, not -0.1"),
    (SPEC, float("nan"), "--temperature: must be 0 to 2, not nan"),
    ("standin:weak", 0.7, "--temperature: 0.7 is for an openai:URL#model agent model; 'standin:weak' does not "
                          "sample (give it 0, or no temperature)"),
    (SPEC + "?temperature=0.5", 0.7, f"--temperature: 0.7, but the model spec '{SPEC}?temperature=0.5' says 0.5"),
    (SPEC + "?temperature=hot", None, f"model: '{SPEC}?temperature=hot': temperature must be a number from 0 to 2, "
                                      "not 'hot'"),
    ("standin:weak?temperature=1", None, "model: 'standin:weak?temperature=1': a temperature is for an "
                                         "openai:URL#model agent spec"),
])
def test_a_temperature_the_model_cannot_take_is_input_error(spec, t, reason):
    with pytest.raises(InputError) as e:
        with_temperature(spec, t)
    assert str(e.value) == reason


def _body_sent(spec: str) -> dict:
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=completion("hi"))

    model = openai_model(spec, 3, http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert model.invoke([HumanMessage("hello")]).content == "hi"
    (body,) = sent
    return body


def test_the_in_process_client_sends_the_temperature():
    body = _body_sent(SPEC + "?temperature=0.7")
    assert (body["model"], body["temperature"], body["seed"]) == ("m", 0.7, 3)
    assert _body_sent(SPEC)["temperature"] == 0.0  # the default request is unchanged


def test_the_gateway_sets_the_specs_temperature_on_a_sandboxed_agents_requests(tmp_path, upstream):
    """The sandboxed worker's client sends 0 (it sees gateway:SOCKET#m only); the host's gateway pins T."""
    upstream.queue((200, completion("no idea")))
    spec = f"openai:{upstream.url}#fake-model?temperature=0.7"
    gateway = GatewayConfig(retries=0, timeout_s=10, connect_timeout_s=2)
    with LocalExecutor(plain_harness(tmp_path), "synthetic", spec, sandbox=ProcessSandbox(),
                       limits=Limits(wall_seconds=60, memory_mb=2048, pids=32), gateway=gateway) as ex:
        [traj] = ex.run([RolloutRequest(task_id="contact_0", harness_commit="HEAD")])
    assert [(r["body"]["model"], r["body"]["temperature"]) for r in upstream.requests] == [("fake-model", 0.7)]
    assert traj.model == spec  # the rollout's identity (trajectory, rollout cache) names the temperature


@pytest.mark.parametrize(("args", "line"), [
    (["--temperature", "0.5"], "error: --temperature: 0.5 is for an openai:URL#model agent model; 'standin:weak' "
                               "does not sample (give it 0, or no temperature)"),
    (["--temperature", "3", "--model", SPEC], "error: --temperature: must be 0 to 2, not 3"),
])
def test_rollout_temperature_errors_are_one_line_before_any_work(args, line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "h"]) == 0
    capsys.readouterr()
    assert main(["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", *args]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert not (tmp_path / "r.jsonl").exists()


def test_run_temperature_is_a_setting_with_its_range(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--set", "run.temperature=5", "run"]) == 2
    assert capsys.readouterr().err == "error: settings: run.temperature: Input should be less than or equal to 2\n"
    assert main(["--set", "run.temperature=0.5", "--set", "run.model=standin:weak", "run"]) == 2
    assert capsys.readouterr().err.startswith("error: run.temperature: 0.5 is for an openai:URL#model agent model")
    assert list(tmp_path.iterdir()) == []  # no run, harness or home started
    assert split_temperature(SPEC) == (SPEC, None)


def test_evaluate_and_verify_resolve_an_openai_url_before_its_temperature(upstream):
    """`evaluate`/`verify --model openai:URL --temperature T` (no #model, as `rollout --model` takes) was refused as
    a model that "does not sample"; now the server's one model is named first, as `rollout` and `run` do."""
    from types import SimpleNamespace

    from evoharness.cli_support import agent_spec

    url = f"openai:{upstream.url}"
    run = SimpleNamespace(run=SimpleNamespace(model=url, temperature=None))
    assert agent_spec(run, url, 0.5) == f"{url}#fake?temperature=0.5"
    assert agent_spec(run, None, 0.5) == f"{url}#fake?temperature=0.5"
    run.run.temperature = 0.25
    assert agent_spec(run, None, None) == f"{url}#fake?temperature=0.25"
    assert agent_spec(run, url, None) == url  # no temperature: resolved later, where it was
    assert agent_spec(run, "standin:weak", 0) == "standin:weak"
    with pytest.raises(InputError, match="run.temperature: 0.25 is for an openai:URL#model agent model"):
        agent_spec(SimpleNamespace(run=SimpleNamespace(model="standin:weak", temperature=0.25)), None, None)
