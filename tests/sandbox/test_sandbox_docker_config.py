"""The Docker backend's wiring and its errors when the engine is unusable (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.errors import InfraError, InputError
from evoharness.sandbox.config import SandboxConfig
from evoharness.sandbox.docker import DockerSandbox
from evoharness.sandbox.factory import make_sandbox
from evoharness.sandbox.models import Limits


def test_make_sandbox_builds_the_configured_docker_backend():
    cfg = SandboxConfig.model_validate({"backend": "docker", "docker": {"pool_size": 3, "image": "x:y"},
                                        "ro_paths": [str(Path(__file__).parent)]})
    box = make_sandbox(cfg.backend, cfg)
    assert isinstance(box, DockerSandbox) and box.pool_size == 3 and box.image == "x:y"
    assert Path(__file__).parent.resolve() in box.ro_paths
    assert box.view(Path("/x"), Path("/y")) == ("/harness", "/scratch")


def test_unknown_backend_is_bad_input_and_names_docker():
    with pytest.raises(InputError, match="bwrap | docker | none | inprocess"):
        make_sandbox("podman")


def test_an_unreachable_engine_is_an_infrastructure_error(tmp_path):
    import docker

    client = docker.DockerClient(base_url=f"unix://{tmp_path}/no-docker.sock", version="1.41")
    box = DockerSandbox(client=client)
    with pytest.raises(InfraError, match="Docker engine is unreachable") as e:
        box.run(["true"], harness_dir=tmp_path, workdir=tmp_path, env={}, limits=Limits())
    assert e.value.retryable is False


class _SlowEngine:
    """A container whose wait times out (an engine too slow to answer: the first wait, the second too unless
    ``answers_after_kill``) and whose inspect may fail."""

    def __init__(self, answers_after_kill: bool, reload_error: Exception | None) -> None:
        self.id, self.attrs, self.reload_error, self.killed, self.removed = "c" * 64, {}, reload_error, 0, 0
        self.answers_after_kill = answers_after_kill

    def start(self) -> None:
        pass

    def wait(self, timeout: float) -> dict:
        import requests

        if self.killed and self.answers_after_kill:
            return {"StatusCode": 137}
        raise requests.exceptions.ReadTimeout("read timed out")

    def kill(self) -> None:
        self.killed += 1

    def reload(self) -> None:
        if self.reload_error is not None:
            raise self.reload_error

    def remove(self, force: bool) -> None:
        self.removed += 1


@pytest.mark.parametrize("case", ["second wait times out", "inspect refused", "inspect unreachable"])
def test_a_cold_run_whose_engine_stops_answering_is_recorded_as_the_wall_limit(tmp_path, case):
    """Past the wall the container is killed and waited on again; that second wait timing out too, or the inspect
    after it failing, raised out of run() instead of recording the rollout's failure. An inspect that fails leaves a
    memory hit before the wall unknown, and the reason says so (it said nothing of it)."""
    import docker
    import requests

    error = {"second wait times out": None, "inspect refused": docker.errors.APIError("inspect failed"),
             "inspect unreachable": requests.exceptions.ConnectionError("engine gone")}[case]
    container = _SlowEngine(case != "second wait times out", error)

    class Client:
        class containers:  # noqa: N801 -- docker's attribute name
            @staticmethod
            def create(*a, **kw):
                return container

    box = DockerSandbox(client=Client())
    box._checked = True
    harness, work = tmp_path / "h", tmp_path / "w"
    harness.mkdir()
    work.mkdir()
    r = box.run(["true"], harness_dir=harness, workdir=work, env={}, limits=Limits(wall_seconds=0.5))
    assert r.timed_out and r.limit == "wall" and r.returncode == 137, r
    assert container.killed == 1 and container.removed == 1
    assert r.memory_unknown is (error is not None), r
    assert r.reason().endswith("(whether the memory limit was hit is unknown)") is (error is not None), r.reason()


@pytest.mark.parametrize("exit_status", [0, 137])
def test_a_pooled_run_whose_inspect_fails_is_recorded_and_its_slot_not_reused(tmp_path, monkeypatch, exit_status):
    """Where the cgroup's OOM counter cannot be read, the pool asks the engine (container.reload); that failing
    raised out of run() instead of recording the rollout. Recorded, the OOM kill is unknown: a rollout SIGKILLed (137,
    the OOM killer's signal) read as a plain 'exit 137', nothing said of it; not claimed as memory either (the command
    may have been killed otherwise), its reason says it is unknown."""
    import docker

    import evoharness.sandbox.docker_pool as pool_mod

    container = _SlowEngine(True, docker.errors.APIError("inspect failed"))
    box = DockerSandbox(client=object(), pool_size=1)
    pool = pool_mod.ContainerPool(box, 1)
    root = tmp_path / "slot"
    for d in ("harness", "scratch", "io"):
        (root / d).mkdir(parents=True)
    slot = pool_mod._Slot(container, root, key=())
    monkeypatch.setattr(pool_mod, "_oom_kills", lambda _id: None)  # no cgroup counter here: ask the engine
    monkeypatch.setattr(pool_mod.ContainerPool, "_exec_with_deadline", lambda *a, **kw: (exit_status, False, True))
    monkeypatch.setattr(pool_mod.ContainerPool, "_exec", lambda *a, **kw: None)
    harness, work = tmp_path / "h", tmp_path / "w"
    harness.mkdir()
    work.mkdir()
    result, healthy = pool._run_in(slot, ["true"], harness, work, {}, Limits())
    assert result.returncode == exit_status and result.limit is None and result.memory_unknown and not healthy, result
    if exit_status:
        assert result.reason().startswith("exit 137 (killed by SIGKILL, or exited 137) (whether the memory limit was "
                                          "hit is unknown)"), result.reason()
    else:
        assert result.ok and result.reason() == ""
