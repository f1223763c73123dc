"""RayExecutor: the same trajectories as LocalExecutor, failed trajectories for broken harnesses, clean infra errors.

One local Ray (2 CPUs) is started for the module and shut down after it (start-up costs seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from evoharness.errors import InfraError
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.config import SandboxConfig
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.sandbox.ray_executor import RayExecutor
from evoharness.traces.models import Termination

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'evoharness[ray]')")

pytestmark = pytest.mark.slow

LIMITS = Limits(wall_seconds=60, cpu_seconds=60)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # on loopback only (tests/conftest.py allows no other address)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


def _commit(path: Path, message: str) -> str:
    g = git.Repo(path)
    g.git.add("-A")
    g.git.commit("-qm", message, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                      "GIT_COMMITTER_EMAIL": "t@t"})
    return g.head.commit.hexsha


def _requests(commit: str, n_tasks: int = 3, seeds: tuple[int, ...] = (0, 1)) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:n_tasks]
    return [RolloutRequest(task_id=t, harness_commit=commit, seed=s, rollout=s) for t in tasks for s in seeds]


def _comparable(traj) -> dict:
    """Everything but timing and where it ran."""
    d = traj.model_dump(mode="json")
    d["usage"].pop("wall_seconds")
    for key in ("sandbox", "executor"):
        d["meta"].pop(key, None)
    d["meta"].get("gateway", {}).pop("upstream_seconds", None)  # the host-side stand-in's time
    failure = d["meta"].get("rollout_failure")
    if failure:
        failure.pop("backend", None)
    return d


def _ray(path: Path, batch_size: int = 1, **kw) -> RayExecutor:
    return RayExecutor(path, "synthetic", "scripted:weak", cfg=SandboxConfig(backend="bwrap", limits=LIMITS),
                       batch_size=batch_size, **kw)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_ray_and_local_runs_give_the_same_trajectories(tmp_path, batch_size):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(repo.main_head())
    local = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=2,
                          limits=LIMITS).run(reqs)
    seen: list[int] = []
    with _ray(repo.path, batch_size, on_result=lambda i, _t: seen.append(i)) as ex:
        on_ray = ex.run(reqs)
    assert sorted(seen) == list(range(len(reqs)))
    assert [t.task_id for t in on_ray] == [r.task_id for r in reqs]
    assert all(t.meta["executor"]["kind"] == "ray" for t in on_ray)
    assert all(t.harness_commit == repo.main_head() for t in on_ray)
    assert [_comparable(t) for t in on_ray] == [_comparable(t) for t in local]
    # the weak model fails some of these: the comparison covers failures, not only successes
    assert {t.score for t in local} == {0.0, 1.0}


def test_a_crashing_harness_gives_failed_trajectories_on_ray_and_other_commits_still_run(tmp_path):
    repo = init_harness(tmp_path / "h")
    good = repo.main_head()
    (repo.path / "middleware" / "die.py").write_text("import os\nos._exit(7)\n")  # kills the worker process
    crash = _commit(repo.path, "crash")
    reqs = _requests(good, n_tasks=2, seeds=(0,)) + _requests(crash, n_tasks=2, seeds=(0,))
    with _ray(repo.path) as ex:
        trajs = ex.run(reqs)
    ok, broken = trajs[:2], trajs[2:]
    assert all(t.meta.get("rollout_failure") is None and t.harness_commit == good for t in ok)
    for t in broken:
        assert t.harness_commit == crash
        assert t.termination == Termination.error and t.final_answer is None and t.score == 0.0
        assert t.events[0].detail == "worker failed: exit 7"


def test_a_hanging_harness_times_out_on_ray(tmp_path):
    repo = init_harness(tmp_path / "h")
    (repo.path / "middleware" / "spin.py").write_text("while True:\n    pass\n")
    spin = _commit(repo.path, "spin")
    ex = RayExecutor(repo.path, "synthetic", "scripted:weak",
                     cfg=SandboxConfig(backend="bwrap", limits=Limits(wall_seconds=2, cpu_seconds=30)))
    with ex:
        (t,) = ex.run(_requests(spin, n_tasks=1, seeds=(0,)))
    assert t.termination == Termination.timeout and t.score == 0.0
    assert "wall-time limit hit" in t.events[0].detail


def test_a_rollout_whose_ray_worker_dies_is_a_failed_trajectory(tmp_path):
    """No sandbox between them ('none'): the rollout's worker kills its parent, the Ray worker process."""
    repo = init_harness(tmp_path / "h")
    (repo.path / "kill.py").write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    sha = _commit(repo.path, "kill")
    ex = RayExecutor(repo.path, "synthetic", "scripted:weak", cfg=SandboxConfig(backend="none", limits=LIMITS),
                     worker=[sys.executable, "{harness}/kill.py"])
    with ex:
        (t,) = ex.run(_requests(sha, n_tasks=1, seeds=(0,)))
    assert t.termination == Termination.error and t.score == 0.0 and t.harness_commit == sha
    assert t.events[0].detail.startswith("ray task lost: WorkerCrashedError")


def test_a_plain_directory_harness_reaches_the_nodes(tmp_path):
    """Not a git repo: the directory as it is travels as the tree; the commit is None, as locally."""
    repo = init_harness(tmp_path / "h")
    plain = tmp_path / "plain"
    git.Repo(repo.path).git.archive("HEAD", "-o", str(tmp_path / "h.tar"))
    plain.mkdir()
    subprocess.run(["tar", "-xf", str(tmp_path / "h.tar"), "-C", str(plain)], check=True)
    tmp_path.chmod(0o755)
    reqs = _requests("HEAD", n_tasks=2, seeds=(0,))
    local = LocalExecutor(plain, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), limits=LIMITS).run(reqs)
    with _ray(plain) as ex:
        on_ray = ex.run(reqs)
    assert [t.harness_commit for t in on_ray] == [None, None]
    assert [_comparable(t) for t in on_ray] == [_comparable(t) for t in local]


def test_ray_not_installed_is_an_infra_error(tmp_path, monkeypatch):
    repo = init_harness(tmp_path / "h")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(InfraError, match="needs ray"):
        _ray(repo.path).run(_requests(repo.main_head(), n_tasks=1, seeds=(0,)))


def test_cli_with_an_unreachable_ray_address_fails_with_one_line(tmp_path):
    """A fresh process (not connected to the module's Ray): the address is probed and refused in seconds."""
    repo = init_harness(tmp_path / "h")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"EVOHARNESS_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "evoharness", "--set", "sandbox.ray_address=127.0.0.1:9",
                           "rollout", "--harness", str(repo.path), "--env", "synthetic", "--out",
                           str(tmp_path / "o.jsonl"), "--tasks", "1", "--executor", "ray"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: cannot connect to Ray at 127.0.0.1:9: Connection refused"]
    assert not (tmp_path / "o.jsonl").exists()


def test_cli_rejects_an_unknown_executor(tmp_path, capsys):
    from evoharness.cli import main

    repo = init_harness(tmp_path / "h")
    rc = main(["rollout", "--harness", str(repo.path), "--env", "synthetic", "--out", str(tmp_path / "o.jsonl"),
               "--executor", "slurm"])
    assert rc == 2
    assert capsys.readouterr().err.strip() == "error: --executor must be local or ray, not 'slurm'"


def test_make_executor_builds_either_executor_from_the_settings(tmp_path):
    from evoharness.config import Settings
    from evoharness.sandbox.factory import make_executor

    repo = init_harness(tmp_path / "h")
    settings = Settings(sandbox={"executor": "ray", "batch_size": 3, "limits": {"wall_seconds": 60}})
    with make_executor(settings.sandbox, repo.path, "synthetic", "scripted:weak") as ex:
        assert isinstance(ex, RayExecutor) and ex.batch_size == 3 and ex.cfg.limits.wall_seconds == 60
        trajs = ex.run(_requests(repo.main_head(), n_tasks=2, seeds=(0,)))
    assert [t.meta["executor"]["kind"] for t in trajs] == ["ray", "ray"]
    assert all(t.meta.get("rollout_failure") is None for t in trajs)
    with make_executor(settings.sandbox, repo.path, "synthetic", "scripted:weak", executor="local",
                       workers=3) as local:
        assert isinstance(local, LocalExecutor) and (local.workers, local.batch_size) == (3, 3)
        assert local.limits.wall_seconds == 60


def test_a_command_agent_harness_runs_on_ray_as_it_does_locally(tmp_path):
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples" / "command-agent"
    repo = init_harness(tmp_path / "h")
    for name in ("agent.py", "harness.toml"):
        shutil.copy(example / name, repo.path / name)
    sha = _commit(repo.path, "command agent")
    reqs = [RolloutRequest(task_id=t, harness_commit=sha) for t in ("contact_1", "message_2")]
    local = LocalExecutor(repo.path, "synthetic", "scripted:oracle", sandbox=BwrapSandbox(), limits=LIMITS).run(reqs)
    with RayExecutor(repo.path, "synthetic", "scripted:oracle", cfg=SandboxConfig(limits=LIMITS), batch_size=2) as ex:
        on_ray = ex.run(reqs)
    assert [t.score for t in on_ray] == [1.0, 1.0]
    assert all(t.meta["output_format"] == "openai_messages" for t in on_ray)
    assert [_comparable(t) for t in on_ray] == [_comparable(t) for t in local]
