"""Settings section `[sandbox]`."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from evoharness.sandbox.models import Limits
from evoharness.verification.config import MAX_RETRIES

# what a warm worker forks a child for: a commit's rollouts on it (kept across batches), a batch's, a rollout
WarmFork = Literal["commit", "batch", "rollout"]
WARM_FORKS: tuple[str, ...] = get_args(WarmFork)


class GatewayConfig(BaseModel):
    """The model gateway (sandbox/gateway.py): the only way a sandboxed rollout reaches a real model."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    timeout_s: float = Field(120.0, gt=0, description="Seconds to wait for one upstream reply (read timeout).")
    connect_timeout_s: float = Field(10.0, gt=0, description="Seconds to wait for a connection to the upstream.")
    retries: int = Field(3, ge=0, le=MAX_RETRIES, description="Retries of one request after a connect error, a "
                         "timeout, a 429 or a 5xx from the upstream (4xx replies are never retried); at most "
                         f"{MAX_RETRIES}.")
    backoff_s: float = Field(0.5, ge=0, description="First wait between retries; doubles each retry.")
    backoff_max_s: float = Field(8.0, ge=0, description="Longest wait between two retries.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Host environment variable holding the upstream API "
                             "key; read by the gateway when it starts, never passed into a sandbox.")
    user_api_key_env: str | None = Field(None, description="Host environment variable holding the API key for a "
                                         "simulated user's model (a tau2 ?user=openai:URL#model customer), which "
                                         "the gateway serves on its own per-rollout accounts; None = api_key_env.")
    socket_dir: str | None = Field(None, description="Directory under which the gateway makes its private "
                                   "socket directory (default: the system temp dir; keep the path short, "
                                   "Unix socket paths are limited to 107 bytes).")
    max_body_mb: int = Field(16, ge=1, description="Largest request body the gateway accepts, in MiB.")


class DockerConfig(BaseModel):
    """The Docker sandbox backend (sandbox/docker.py)."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    image: str = Field("evoharness-sandbox:latest", description="Sandbox image; built locally by "
                       "`bash ops/sandbox/build-image.sh` (no registry).")
    pool_size: int = Field(0, ge=0, description="Warm containers kept for reuse (start-up ~0.3 s paid once per "
                           "container, not per rollout); 0 = a fresh container per command. Set it to `workers`; "
                           "a command finding every warm container busy runs in a fresh one.")
    cpus: float | None = Field(None, gt=0, description="CPUs per container (cgroup quota); None = unbounded.")


class SandboxConfig(BaseModel):
    """Sandboxes and executors (backend, limits, parallelism). Each field carries a description."""

    model_config = ConfigDict(allow_inf_nan=False)  # inf, nan (TOML reads 1e999 as inf): refused

    backend: Literal["bwrap", "docker", "none", "inprocess"] = Field(
        "bwrap", description="Where rollouts run: 'bwrap' (bubblewrap: no network, read-only harness, "
        "limits), 'docker' (a container of the locally built sandbox image, see [sandbox.docker]), 'none' "
        "(a plain child process with limits, no isolation), or 'inprocess' (this "
        "process, no limits; tests and benchmarks only).",
    )
    workers: int = Field(2, ge=1, le=256, description="Rollouts run at once by the local executor (at most 256).")
    executor: Literal["local", "ray"] = Field(
        "local", description="Who runs the rollouts: 'local' (a thread pool on this machine, `workers` at a "
        "time) or 'ray' (one Ray task per rollout, or per batch of one commit, on a Ray cluster; every node "
        "needs evoharness and the sandbox backend installed, not the harness repo).",
    )
    ray_address: str | None = Field(
        None, description="Ray cluster to use with executor = 'ray' ('HOST:PORT' of its head, 'ray://HOST:PORT' "
        "for Ray Client, or 'auto'); None starts a local Ray with this machine's CPUs.",
    )
    batch_size: int = Field(8, ge=1, description="Rollouts of one harness commit handed to one sandboxed worker "
                            "at a time. With bwrap (> 1) that is a warm worker, which stays up across batches "
                            "and commits and forks a child per batch it serves (warm_fork); with Docker one "
                            "process runs the batch (start-up paid once per batch). 1 = a fresh sandbox per rollout.")
    warm: bool = Field(True, description="With bwrap and batch_size > 1, run rollouts on warm workers (a "
                       "sandboxed fork server per slot serving any commit, a forked child per batch: warm_fork); "
                       "false = one sandboxed process runs each batch's rollouts one after another (the shape "
                       "before warm workers; a crash or hang there fails its own rollout, and the later ones run "
                       "again, each in a sandbox of its own).")
    warm_fork: WarmFork = Field(
        "batch", description="What a warm worker forks: 'batch' (the default) = one child runs a batch's rollouts "
        "(one commit's) one after another, each rollout with its own directory, output, CPU limit and fresh "
        "environment state and harness modules; a rollout that leaves anything behind in the process, fails or "
        "crashes ends the child and the next rollout gets a fresh one (docs/sandbox.md, 'One child per batch'). "
        "'commit' = the same, but the child stays for that commit's next batches on the same worker (at most 64 "
        "rollouts; a rollout of another commit ends it): ~1 ms less CPU a rollout, but state the child's checks "
        "cannot see may then reach the same commit's later verification looks (docs/sandbox.md, 'One child per "
        "commit'). 'rollout' = a fresh child per rollout (no Python state shared even between rollouts of one "
        "commit; ~10 ms more CPU each).")
    warm_idle_s: float = Field(60.0, gt=0, description="Seconds a warm bwrap worker (batch_size > 1) stays up "
                               "with no rollout to run before it is stopped.")
    limits: Limits = Field(default_factory=Limits, description="Per-rollout CPU, memory, pids, wall-time, "
                           "file-size and /tmp limits.")
    env_passthrough: list[str] = Field(
        default_factory=list, description="Names of host environment variables copied into the sandbox "
        "(an explicit allow-list; nothing else from the host environment reaches a rollout).",
    )
    ro_paths: list[str] = Field(
        default_factory=list, description="Extra host paths bound read-only into the bwrap or Docker sandbox at the "
        "same place (e.g. a data directory the environment reads).",
    )
    docker: DockerConfig = Field(default_factory=DockerConfig, description="The Docker backend: image, warm "
                                 "container pool, CPUs per container.")
    gateway: GatewayConfig = Field(default_factory=GatewayConfig, description="The model gateway that serves "
                                   "sandboxed rollouts their model (timeouts, retries, API key variable).")
