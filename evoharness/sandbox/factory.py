"""Build a sandbox backend and a local executor from settings."""

from __future__ import annotations

import os
from pathlib import Path

from evoharness.errors import InputError
from evoharness.sandbox.base import ProcessSandbox, Sandbox
from evoharness.sandbox.config import SandboxConfig


def make_sandbox(backend: str, cfg: SandboxConfig | None = None) -> Sandbox | None:
    """'bwrap' -> BwrapSandbox, 'docker' -> DockerSandbox, 'none' -> ProcessSandbox, 'inprocess' -> None."""
    cfg = cfg or SandboxConfig()
    if backend == "bwrap":
        from evoharness.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(ro_paths=[Path(p) for p in cfg.ro_paths])
    if backend == "docker":
        from evoharness.sandbox.docker import DockerSandbox

        return DockerSandbox(image=cfg.docker.image, pool_size=cfg.docker.pool_size, cpus=cfg.docker.cpus,
                             ro_paths=[Path(p) for p in cfg.ro_paths])
    if backend == "none":
        return ProcessSandbox()
    if backend == "inprocess":
        return None
    raise InputError("--sandbox", f"unknown sandbox backend {backend!r} (bwrap | docker | none | inprocess)")


def passthrough_env(cfg: SandboxConfig) -> dict[str, str]:
    """The allow-listed host variables that are set."""
    return {k: os.environ[k] for k in cfg.env_passthrough if k in os.environ}
