"""Build a sandbox backend and a rollout executor (local or Ray) from the `[sandbox]` section."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from evoharness.errors import InputError
from evoharness.sandbox.base import ProcessSandbox, Sandbox
from evoharness.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from evoharness.sandbox.executor import LocalExecutor
    from evoharness.sandbox.ray_executor import RayExecutor
    from evoharness.traces.models import Trajectory


BACKENDS = ("bwrap", "docker", "none", "inprocess")


def check_backend(backend: str, option: str = "--sandbox") -> str:
    """``backend`` if it names a sandbox backend; else an InputError naming the option the user typed."""
    if backend not in BACKENDS:
        raise InputError(option, f"unknown sandbox backend {backend!r} ({' | '.join(BACKENDS)})")
    return backend


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
    if check_backend(backend) == "inprocess":
        return None


def passthrough_env(cfg: SandboxConfig) -> dict[str, str]:
    """The allow-listed host variables that are set.

    The model gateway's key variables are refused: the key stays on the host side of the gateway.
    """
    keys = {cfg.gateway.api_key_env, cfg.gateway.user_api_key_env or cfg.gateway.api_key_env}
    leaked = sorted(keys & set(cfg.env_passthrough))
    if leaked:
        raise InputError("sandbox.env_passthrough", f"{', '.join(leaked)} is the model gateway's API key: "
                         "it never enters a sandbox (rollouts reach their model through the gateway)")
    return {k: os.environ[k] for k in cfg.env_passthrough if k in os.environ}


def make_local_executor(cfg: SandboxConfig, harness_path: Path | str, env_spec: str, model_spec: str, *,
                        sandbox: Sandbox | None, workers: int, batch_size: int, env: dict[str, str],
                        on_result: Callable[[int, Trajectory], None] | None = None,
                        worker: list[str] | None = None, owns_sandbox: bool = False) -> LocalExecutor:
    """The one place a ``LocalExecutor`` is built from settings (also on each Ray node, per task)."""
    from evoharness.sandbox.executor import LocalExecutor

    return LocalExecutor(harness_path, env_spec, model_spec, sandbox=sandbox, workers=workers, limits=cfg.limits,
                         env=env, worker=worker, on_result=on_result, batch_size=batch_size, gateway=cfg.gateway,
                         owns_sandbox=owns_sandbox, warm=cfg.warm, warm_fork=cfg.warm_fork,
                         warm_idle_s=cfg.warm_idle_s)


def make_executor(cfg: SandboxConfig, harness_path: Path | str, env_spec: str, model_spec: str, *,
                  executor: str | None = None, backend: str | None = None, workers: int | None = None,
                  batch_size: int | None = None,
                  on_result: Callable[[int, Trajectory], None] | None = None) -> LocalExecutor | RayExecutor:
    """The rollout executor the ``[sandbox]`` section ``cfg`` asks for (``executor``: local | ray).

    ``executor``, ``backend``, ``workers`` and ``batch_size`` override the section (CLI flags).
    ``workers`` bounds the local pool; a Ray run is as parallel as its cluster's CPUs.
    """
    kind = executor or cfg.executor
    backend = backend or cfg.backend
    batch = cfg.batch_size if batch_size is None else batch_size
    if kind == "local":
        return make_local_executor(cfg, harness_path, env_spec, model_spec, sandbox=make_sandbox(backend, cfg),
                                   workers=workers or cfg.workers, batch_size=batch, env=passthrough_env(cfg),
                                   on_result=on_result, owns_sandbox=True)
    if kind == "ray":
        from evoharness.sandbox.ray_executor import RayExecutor

        make_sandbox(backend, cfg)  # an unknown backend is bad input here, not on every node
        return RayExecutor(harness_path, env_spec, model_spec, cfg=cfg.model_copy(update={"backend": backend}),
                           batch_size=batch, env=passthrough_env(cfg), on_result=on_result)
    raise InputError("--executor", f"unknown executor {kind!r} (local | ray)")
