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
