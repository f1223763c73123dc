"""A SWE-agent ``.traj`` with ``trajectory`` steps but no ``history`` gets its task from where SWE-agent keeps it.

SWE-agent 0.x steps are ``action, observation, response, state, thought`` (no ``query``); 1.x steps before
``query`` are the same plus ``execution_time``. The task message is then only in ``history`` -- dropped by a writer
that kept the steps -- so the problem statement is read from ``replay_config`` (1.x: ``problem_statement.text``),
the run-batch ``<id>.config.yaml`` beside the file (1.x), or the ``args.yaml`` of the 0.x run directory
(``environment.data_path`` ``text://...``); else the import says, once per directory, that they have no task.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evoharness.cli import main
from evoharness.traces.importers import ImportWarnings, detect_format, load_paths

from .test_traces_swe_agent import RUN, _run

TASK = "Parsing a timezone-aware timestamp drops the offset; keep it."


def _steps_only(version: str = "0.x") -> dict:
    """A run as a writer that kept only the steps leaves it: no ``history``, steps with no ``query``."""
    data = _run("thought_action")
    del data["history"]
    for step in data["trajectory"]:
        for key in ("query", "extra_info") + (("execution_time",) if version == "0.x" else ()):
            step.pop(key, None)
    if version == "0.x":
        del data["replay_config"]
        data["environment"] = "swe_main"
        data["info"].pop("swe_agent_version")
    return data


def _write(directory: Path, data: dict, name: str = RUN) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.traj"
    path.write_text(json.dumps(data))
    return path


def _task_message(t) -> str:
    assert [m["role"] for m in t.messages[:3]] == ["user", "assistant", "tool"], t.messages[:3]
    return t.messages[0]["content"]


def test_a_0x_run_reads_its_task_from_the_text_data_path_of_its_args_yaml(tmp_path):
    run = tmp_path / "trajectories" / "me" / "gpt4__text__default__t-0.00"
    path = _write(run, _steps_only())
    (run / "args.yaml").write_text(yaml.safe_dump({"environment": {"data_path": f"text://{TASK}",
                                                                   "image_name": "sweagent/swe-agent:latest"},
                                                   "agent": {"model": {"model_name": "gpt4"}}}))
    assert detect_format(path) == "swe-agent"
    [t] = list(load_paths([path]))
    assert t.task == TASK == _task_message(t) and t.meta["task_from"] == "args.yaml"
    assert len(t.tool_calls()) == len(json.loads(path.read_text())["trajectory"])


def test_a_1x_run_reads_its_task_from_the_problem_statement_of_its_replay_config(tmp_path):
    data = _steps_only("1.x")
    data["replay_config"] = json.dumps({"agent": {"model": {"name": "m"}},
                                        "problem_statement": {"type": "text", "text": TASK, "id": RUN}})
    [t] = list(load_paths([_write(tmp_path, data)]))
    assert t.task == TASK == _task_message(t) and t.meta["task_from"] == "replay_config"
    assert t.model == "m"


def test_a_1x_run_batch_folder_reads_its_task_from_the_instance_config_yaml(tmp_path):
    """run-batch writes ``<id>/<id>.traj`` and ``<id>/<id>.config.yaml`` (the run's config, YAML holding a JSON
    string)."""
    folder = tmp_path / RUN
    path = _write(folder, _steps_only("1.x"))
    config = {"agent": {}, "problem_statement": {"type": "text", "text": TASK, "id": RUN}, "env": {}}
    (folder / f"{RUN}.config.yaml").write_text(yaml.dump(json.dumps(config), indent=2))
    [t] = list(load_paths([path]))
    assert t.task == TASK == _task_message(t) and t.meta["task_from"] == f"{RUN}.config.yaml"


def test_a_run_whose_problem_statement_is_nowhere_is_imported_with_one_warning_per_directory(tmp_path, capsys):
    data = _steps_only("1.x")
    data["replay_config"] = json.dumps({"problem_statement": {"type": "github", "id": "o__r-i1",
                                                              "github_url": "https://github.com/o/r/issues/1"}})
    _write(tmp_path / "run", data)
    _write(tmp_path / "run", _steps_only(), name="other__other-1")
    (tmp_path / "run" / "args.yaml").write_text("environment:\n  data_path: princeton-nlp/SWE-bench_Lite\n")
    warnings = ImportWarnings()
    trajs = list(load_paths([tmp_path / "run"], warnings=warnings))
    assert [t.task for t in trajs] == [None, None] and all(t.messages[0]["role"] == "assistant" for t in trajs)
    [line] = warnings.lines()
    assert line.startswith(f"warning: {tmp_path / 'run'}: ") and "no task message" in line
    assert line.endswith("(2 trajectories)")
    assert main(["import", str(tmp_path / "run"), "--out", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "no task message" in err[0]


def test_an_unreadable_args_yaml_is_the_same_warning_not_a_traceback(tmp_path):
    run = tmp_path / "run"
    path = _write(run, _steps_only())
    (run / "args.yaml").write_text("environment: [unclosed\n")
    warnings = ImportWarnings()
    [t] = list(load_paths([path], warnings=warnings))
    assert t.task is None and "no task message" in warnings.lines()[0]


def test_a_run_with_history_or_a_query_keeps_its_task_from_them(tmp_path):
    """The other shapes are read as before: the args.yaml beside them is not read."""
    (tmp_path / "args.yaml").write_text(yaml.safe_dump({"environment": {"data_path": "text://another task"}}))
    [whole] = list(load_paths([_write(tmp_path / "a", _run())]))
    (tmp_path / "a" / "args.yaml").write_text(yaml.safe_dump({"environment": {"data_path": "text://another"}}))
    [again] = list(load_paths([tmp_path / "a" / f"{RUN}.traj"]))
    assert again.task == whole.task and again.task.startswith("<pr_description>") and "task_from" not in again.meta


def test_swe_agent_s_own_trajectory_without_its_history_names_no_task_it_cannot_read(tmp_path):
    """SWE-agent's test trajectory (tests/fixtures/traces/swe_agent_real, 1.x, steps without ``query``) with its
    history dropped: its problem statement is a GitHub issue (``replay_config``), not fetched: one warning."""
    real = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "swe_agent_real" / "test-repo" / "trajs"
    [src] = real.glob("*.traj")
    data = json.loads(src.read_text())
    assert not any("query" in step for step in data["trajectory"])
    del data["history"]
    path = _write(tmp_path, data, name=src.stem)
    warnings = ImportWarnings()
    [t] = list(load_paths([path], warnings=warnings))
    assert t.task is None and t.messages[0]["role"] == "assistant" and "task_from" not in t.meta
    assert warnings.lines() == [f"warning: {tmp_path}: {t.meta['import_warnings'][0]['reason']} (1 trajectory)"]


def test_a_directory_of_steps_only_runs_reads_its_args_yaml_once(tmp_path, monkeypatch):
    """Every .traj with steps but no history read the args.yaml beside it: a directory of N of them parsed the
    same file N times. It is read once, and again once rewritten."""
    import os

    from evoharness.traces.importers import swe_agent

    reads: list[str] = []
    real = swe_agent._yaml_beside

    def counted(path):
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(swe_agent, "_yaml_beside", counted)
    run = tmp_path / "trajectories" / "me" / "gpt4__text__default__t-0.00"
    for i in range(6):
        _write(run, _steps_only(), name=f"o__r-{i}")
    args = run / "args.yaml"

    def settled(task: str) -> None:  # written a while ago: a file changed within dirscan.SETTLED_NS is read again
        args.write_text(yaml.safe_dump({"environment": {"data_path": f"text://{task}"}}))
        old = args.stat().st_mtime_ns - 3600 * 10**9
        os.utime(args, ns=(old, old))

    settled(TASK)
    trajs = list(load_paths([run]))
    assert len(trajs) == 6 and {t.task for t in trajs} == {TASK}
    assert reads.count("args.yaml") == 1, reads
    settled("Another task, longer than the first one.")
    assert {t.task for t in load_paths([run])} == {"Another task, longer than the first one."}
    assert reads.count("args.yaml") == 2, reads
