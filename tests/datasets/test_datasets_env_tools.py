"""A rollout's tools are exported as its environment declares them, not inferred with an empty description."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from evoharness.agent.runner import run_rollout
from evoharness.datasets.env_tools import EnvTools
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.envs import get_environment
from evoharness.harness_repo.init import init_harness

from .helpers import make_traj, read_jsonl


@pytest.mark.parametrize("env_spec", ["tau2:airline", "synthetic"])
def test_a_rollouts_tools_carry_the_environments_descriptions_and_parameters(tmp_path, env_spec):
    """A rollout records its env (meta.env), not the tools it was offered: each called tool was exported inferred,
    "description": "" and parameters typed from the argument values, where tau2's tools have their docstrings."""
    init_harness(tmp_path / "h")
    env = get_environment(env_spec)
    task = env.list_tasks("dev")[1]  # airline_0 needs no tool
    traj = run_rollout(tmp_path / "h", env_spec, task.id, "standin:strong", 0)
    offered = {t["function"]["name"]: t["function"] for t in env.tools(task)}
    export_dataset(tmp_path / "out", source=SourceKind.all, trajectories=[traj])
    (record,) = read_jsonl(tmp_path / "out" / "data.jsonl")
    called = {c["function"]["name"] for m in record["messages"] for c in m.get("tool_calls") or []}
    assert called and {t["function"]["name"] for t in record["tools"]} == called
    for tool in record["tools"]:
        fn = tool["function"]
        assert fn["description"] and fn["description"] == offered[fn["name"]]["description"], fn
        assert fn["parameters"] == offered[fn["name"]]["parameters"]


def test_a_trajectory_of_no_env_another_version_or_an_unknown_env_keeps_inferred_tools():
    plain = make_traj("p", tools_meta=False)
    assert EnvTools().of(plain) == {}
    # a task the env has (contact_0; "contact-0" is none, so its {} said nothing of the version): only the version
    # differs between these two
    older = make_traj("o", task="contact_0", tools_meta=False)
    older.meta.update(env="synthetic", env_version="0")
    assert EnvTools().of(older) == {}
    older.meta.update(env_version=get_environment("synthetic").version)
    assert EnvTools().of(older)
    unknown = make_traj("u", tools_meta=False)
    unknown.meta.update(env="nosuchenv:x")
    assert EnvTools().of(unknown) == {}
    no_task = make_traj("n", task="no-such-task", tools_meta=False)
    no_task.meta.update(env="synthetic", env_version="1")
    assert EnvTools().of(no_task) == {}


def test_tasks_the_env_does_not_have_are_logged_once_per_env():
    tools = EnvTools()
    with capture_logs() as logs:
        for i in range(5):
            traj = make_traj(f"u{i}", task=f"task-{i}", tools_meta=False)
            assert dict(tools.of(traj)) == {}  # the calls' inference, as before
    unknown = [e for e in logs if e["event"] == "export.env_tools_unknown_task"]
    assert [(e["env"], e["task_id"]) for e in unknown] == [("synthetic", "task-0")]


def _of_env(tid: str, spec: str):
    traj = make_traj(tid, task="contact_0", tools_meta=False, tool="lookup_contact")
    traj.meta.update(env=spec, env_version=get_environment("synthetic").version)
    return traj


def test_an_export_builds_at_most_max_envs_environments_and_counts_the_records_past_them(tmp_path, monkeypatch):
    """meta.env of an ingested trajectory is the client's: 40 distinct specs built 40 environments, kept for the
    whole export. Now the first MAX_ENVS are built; the rest keep inferred tools, counted, and every record is
    written."""
    from evoharness.datasets.env_tools import MAX_ENVS
    from evoharness.envs import synthetic

    trajs = [_of_env(f"t{i}", f"synthetic:{i}") for i in range(40)]
    built = []
    real_init = synthetic.SyntheticEnv.__init__
    monkeypatch.setattr(synthetic.SyntheticEnv, "__init__", lambda self: (built.append(1), real_init(self))[1])
    summary = export_dataset(tmp_path / "out", source=SourceKind.all, trajectories=trajs)
    assert len(built) == MAX_ENVS
    assert summary.records == 40 and summary.env_tools_past_limit == 40 - MAX_ENVS
    descriptions = [r["tools"][0]["function"]["description"] for r in read_jsonl(tmp_path / "out" / "data.jsonl")]
    assert all(descriptions[:MAX_ENVS]) and not any(descriptions[MAX_ENVS:])
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"{40 - MAX_ENVS} records name an environment past the {MAX_ENVS}" in card


def test_specs_of_no_registered_environment_are_not_built_nor_counted_against_the_limit():
    tools = EnvTools(limit=1)
    for i in range(5):
        assert tools.of(_of_env(f"u{i}", f"nosuchenv:{i}")) == {}
    assert tools.of(_of_env("s", "synthetic")) and tools.past_limit == 0
    assert tools.of(_of_env("s2", "synthetic:other")) == {} and tools.past_limit == 1


def test_only_a_record_calling_an_undeclared_tool_builds_its_env_or_is_counted_past_the_limit(tmp_path):
    """The env was built before the record was made: records whose called tools the trajectory declares, and records
    skipped (a system message mid-conversation), took the MAX_ENVS builds and were counted past the limit, 'their
    undeclared tools inferred', when they had none; a record that needed its env's declarations then had none."""
    from evoharness.datasets.env_tools import MAX_ENVS

    declared = [make_traj(f"d{i}", task="contact_0", tool="lookup_contact") for i in range(MAX_ENVS)]
    for i, traj in enumerate(declared):
        traj.meta["env"] = f"synthetic:{i}"
    skipped = _of_env("skipped", "synthetic:skipped")
    skipped.messages.insert(2, {"role": "system", "content": "a system message after the conversation started"})
    needs = _of_env("needs", "synthetic:needs")
    summary = export_dataset(tmp_path / "out", source=SourceKind.all, trajectories=[*declared, skipped, needs])
    assert summary.skipped == {"system_message_mid_conversation": 1}
    assert summary.records == MAX_ENVS + 1 and summary.env_tools_past_limit == 0
    tools = {r["messages"][1]["content"].split()[0]: r["tools"] for r in read_jsonl(tmp_path / "out" / "data.jsonl")}
    assert tools["needs"][0]["function"]["description"]  # its env's declaration, not an inferred ""
    assert "past the" not in (tmp_path / "out" / "README.md").read_text()
