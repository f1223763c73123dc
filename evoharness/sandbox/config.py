"""Settings section `[sandbox]`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from evoharness.sandbox.models import Limits


class SandboxConfig(BaseModel):
    """Sandboxes and executors (backend, limits, parallelism). Each field carries a description."""

    backend: Literal["bwrap", "none", "inprocess"] = Field(
        "bwrap", description="Where rollouts run: 'bwrap' (bubblewrap: no network, read-only harness, "
        "limits), 'none' (a plain child process with limits, no isolation), or 'inprocess' (this "
        "process, no limits; tests and benchmarks only).",
    )
    workers: int = Field(2, ge=1, description="Rollouts run at once by the local executor.")
    batch_size: int = Field(8, ge=1, description="Rollouts of one harness commit that share one sandboxed "
                            "worker in a run (start-up paid once per batch; 1 = a sandbox per rollout).")
    limits: Limits = Field(default_factory=Limits, description="Per-rollout CPU, memory, pids, wall-time, "
                           "file-size and /tmp limits.")
    env_passthrough: list[str] = Field(
        default_factory=list, description="Names of host environment variables copied into the sandbox "
        "(an explicit allow-list; nothing else from the host environment reaches a rollout).",
    )
    ro_paths: list[str] = Field(
        default_factory=list, description="Extra host paths bound read-only into the bwrap sandbox at the "
        "same place (e.g. a data directory the environment reads).",
    )
