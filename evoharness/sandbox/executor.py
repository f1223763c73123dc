"""`LocalExecutor`: a `RolloutRunner` that runs each rollout's worker in a sandbox, N at a time.

Per request: export the harness at ``request.harness_commit`` (once per commit), write the
request JSON into a fresh work directory, run ``python -m evoharness.agent.worker REQUEST OUT``
in the sandbox, and read the trajectory it wrote. A worker that crashes, hangs, hits a limit,
or writes nothing or garbage becomes a failed trajectory carrying the reason (score 0.0, not
delivered); only an unusable sandbox backend raises (``InfraError``).

With ``batch_size`` > 1 on a backend that can keep a sandbox running (bwrap), rollouts go to warm
workers instead (``sandbox/warm.py``): one sandboxed fork server per slot, started once and kept across
batches, runs and commits (the host swaps the read-only tree it shows at ``/harness`` between rollouts),
forking a child per commit it serves (``warm_fork``: or per batch, or per rollout), checked between rollouts,
swept when a child ends, stopped on idle and in ``close()``.

With a sandbox and an ``openai:URL#model`` model, an offline model (``standin:*``, ``scripted:*``:
served in this process by ``gateway_standin.StandInUpstream``, so the task's reference it is handed
never enters the sandbox) or an explicit ``upstream``, the executor starts one model gateway
(``sandbox/gateway.py``) on first use and closes it in ``close()``: each rollout gets its own gateway
account, the worker reaches the model only through the gateway's Unix socket,
and the gateway's token counts replace the trajectory's ``usage`` tokens (``meta["gateway"]``).

A tau2 env spec with ``?user=openai:URL#model`` (a simulated customer over a real model) also gets
the gateway in a sandbox: each rollout gets a second account, on the gateway's ``user`` lane (pinned to
that model, forwarding to URL), and the worker sees the env spec with ``?user=gateway:SOCKET?rollout=
TOKEN#model`` (request field ``env_via``). The customer's counts land in ``meta["gateway"]["user"]``
and are not the agent's usage.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from evoharness.agent.harness import prepare, prepare_code
from evoharness.agent.runner import run_rollout
from evoharness.errors import InfraError, InputError
from evoharness.harness_repo.manifest import MANIFEST_NAME, Manifest
from evoharness.logging import get_logger
from evoharness.model_specs import is_offline
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.base import Sandbox
from evoharness.sandbox.checkout import CheckoutCache
from evoharness.sandbox.command_agent import BadOutput, CommandRollout, uses_command_agent
from evoharness.sandbox.config import WARM_FORKS, GatewayConfig
from evoharness.sandbox.failure import failed_trajectory
from evoharness.sandbox.gateway import AGENT, USER, Gateway, RolloutUsage, start_gateway
from evoharness.sandbox.gateway_standin import StandInUpstream
from evoharness.sandbox.gateway_upstream import Upstream
from evoharness.sandbox.models import Limits, SandboxResult
from evoharness.sandbox.scoring import (
    SEAL_PREFIX,
    HostScorer,
    OutputError,
    Tampered,
    mark_tampered,
    parse_worker_output,
    read_output,
    unseal,
)
from evoharness.sandbox.warm import WarmPool, WarmWorker
from evoharness.traces.models import EventType, Termination, Trajectory

log = get_logger(__name__)

WORKER_MODULE = "evoharness.agent.worker"


@dataclass
class RolloutAccounts:
    """One rollout's accounts on the run's gateway: its agent's model and its simulated user's model
    (each None when that side does not go through the gateway)."""

    gw: Gateway
    agent: str | None
    user: str | None

    def close(self) -> tuple[RolloutUsage | None, RolloutUsage | None]:
        """Close both accounts (their tokens stop working); (agent counts, user counts)."""
        agent = self.gw.close_rollout(self.agent) if self.agent else None
        user = self.gw.close_rollout(self.user) if self.user else None
        return agent, user


class LocalExecutor:
    """Runs rollouts of one harness repo on one environment with one model, ``workers`` at a time.

    ``sandbox=None`` runs the agent in this process (``evoharness.agent.runner.run_rollout``):
    no isolation and no limits, for tests and overhead measurements only. There ``prepare`` (the default)
    compiles each tree's template, parses its policies and compiles its modules once per text before its
    rollouts, as a warm worker's fork server does (``agent.harness.prepare``, ``prepare_code``: each rollout
    gets what parsing afresh would give and still runs the modules afresh); ``prepare=False`` leaves that to
    every rollout (the overhead benchmark's unprepared row).
    The worker command: ``worker`` if given (``{harness}`` in it is replaced by the path the
    sandbox shows the harness at); else, when the commit's ``harness.toml`` says
    ``agent.kind = "command"``, that shell command run in the checkout with a task file and the
    output path as its two arguments, its output read by ``command_agent.CommandRollout`` (a
    Trajectory or OpenAI messages, scored here); else ``python -m evoharness.agent.worker``.
    ``on_result(index, trajectory)`` is called as each rollout finishes (any order).
    Model gateway: used when a sandbox is and the model is ``openai:URL#model`` (forwarding to URL
    with the host's key, per ``gateway``) or an offline ``standin:``/``scripted:`` model (served here,
    bound per rollout to its task, seed and rollout) or when ``upstream`` is given (e.g. a ``ModelUpstream``
    serving a scripted model); the worker then gets ``gateway:SOCKET?rollout=TOKEN#model``. Also used,
    with a sandbox, for a tau2 env whose customer is ``?user=openai:URL#model`` (see the module docstring).
    """

    def __init__(self, harness_repo_path: Path | str, env_spec: str, model_spec: str, *,
                 sandbox: Sandbox | None, workers: int = 1, limits: Limits | None = None,
                 env: dict[str, str] | None = None, worker: list[str] | None = None,
                 on_result: Callable[[int, Trajectory], None] | None = None, batch_size: int = 1,
                 gateway: GatewayConfig | None = None, upstream: Upstream | None = None,
                 owns_sandbox: bool = False, warm: bool = True, warm_idle_s: float = 60.0,
                 warm_fork: str = "batch", prepare: bool = True) -> None:
        if workers < 1 or batch_size < 1:
            raise ValueError("workers must be >= 1")
        self.checkouts = CheckoutCache(harness_repo_path)
        self.env_spec, self.model_spec = env_spec, model_spec
        self.sandbox, self.workers = sandbox, workers
        self.limits = limits or Limits()
        self.env = dict(env or {})
        self.worker = worker
        self.on_result = on_result
        self.batch_size = batch_size
        self.gateway_cfg = gateway or GatewayConfig()
        self._upstream = upstream
        self._gateway: Gateway | None = None
        self._gateway_lock = threading.Lock()
        self.owns_sandbox = owns_sandbox  # close() also closes the sandbox (e.g. a Docker pool)
        self.warm, self.warm_idle_s = warm and hasattr(sandbox, "start"), warm_idle_s
        if warm_fork not in WARM_FORKS:
            raise ValueError(f"warm_fork must be one of {', '.join(map(repr, WARM_FORKS))}, not {warm_fork!r}")
        # one forked child per commit on a worker (kept across that commit's batches), per batch, or per rollout
        self.warm_fork = warm_fork
        self._pool: WarmPool | None = None
        self.warm_starts = 0  # warm workers started so far (tests, measurements)
        self.warm_cost: Counter[str] = Counter()  # sums of the servers' per-rollout accounts (``warm.COST_KEYS``)
        self.warm_changed: Counter[str] = Counter()  # what rollouts left in a batch child, which ended it
        self._warm_lock = threading.Lock()
        self.scorer = HostScorer(env_spec)  # scores every rollout here, by replay, outside the sandbox
        self._seals: dict[int, str] = {}  # id(request) -> the seal its worker's output must carry
        self._seals_lock = threading.Lock()
        self.prepare = prepare  # in-process: the tree's template, policies and modules made once per text
        self._prepare_lock = threading.Lock()  # the memo is one per process, rollout threads share it

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stop_workers(self) -> None:
        """Stop the warm workers now (the next batch starts fresh ones); ``close()`` does it too."""
        with self._warm_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def close(self) -> None:
        self.stop_workers()
        self.checkouts.close()
        with self._gateway_lock:
            gw, self._gateway = self._gateway, None
        if gw is not None:
            gw.close()
        close_sandbox = getattr(self.sandbox, "close", None)
        if self.owns_sandbox and close_sandbox is not None:
            close_sandbox()

    # ---- the model gateway -----------------------------------------------------------------

    @property
    def _agent_via_gateway(self) -> bool:
        return self._upstream is not None or self.model_spec.startswith("openai:") or is_offline(self.model_spec)

    def _agent_upstream(self) -> Upstream | None:
        """The agent lane's upstream: the given one, else the offline model served here (never in the
        sandbox: it holds the task's reference), else None (``start_gateway`` forwards ``openai:``)."""
        if self._upstream is not None:
            return self._upstream
        if is_offline(self.model_spec):
            return StandInUpstream(self.model_spec, self.env_spec)
        return None

    def user_model(self) -> str | None:
        """The ``openai:URL#model`` spec of the env's simulated user (tau2 ``?user=``), or None.
        InputError for a bad user spec."""
        from evoharness.envs import user_model_spec

        return user_model_spec(self.env_spec)

    @property
    def uses_gateway(self) -> bool:
        return self.sandbox is not None and (self._agent_via_gateway or self.user_model() is not None)

    def gateway(self) -> Gateway | None:
        """The run's gateway, started on first use (None when rollouts need none)."""
        if not self.uses_gateway:
            return None
        with self._gateway_lock:
            if self._gateway is None:
                self._gateway = start_gateway(self.model_spec if self._agent_via_gateway else None,
                                              self.gateway_cfg, self._agent_upstream(), user_spec=self.user_model())
            return self._gateway

    def _open(self, req: RolloutRequest) -> RolloutAccounts | None:
        gw = self.gateway()
        if gw is None:
            return None
        label = f"{req.task_id}#{req.rollout}"
        agent = gw.open_rollout(label) if AGENT in gw.lanes else None
        bind = getattr(gw.lanes[AGENT].upstream, "bind", None) if agent else None
        if bind is not None:  # a host-side offline model: this token is this task's, seed's and rollout's
            bind(agent, req.task_id, req.seed, req.rollout)
        user = gw.open_rollout(f"{label} user", lane=USER) if USER in gw.lanes else None
        return RolloutAccounts(gw, agent, user)

    def _sockets(self, accounts: RolloutAccounts | None) -> dict:
        # passed only when there is one, so a Sandbox without the keyword still runs gateway-less rollouts
        return {"sockets": [accounts.gw.socket]} if accounts else {}

    @staticmethod
    def _settle(traj: Trajectory, accounts: RolloutAccounts | None) -> Trajectory:
        """Close the rollout's gateway accounts; the agent's counts become the trajectory's token usage,
        the simulated user's go to ``meta["gateway"]["user"]``."""
        if accounts is None:
            return traj
        agent, user = accounts.close()
        if agent is not None:
            traj = with_gateway_usage(traj, agent)
        else:  # only the gateway's own counts go under this key, never what a sandbox wrote there
            traj.meta.pop("gateway", None)
        if user is not None:
            traj = with_user_usage(traj, user)
        return traj

    def run(self, requests: list[RolloutRequest]) -> list[Trajectory]:
        self.user_model()  # a bad simulated-user spec is bad input, before any rollout
        if self.sandbox is not None:
            self.sandbox.check()  # InfraError before any work if the backend is unusable
            self._check_key_hidden()
            self.gateway()  # likewise for a gateway that cannot start
        shas: dict[str, str | None] = {}
        for r in requests:  # resolve (and export) every commit up front: a bad commit is bad input
            if r.harness_commit not in shas:
                shas[r.harness_commit] = self.checkouts.resolve(r.harness_commit)
                self.checkouts.get(shas[r.harness_commit] or r.harness_commit)
        # a name (HEAD, a branch) is resolved once per call: every rollout of it runs the same commit, and the
        # lookups below are by full sha (remembered), not a git lookup per rollout and step
        requests = [r if shas[r.harness_commit] in (None, r.harness_commit)
                    else r.model_copy(update={"harness_commit": shas[r.harness_commit]}) for r in requests]
        if self.sandbox is not None and self.batch_size > 1 and self.worker is None:
            chunk = self._warm_chunk if self.warm else self._batch
            trajs = self._run_batched(requests, chunk)
        else:
            with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollout") as pool:
                futures = [pool.submit(self._one, i, r) for i, r in enumerate(requests)]
                trajs = [f.result() for f in futures]
        down = endpoint_down(trajs)
        if down:  # infrastructure, not N zero scores: the caller retries or pauses the run
            raise InfraError(f"model endpoint down for all {len(trajs)} rollouts: {down}", retryable=True)
        return trajs

    def _check_key_hidden(self) -> None:
        """InfraError when the sandbox would bind the harness repo's git directory (its verdict key)."""
        from evoharness.harness_repo.signing import key_exposed

        repo_path = getattr(self.checkouts, "repo_path", None)  # None: a Ray node's unpacked tree (no git dir)
        under = key_exposed(repo_path, getattr(self.sandbox, "ro_paths", ())) if repo_path else None
        if under is not None:
            raise InfraError(f"the harness repository {self.checkouts.repo_path} lies under {under}, which the "
                             "sandbox binds read-only: sandboxed code could read its verdict key; move the "
                             "harness repository elsewhere", retryable=False)

    # ---- batches: one sandbox per batch of rollouts of one commit -----------------------------

    def _run_batched(self, requests: list[RolloutRequest],
                     chunk_fn: Callable[[list[RolloutRequest]], list[Trajectory]]) -> list[Trajectory]:
        """Rollouts of one commit go to one sandboxed worker ``batch_size`` at a time (``chunk_fn``).

        With a backend that can keep a sandbox running (bwrap: ``_warm_chunk``), each batch goes to a
        warm worker shown its commit's tree, which runs it in a forked child (``sandbox/warm.py``): the
        interpreter start-up is paid once per worker, not per rollout or batch, and a harness that
        crashes or hangs fails only its own rollout. Otherwise (Docker: ``_batch``) one sandboxed
        process runs the batch's rollouts one after another: start-up paid once per batch; a rollout that
        crashes it, hangs it or makes it hit a limit fails with the reason, and the rollouts after it, which
        never ran, then run each in a sandbox of its own.
        Harnesses whose manifest runs a ``command`` agent are still run one rollout per sandbox.
        """
        groups: dict[str | None, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(self.checkouts.resolve(r.harness_commit), []).append(i)
        chunks = [idx[j:j + self.batch_size] for idx in groups.values() for j in range(0, len(idx), self.batch_size)]
        out: list[Trajectory | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollout") as pool:
            futures = {pool.submit(chunk_fn, [requests[i] for i in chunk]): chunk for chunk in chunks}
            for fut, chunk in futures.items():
                for i, traj in zip(chunk, fut.result(), strict=True):
                    out[i] = traj
                    if self.on_result:
                        self.on_result(i, traj)
        return [t for t in out if t is not None]

    def _one_by_one(self, tree: Path) -> bool:
        """True for a harness that does not run the Python worker (a ``command`` agent, a bad manifest)."""
        if not (tree / MANIFEST_NAME).is_file():
            return False
        try:
            return Manifest.load(tree / MANIFEST_NAME).agent.kind == "command"
        except InputError:
            return True

    def _warm_chunk(self, reqs: list[RolloutRequest]) -> list[Trajectory]:
        """A batch of one commit's rollouts on a warm worker showing that commit, in its forked child."""
        sha = self.checkouts.resolve(reqs[0].harness_commit)
        tree = self.checkouts.get(reqs[0].harness_commit)
        if self._one_by_one(tree):
            return [self._sandboxed(r, tree, sha) for r in reqs]
        pool = self._warm_pool()
        # the rollouts of this batch may share one forked child: with ``warm_fork = "batch"`` the batch's last
        # rollout ends it; with "commit" the child stays for this commit's next batches on the same worker (the
        # server ends it when a rollout of another commit comes: another key), so no rollout is the last
        batch = None if self.warm_fork == "rollout" else secrets.token_hex(8) if self.warm_fork == "batch" \
            else f"commit:{sha}" if sha is not None else f"tree:{tree}"
        keep = self.warm_fork == "commit"
        out: list[Trajectory] = []
        worker: WarmWorker | None = None
        try:
            for i, req in enumerate(reqs):
                if worker is None:
                    worker = pool.acquire(sha)  # a fresh one when the last died with its rollout
                    worker.show(sha, tree)  # another commit's worker: this commit's tree at /harness
                out.append(self._warm_one(worker, req, sha, batch, last=not keep and i == len(reqs) - 1))
                if not worker.alive:
                    pool.release(worker)
                    worker = None
        finally:
            if worker is not None:
                pool.release(worker)
        return out

    def _warm_pool(self) -> WarmPool:
        with self._warm_lock:
            if self._pool is None:
                self._pool = WarmPool(self._start_warm, slots=self.workers, idle_s=self.warm_idle_s)
            return self._pool

    def _start_warm(self, sha: str | None) -> WarmWorker:
        gw = self.gateway()
        self.warm_starts += 1
        tree = self.checkouts.get(sha)
        warm = {"env_spec": self.env_spec, "model_spec": self.model_spec, "gateway": gw is not None,
                "harness_dir": self.sandbox.view(tree, tree)[0]}  # where rollouts see the harness
        worker = WarmWorker(self.sandbox, sha=sha, tree=tree, env=self.env,
                            limits=self.limits, sockets=[gw.socket] if gw is not None else [], warm=warm)
        with self._warm_lock:
            self.warm_cost["start_cpu_s"] += worker.start_cpu_s
        return worker

    def _warm_one(self, worker: WarmWorker, req: RolloutRequest, sha: str | None, batch: str | None = None, *,
                  last: bool = True) -> Trajectory:
        account = self._open(req)
        traj: Trajectory | None = None
        rdir: Path | None = None
        try:
            hview, _ = self.sandbox.view(worker.tree, worker.work)
            result, rdir = worker.run(self._payload(req, hview, sha, account), batch=batch, last=last)
            with self._warm_lock:
                self.warm_cost.update(worker.last_cost | {"rollouts": 1})
                self.warm_changed.update(worker.last_changed)
            traj = self._read(req, sha, result, rdir / "out.json")
        finally:
            if rdir is not None:
                worker.forget(rdir)
            if traj is None and account is not None:
                account.close()
        return self._settle(traj, account)

    def _batch(self, reqs: list[RolloutRequest]) -> list[Trajectory]:
        sha = self.checkouts.resolve(reqs[0].harness_commit)
        tree = self.checkouts.get(reqs[0].harness_commit)
        if self._one_by_one(tree):
            return [self._sandboxed(r, tree, sha) for r in reqs]
        work = Path(tempfile.mkdtemp(prefix="evoharness-batch-"))
        accounts = [self._open(r) for r in reqs]
        trajs: list[Trajectory | None] = []
        try:
            hview, wview = self.sandbox.view(tree, work)
            payloads = [self._payload(r, hview, sha, a) for r, a in zip(reqs, accounts, strict=True)]
            (work / "requests.json").write_text(json.dumps(payloads))
            limits = self.limits.model_copy(update={"wall_seconds": self.limits.wall_seconds * len(reqs)})
            command = [sys.executable, "-m", WORKER_MODULE, "--batch", f"{wview}/requests.json", f"{wview}/out"]
            result = self.sandbox.run(command, harness_dir=tree, workdir=work, env=self.env, limits=limits,
                                      **self._sockets(accounts[0]))
            finished = result.model_copy(update={"returncode": 0, "timed_out": False, "limit": None})
            # a batch that died part-way: the finished rollouts stand, the one it died in carries its reason, and
            # those after it, which never ran, run again below (they used to carry its reason as their own)
            died = False
            for i, r in enumerate(reqs):
                path = work / "out" / f"{i}.json"
                if path.is_file():
                    trajs.append(self._read(r, sha, finished, path))
                elif not died:
                    died = True
                    trajs.append(self._read(r, sha, result, path))
                else:
                    trajs.append(None)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            settled: list[Trajectory | None] = []
            for i, a in enumerate(accounts):
                t = trajs[i] if i < len(trajs) else None
                settled.append(None if t is None else self._settle(t, a))
                if t is None and a is not None:  # never ran here (or an exception came first): nothing to count
                    a.close()
        with self._seals_lock:
            for r, t in zip(reqs, settled, strict=True):
                if t is None:
                    self._seals.pop(id(r), None)
        # each in a sandbox of its own, with its own wall limit: a second rollout that kills its process fails alone
        return [t if t is not None else self._sandboxed(r, tree, sha) for r, t in zip(reqs, settled, strict=True)]

    # ---- one rollout -----------------------------------------------------------------------

    def _one(self, index: int, req: RolloutRequest) -> Trajectory:
        sha = self.checkouts.resolve(req.harness_commit)
        tree = self.checkouts.get(req.harness_commit)
        traj = self._in_process(req, tree, sha) if self.sandbox is None else self._sandboxed(req, tree, sha)
        if self.on_result:
            self.on_result(index, traj)
        return traj

    def _payload(self, req: RolloutRequest, harness_dir: str, sha: str | None,
                 accounts: RolloutAccounts | None = None) -> dict:
        seal = secrets.token_hex(16)  # the worker's output must carry its HMAC (``scoring.unseal``)
        with self._seals_lock:
            self._seals[id(req)] = seal
        payload = {"harness_dir": harness_dir, "env_spec": self.env_spec, "task_id": req.task_id,
                   "model_spec": self.model_spec, "seed": req.seed, "rollout": req.rollout,
                   "split": req.split, "harness_commit": sha, "seal": seal}
        if accounts is not None and accounts.agent:
            payload["gateway"] = accounts.gw.spec(accounts.agent, model_name(self.model_spec))
        if accounts is not None and accounts.user:
            from evoharness.envs import with_user_model

            user = accounts.gw.spec(accounts.user, accounts.gw.lanes[USER].model or "")
            payload["env_via"] = with_user_model(self.env_spec, user)
        return payload

    def _in_process(self, req: RolloutRequest, tree: Path, sha: str | None) -> Trajectory:
        if self.prepare:  # once per text (both never raise: what does not compile is left to the rollout)
            with self._prepare_lock:
                prepare(tree)
                prepare_code(tree)
        start = time.monotonic()
        calls: list = []
        try:
            traj = run_rollout(tree, self.env_spec, req.task_id, self.model_spec, req.seed,
                               rollout=req.rollout, split=req.split, harness_commit=sha, env_calls=calls)
            return self.scorer.settle(traj, calls, req.task_id)
        except Exception as e:  # noqa: BLE001 -- an agent failure is data, not a crash
            return failed_trajectory(req, sha, self.model_spec, self.env_spec, EventType.harness_error,
                                     f"agent raised {type(e).__name__}: {e}", Termination.error,
                                     time.monotonic() - start, {"backend": "in-process"})

    def _sandboxed(self, req: RolloutRequest, tree: Path, sha: str | None) -> Trajectory:
        work = Path(tempfile.mkdtemp(prefix="evoharness-rollout-"))
        account = self._open(req)
        traj: Trajectory | None = None
        try:
            hview, wview = self.sandbox.view(tree, work)
            (work / "request.json").write_text(json.dumps(self._payload(req, hview, sha, account)))
            try:
                command = self._worker_command(tree, hview)
            except InputError as e:
                traj = failed_trajectory(req, sha, self.model_spec, self.env_spec, EventType.harness_error,
                                         f"bad harness manifest: {e}", Termination.error, 0.0,
                                         {"backend": self.sandbox.name})
            else:
                agent = self._command_rollout(req, sha, tree, work, f"{wview}/out.json")
                command += [f"{wview}/request.json", f"{wview}/out.json"]
                result = self.sandbox.run(command, harness_dir=tree, workdir=work, env=self.env,
                                          limits=self.limits, **self._sockets(account))
                traj = self._read(req, sha, result, work / "out.json", agent)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if traj is None and account is not None:  # the sandbox raised: nothing to settle
                account.close()
        return self._settle(traj, account)

    def _worker_command(self, tree: Path, hview: str) -> list[str]:
        if self.worker is not None:
            return [part.replace("{harness}", hview) for part in self.worker]
        if (tree / MANIFEST_NAME).is_file():
            agent = Manifest.load(tree / MANIFEST_NAME).agent
            if agent.kind == "command":
                return ["/bin/sh", "-c", f'cd {hview} && {agent.command} "$@"', "agent"]
        return [sys.executable, "-m", WORKER_MODULE]

    def _command_rollout(self, req: RolloutRequest, sha: str | None, tree: Path, work: Path,
                         output: str) -> CommandRollout | None:
        """For a command agent, the request file becomes its task file (see ``command_agent``)."""
        if self.worker is not None or not uses_command_agent(tree):
            return None
        agent = CommandRollout(self.env_spec, self.model_spec, req, sha)
        path = work / "request.json"
        payload = json.loads(path.read_text())
        payload.pop("seal", None)  # a command agent's output is its own format, scored by replay
        path.write_text(json.dumps(agent.task_file(payload, output)))
        return agent

    def _read(self, req: RolloutRequest, sha: str | None, result: SandboxResult, out: Path,
              agent: CommandRollout | None = None) -> Trajectory:
        meta = {"backend": result.backend, "returncode": result.returncode, "limit": result.limit,
                "stderr_tail": result.stderr[-2000:]}
        with self._seals_lock:
            seal = self._seals.pop(id(req), None)

        def failed(reason: str) -> Trajectory:
            log.info("rollout_failed", task_id=req.task_id, seed=req.seed, reason=reason)
            if result.timed_out:
                kind, term = EventType.timeout, Termination.timeout
            elif result.limit:
                kind, term = EventType.sandbox_violation, Termination.error
            else:
                kind, term = EventType.harness_error, Termination.error
            return failed_trajectory(req, sha, self.model_spec, self.env_spec, kind, reason, term,
                                     result.wall_seconds, meta)

        if not result.ok:
            return failed(f"worker failed: {result.reason()}")
        if agent is not None:  # a command agent: a Trajectory or OpenAI messages, scored here by replay
            try:
                traj = agent.read(out, result.wall_seconds)
            except BadOutput as e:
                return failed(str(e))
            traj.meta.setdefault("sandbox", {"backend": result.backend, "wall_seconds": round(result.wall_seconds, 3)})
            return traj
        try:
            data = read_output(out)
        except OutputError as e:
            if str(e) == "no output file":
                return failed("worker exited 0 but wrote no trajectory")
            return self._tampered(req, sha, f"worker output refused: {e}", meta)
        if self.worker is not None and not data.startswith(SEAL_PREFIX) \
                and not data.lstrip().startswith(b'{"version"'):
            return self._custom(req, sha, data, failed)
        try:
            if seal is not None and (self.worker is None or data.startswith(SEAL_PREFIX)):
                data = unseal(data, seal)  # the reference worker always seals; a custom command may
            got = parse_worker_output(data)
        except Tampered as e:
            return self._tampered(req, sha, str(e), meta)
        traj = self.scorer.settle(got.trajectory, got.env_calls, req.task_id)
        traj.meta.setdefault("sandbox", {"backend": result.backend, "wall_seconds": round(result.wall_seconds, 3)})
        return traj

    def _custom(self, req: RolloutRequest, sha: str | None, data: bytes, failed: Callable[[str], Trajectory]
                ) -> Trajectory:
        """A custom ``worker`` command's bare Trajectory (tests, overhead runs): kept as written, said so."""
        try:
            traj = Trajectory.model_validate_json(data)
        except ValidationError as e:
            first = e.errors()[0]
            return failed(f"worker wrote an invalid trajectory: {first['msg']}"[:300])
        traj.meta["scoring"] = {"by": "custom worker command (not replayed)"}
        return traj

    def _tampered(self, req: RolloutRequest, sha: str | None, reason: str, meta: dict) -> Trajectory:
        traj = failed_trajectory(req, sha, self.model_spec, self.env_spec, EventType.tampered, reason,
                                 Termination.error, 0.0, meta)
        traj.events.clear()
        return mark_tampered(traj, reason)


def model_name(model_spec: str) -> str:
    """The model's name inside a spec (``openai:URL#name[?temperature=T]`` -> ``name``; else the spec itself)."""
    from evoharness.model_specs import model_name as name

    return name(model_spec)


def with_gateway_usage(traj: Trajectory, usage: RolloutUsage) -> Trajectory:
    """``traj`` with the gateway's token counts as its usage; what the agent itself reported is kept in meta."""
    agent = {"prompt_tokens": traj.usage.prompt_tokens, "completion_tokens": traj.usage.completion_tokens}
    traj.usage = traj.usage.model_copy(update={"prompt_tokens": usage.prompt_tokens,
                                               "completion_tokens": usage.completion_tokens})
    meta = usage.as_meta()
    meta.pop("label", None)
    traj.meta["gateway"] = meta | {"agent_reported": agent}
    return traj


def with_user_usage(traj: Trajectory, usage: RolloutUsage) -> Trajectory:
    """``traj`` with its simulated user's gateway counts in ``meta["gateway"]["user"]`` (not its usage)."""
    meta = usage.as_meta()
    meta.pop("label", None)
    traj.meta["gateway"] = traj.meta.get("gateway", {}) | {"user": meta}
    return traj


# the gateway's reasons once its retries ran out (unreachable, timed out, 408/429/5xx every time), or a reply that
# is no JSON object (a proxy's error page)
_DOWN = re.compile(r"unreachable after|timed out after|^upstream HTTP \d+ after \d+ attempts|not a JSON object"
                   r"|no chat completion")


def endpoint_down(trajs: list[Trajectory]) -> str | None:
    """The gateway's reason when no rollout got a single reply from its model endpoint (agent or
    simulated user) because the endpoint was unreachable, timed out, kept refusing (408, 429, 5xx) until the
    retries ran out, or replied with no JSON object or a 200 with no chat completion in it; None otherwise.

    One rollout whose endpoint answered keeps the others' failures as data (scored failed rollouts).
    """
    reasons = []
    for traj in trajs:
        gw = traj.meta.get("gateway")
        if not isinstance(gw, dict):
            return None
        lanes = [gw] + ([gw["user"]] if isinstance(gw.get("user"), dict) else [])
        down = [lane.get("last_error", "") for lane in lanes
                if lane.get("requests", 0) > 0 and lane.get("errors", 0) >= lane.get("requests", 0)
                and _DOWN.search(str(lane.get("last_error", "")))]
        if not down:
            return None
        reasons.append(down[0])
    return reasons[0] if reasons else None
