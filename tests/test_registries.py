"""Every registry (name -> entry, no default branch): each entry complete, unknown names one clear error."""

from __future__ import annotations

import inspect

import pytest

from evoharness.datasets.export_formats import EXPORT_FORMATS
from evoharness.datasets.models import ExportFormat
from evoharness.diagnosis.catalogue import DETECTORS, default_catalogue
from evoharness.diagnosis.models import FailureClass
from evoharness.envs.registry import ENVIRONMENTS
from evoharness.errors import InputError
from evoharness.model_specs import MODELS, agent_model, role_model
from evoharness.roles.config import RolesConfig
from evoharness.traces import importers
from evoharness.verification.gates import GATES, default_gates
from evoharness.verification.selection import STRATEGIES, BehaviourAware, make_strategy


def test_registry_lookup_of_an_unknown_name_lists_the_valid_ones():
    for registry in (ENVIRONMENTS, EXPORT_FORMATS, STRATEGIES):
        with pytest.raises(InputError, match=f"unknown {registry.kind} 'nope' \\(valid: {registry.names()[0]}"):
            registry.get("nope")
    with pytest.raises(ValueError, match="already registered"):
        STRATEGIES.register("coreset", lambda control_ratio=0.5: None)


@pytest.mark.parametrize("name", ENVIRONMENTS.names())
def test_environment_entries_are_complete(name):
    entry = ENVIRONMENTS.get(name)
    assert entry.grammar.startswith(name) and entry.summary and entry.example.partition(":")[0] == name
    if name == "synthetic":  # the others need their optional packages; the env tests build them
        env = entry.build(entry.example)
        assert env.list_tasks("dev") and callable(env.reset)
    assert entry.user_model(entry.example) is None  # the example's user (if any) is scripted


@pytest.mark.parametrize("name", EXPORT_FORMATS.names())
def test_export_format_entries_are_complete(name, tmp_path):
    entry = EXPORT_FORMATS.get(name)
    assert ExportFormat(name).value == name  # the enum pydantic and the API use is the registry's names
    assert entry.card and entry.data_file
    if name == "hf":
        pytest.importorskip("datasets")
    writer = entry.writer(tmp_path)  # what the writer writes, the validator reads back as valid
    record = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}], "tools": []}
    writer.write(record, {"id": "t1", "task_id": "t"}, {})  # as the export calls it: the parsed arguments too
    assert entry.data_file in writer.close()
    assert entry.validate(tmp_path / entry.data_file) == (1, [])
    (tmp_path / "failed").mkdir()
    failed = entry.writer(tmp_path / "failed")  # a failed export aborts its writer (datasets/formats.Exporter)
    failed.write(record, {"id": "t1", "task_id": "t"}, {})
    failed.abort()


@pytest.mark.parametrize("name", STRATEGIES.names())
def test_strategy_entries_declare_their_gates(name):
    strategy = make_strategy(name)
    assert strategy.name == name and isinstance(strategy.fresh_baseline, bool)
    assert strategy.gates and set(strategy.gates) <= set(GATES)
    assert [g.name for g in default_gates(name)] == list(strategy.gates)


def test_a_subclassed_strategy_keeps_the_attribution_gate():
    class Tweaked(BehaviourAware):
        name = "tweaked"

    assert "attribution" in [g.name for g in default_gates(Tweaked())]


@pytest.mark.parametrize("name", DETECTORS.names())
def test_detector_entries_are_complete(name):
    detector = DETECTORS.get(name)()
    cls, _, short = name.partition(".")
    assert detector.id == name and short  # registered under the id it reports
    assert FailureClass(cls) == detector.failure_class
    assert detector.detect.__code__.co_varnames[1:3] == ("view", "cfg")
    assert DETECTORS.get(name)() is not detector  # a fresh detector per catalogue


def test_the_catalogue_is_the_registry():
    assert [d.id for d in default_catalogue()] == DETECTORS.names()
    with pytest.raises(InputError, match="targets: unknown detector 'F9.nope'"):
        DETECTORS.get("F9.nope")
    with pytest.raises(ValueError, match="already registered"):
        DETECTORS.register("F2.tool_error", DETECTORS.get("F2.tool_error"))


@pytest.mark.parametrize("name", list(importers.FORMATS))
def test_importer_entries_are_complete(name):
    module = importers.FORMATS[name]
    assert "skip_invalid" in inspect.signature(module.load).parameters
    assert f"``{name}``" in importers.__doc__  # documented in the package docstring
    if name == "agentrx":  # detected on the whole file (a bare list of messages), not per record
        assert callable(module.is_message_list)
    else:
        assert name in importers.RECORD_DETECTION and callable(module.matches)


@pytest.mark.parametrize("scheme", MODELS.names())
def test_model_schemes_are_complete(scheme):
    entry = MODELS.get(scheme)
    assert entry.grammar.startswith(scheme + ":") and entry.summary and (entry.agent or entry.role)
    assert bool(entry.agent_forms) == bool(entry.agent) and bool(entry.role_forms) == bool(entry.role)


def test_one_model_spec_grammar_for_agent_and_roles():
    cfg = RolesConfig()
    agent = agent_model("openai:http://127.0.0.1:9/v1#tiny", 0)  # constructed, no request made
    role = role_model("openai:http://127.0.0.1:9/v1#tiny", cfg)
    assert agent.llm.model_name == role.model == "tiny"
    assert role.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(InputError, match="is an agent model"):
        role_model("standin:weak", cfg)
    with pytest.raises(InputError, match="unknown model spec 'claude'.*openai:URL#model"):
        agent_model("claude", 0)
