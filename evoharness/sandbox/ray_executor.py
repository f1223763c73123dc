"""`RayExecutor`: the `LocalExecutor`'s rollouts, one Ray task per rollout (or per batch of one commit).

How the harness reaches a node: the driver exports each commit's tree once (``git archive``, or a
tar of a plain directory), puts the tar in Ray's object store once per commit, and every task
that runs that commit receives it by reference. On the node the task unpacks it read-only into a
temporary directory, builds a ``LocalExecutor`` there (``factory.make_local_executor``: the same
sandbox backend, limits, gateway and batching as a local run) and runs its rollouts through
``LocalExecutor.run`` -- so whatever a local rollout does (command agents, the model gateway,
failed trajectories for crashing harnesses) a Ray rollout does too. Nodes need evoharness and the
sandbox backend installed; they never need the harness repo or a shared file system.

Failures: Ray not installed, or a cluster that cannot be reached, raise ``InfraError`` before any
work; a backend unusable on a node raises its ``InfraError`` on the driver. A rollout whose task was
lost (its worker process or node died) becomes a failed trajectory carrying the reason.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoharness.errors import InfraError, InputError
from evoharness.logging import get_logger
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.checkout import CheckoutCache, _make_read_only, _make_writable, extract_tree
from evoharness.sandbox.config import SandboxConfig
from evoharness.sandbox.failure import failed_trajectory
from evoharness.traces.models import EventType, Termination, Trajectory

log = get_logger(__name__)

CONNECT_TIMEOUT_S = 5.0


class RayExecutor:
    """Runs rollouts on a Ray cluster; same contract as ``LocalExecutor`` (a ``RolloutRunner``).

    ``cfg`` gives the sandbox backend, limits, gateway settings and ``ray_address`` (None: start a
    local Ray with this machine's CPUs, or use the Ray this process is already connected to).
    ``batch_size`` > 1 sends up to that many rollouts of one commit as one task (one sandboxed
    worker, as ``LocalExecutor`` batches). ``env`` is the allow-listed host environment, read on
    the driver. ``on_result(index, trajectory)`` is called on the driver as each rollout finishes.
    """

    def __init__(self, harness_repo_path: Path | str, env_spec: str, model_spec: str, *,
                 cfg: SandboxConfig | None = None, batch_size: int = 1, env: dict[str, str] | None = None,
                 on_result: Callable[[int, Trajectory], None] | None = None, worker: list[str] | None = None,
                 num_cpus: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.checkouts = CheckoutCache(harness_repo_path)
        self.env_spec, self.model_spec = env_spec, model_spec
        self.cfg = cfg or SandboxConfig()
        self.batch_size = batch_size
        self.env = dict(env or {})
        self.on_result = on_result
        self.worker = worker
        self.num_cpus = num_cpus
        self._trees: dict[str | None, Any] = {}  # sha -> ObjectRef of its tar
        self._started_ray = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Forget the trees in the object store; shut Ray down if this executor started it."""
        self._trees.clear()
        self.checkouts.close()
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False

    # ---- connecting -------------------------------------------------------------------------

    def connect(self) -> None:
        """Join the configured cluster (or start a local one). InfraError when that cannot be done."""
        try:
            import ray
        except ImportError:
            raise InfraError("the Ray executor needs ray: pip install 'evoharness[ray]'", retryable=False) from None
        if ray.is_initialized():
            return
        address = self.cfg.ray_address
        if address not in (None, "auto", "local"):
            _probe(address)
        kw: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
        if address is None:
            # a cluster of this process alone: on loopback, not on the machine's network address
            kw |= {"num_cpus": self.num_cpus or os.cpu_count() or 1, "include_dashboard": False,
                   "_node_ip_address": "127.0.0.1"}
        try:
            ray.init(address=address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise InfraError(f"cannot connect to Ray at {address or 'a new local cluster'}: {e}") from None
        self._started_ray = True
        log.info("ray.connected", address=address or "local", resources=ray.cluster_resources())

    # ---- running ----------------------------------------------------------------------------

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        shas = [self.checkouts.resolve(r.harness_commit) for r in requests]  # bad commit: InputError first
        self.connect()
        import ray

        chunks = self._chunks(shas)
        pinned = [r.model_copy(update={"harness_commit": sha or r.harness_commit}) for r, sha in zip(
            requests, shas, strict=True)]
        params = {"env_spec": self.env_spec, "model_spec": self.model_spec, "cfg": self.cfg, "env": self.env,
                  "worker": self.worker}
        task = ray.remote(_run_chunk).options(max_retries=1, retry_exceptions=False)
        pending = {task.remote(self._tree_ref(shas[c[0]]), shas[c[0]], [pinned[i] for i in c],
                               params | {"batch_size": len(c)}): c for c in chunks}
        out: list[Trajectory | None] = [None] * len(requests)
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                chunk = pending.pop(done[0])
                for i, traj in zip(chunk, self._collect(done[0], [requests[i] for i in chunk], shas[chunk[0]]),
                                   strict=True):
                    out[i] = traj
                    if self.on_result:
                        self.on_result(i, traj)
        finally:
            for ref in pending:  # an infrastructure error: don't leave rollouts running for nobody
                ray.cancel(ref, force=True)
        return [t for t in out if t is not None]

    def _chunks(self, shas: list[str | None]) -> list[list[int]]:
        """Request indices per task: runs of one commit, ``batch_size`` at a time (as LocalExecutor batches)."""
        batched = self.batch_size > 1 and self.worker is None and self.cfg.backend != "inprocess"
        size = self.batch_size if batched else 1
        groups: dict[str | None, list[int]] = {}
        for i, sha in enumerate(shas):
            groups.setdefault(sha, []).append(i)
        return [idx[j:j + size] for idx in groups.values() for j in range(0, len(idx), size)]

    def _tree_ref(self, sha: str | None) -> Any:
        """The commit's tree as a tar in the object store (put once per commit per executor)."""
        import ray

        if sha not in self._trees:
            self._trees[sha] = ray.put(_tar_of(self.checkouts, sha))
        return self._trees[sha]

    def _collect(self, ref: Any, reqs: list[RolloutRequest], sha: str | None) -> list[Trajectory]:
        import ray
        from ray.exceptions import RayTaskError

        try:
            got = ray.get(ref)
            if isinstance(got, dict):
                if got["error"] == "input":
                    raise InputError(got["source"], got["reason"], got["where"])
                raise InfraError(got["reason"], got["retryable"])
            return got
        except RayTaskError as e:
            cause = e.cause
            if isinstance(cause, InfraError | InputError):
                raise cause from None
            raise InfraError(f"a Ray rollout task raised {type(cause).__name__}: {cause}", retryable=False) from None
        except ray.exceptions.RayError as e:  # the worker process or its node died: the rollouts are lost
            reason = f"ray task lost: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            log.info("rollout_failed", task_ids=[r.task_id for r in reqs], reason=reason)
            return [failed_trajectory(r, sha, self.model_spec, self.env_spec, EventType.harness_error, reason,
                                      Termination.error, 0.0, {"backend": f"ray/{self.cfg.backend}"}) for r in reqs]


def _probe(address: str) -> None:
    """A quick TCP connect to the head, so a wrong address fails in seconds, not after Ray's retries."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError("sandbox.ray_address", f"{address!r} is not HOST:PORT, ray://HOST:PORT or 'auto'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise InfraError(f"cannot connect to Ray at {address}: {e.strerror or e}") from None


def _tar_of(checkouts: CheckoutCache, sha: str | None) -> bytes:
    buf = io.BytesIO()
    if sha is not None and checkouts.repo is not None:
        checkouts.repo.archive(buf, treeish=sha, format="tar")
    else:  # a plain directory: its files as they are now
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(checkouts.repo_path, arcname=".", filter=lambda ti: None if ti.name.startswith("./.git") else ti)
    return buf.getvalue()


class _Unpacked:
    """Stands in for ``CheckoutCache`` on a node: every commit of the task is the one unpacked tree."""

    def __init__(self, tree: Path, sha: str | None) -> None:
        self.tree, self.sha = tree, sha

    def resolve(self, commit: str | None) -> str | None:
        return self.sha

    def get(self, commit: str | None) -> Path:
        return self.tree

    def close(self) -> None:
        pass


def _run_chunk(tar: bytes, sha: str | None, requests: list[RolloutRequest],
               params: dict[str, Any]) -> list[Trajectory] | dict[str, Any]:
    """On a node: unpack the tree read-only and run the rollouts through a ``LocalExecutor``."""
    from evoharness.sandbox.factory import make_local_executor, make_sandbox

    cfg: SandboxConfig = params["cfg"]
    root = Path(tempfile.mkdtemp(prefix="evoharness-ray-"))
    try:
        root.chmod(0o755)
        tree = root / "tree"
        tree.mkdir()
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            extract_tree(tf, tree)
        _make_read_only(tree)
        box = make_sandbox(cfg.backend, cfg)
        ex = make_local_executor(cfg, tree, params["env_spec"], params["model_spec"], sandbox=box, workers=1,
                                 batch_size=params["batch_size"], env=params["env"], worker=params["worker"])
        ex.checkouts = _Unpacked(tree, sha)
        try:
            with ex:
                trajs = ex.run(requests)
        finally:
            if hasattr(box, "close"):  # e.g. a Docker pool: its containers live no longer than the task
                box.close()
    except InfraError as e:  # sent back as data: these exceptions' constructors do not survive pickling
        return {"error": "infra", "reason": f"on node {socket.gethostname()}: {e.reason}", "retryable": e.retryable}
    except InputError as e:
        return {"error": "input", "source": e.source, "reason": e.reason, "where": e.where}
    else:
        for t in trajs:
            t.meta["executor"] = {"kind": "ray", "node": socket.gethostname()}
        return trajs
    finally:
        _make_writable(root)
        shutil.rmtree(root, ignore_errors=True)
