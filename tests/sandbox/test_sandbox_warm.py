"""Warm bwrap workers: one sandbox per slot and commit, a forked child per rollout, nothing carried over."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
import pytest

from evoharness.errors import InfraError
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.sandbox.warm import WarmPool, WarmWorker

# Each rollout looks for what an earlier rollout of the same worker could have left -- a module global,
# an import, a System V shared memory segment, a POSIX message queue, a file in /tmp or /dev/shm (not
# writable under bwrap), anything in /scratch beside its own directory, a live process, any process beside
# it and its server -- raises naming it, then leaves all of them.
LEAKY = '''import builtins, ctypes, os, subprocess, sys, time
def before_model(messages, ctx):
    if ctx.get("step", 0) > 0:
        return None
    found = []
    libc = ctypes.CDLL(None)
    if libc.shmget(0x5EA1, 0, 0) >= 0:
        found.append("ipc")
    libc.shmget(0x5EA1, 4096, 0o1000 | 0o600)
    rt = ctypes.CDLL("librt.so.1")  # POSIX message queues: refused by the sandbox's seccomp filter
    if rt.mq_open(b"/evoleak", os.O_RDWR, 0, None) >= 0:
        found.append("mqueue")
    rt.mq_open(b"/evoleak", os.O_CREAT | os.O_RDWR, 0o600, None)
    if getattr(builtins, "_leak_marker", False):
        found.append("global")
    if "leaky_probe_module" in sys.modules:
        found.append("module")
    for path in ("/tmp/leak", "/dev/shm/leak"):
        if os.path.exists(path):
            found.append(path)
    # /scratch holds this rollout's own directory and nothing else (writable itself only in a user namespace)
    mine = os.path.basename(os.getcwd())
    found += [f"/scratch/{n}" for n in sorted(os.listdir("/scratch")) if n != mine and os.getcwd() != "/scratch"]
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and b"9999" in open(f"/proc/{p}/cmdline", "rb").read():
                found.append("process")
                break
        except OSError:
            pass
    # nothing else alive beside it: not an earlier rollout's process, not a later rollout's (a pre-forked
    # child must not exist while this one runs: this one could signal it, and so fail the next rollout)
    if any(p.isdigit() and int(p) not in (1, os.getpid(), os.getppid()) for p in os.listdir("/proc")):
        found.append("neighbour")
    builtins._leak_marker = True
    sys.modules["leaky_probe_module"] = sys
    for path in ("/tmp/leak", "/dev/shm/leak", "/scratch/warm.json", "/scratch/leak"):
        try:
            open(path, "w").write("x")
        except OSError:
            pass
    try:  # a directory the host (the same uid, unprivileged) cannot list, holding a file
        os.makedirs("/scratch/locked", exist_ok=True)
        open("/scratch/locked/leak", "w").write("x")
        os.chmod("/scratch/locked", 0)
    except OSError:
        pass
    sleeper = subprocess.Popen(["sleep", "9999"], start_new_session=True)
    # Popen returns once the child's exec has begun, not ended: until it ends the child's cmdline reads empty (most
    # reads right after Popen, on Linux 6.18), and under load a next rollout's look at /proc could come first
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            if b"9999" in open(f"/proc/{sleeper.pid}/cmdline", "rb").read():
                break
        except OSError:
            break
        time.sleep(0.005)
    if found:
        raise RuntimeError("LEAK " + ",".join(found))
    return None
'''

KILLS_ITS_WORKER = '''import os, signal
def before_model(messages, ctx):
    if ctx.get("step", 0) == 0 and "{crash}" in str(messages):
        os.kill(os.getpid(), signal.SIGSEGV)  # the rollout's own process crashes
    if ctx.get("step", 0) == 0 and "{task}" in str(messages):
        os.kill(os.getppid(), signal.SIGKILL)  # the fork server
    return None
'''


def _requests(commit: str, n: int, seeds: int = 1) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:n]
    return [RolloutRequest(task_id=t, harness_commit=commit, seed=s, rollout=s) for t in tasks for s in range(seeds)]


def _leaks(trajs) -> list[str]:
    return [e.detail for t in trajs for e in t.events if "LEAK" in (e.detail or "")]


def test_one_warm_worker_serves_every_batch_of_its_commit(tmp_path):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(repo.main_head(), 2, seeds=2)
    plain = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None).run(reqs)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=2) as ex:
        first, second = ex.run(reqs), ex.run(reqs)
        assert ex.warm_starts == 1  # 8 rollouts in 4 batches over two runs: one sandbox start
        cost = ex.warm_cost  # the server's account: every rollout's child, and its own start
        assert cost["rollouts"] == 8 and cost["start_cpu_s"] > 0.05
        assert cost["child_cpu_s"] > 0 and cost["server_cpu_s"] > 0 and cost["child_minflt"] > 8 * 50
    for a, b, c in zip(plain, first, second, strict=True):
        assert (a.score, a.final_answer, a.messages) == (b.score, b.final_answer, b.messages)
        assert (b.score, b.messages) == (c.score, c.messages)
        assert not b.meta.get("rollout_failure")


@pytest.mark.parametrize("fork", ["batch", "commit"])
def test_nothing_of_one_rollout_reaches_the_next(tmp_path, fork, commit_middleware):
    # with "commit" (opt-in) batches of 2 over two runs: a commit's child would serve them all, but each rollout of
    # this probe leaves something the child or the server checks, so each ends its child and the sandbox is swept;
    # the next rollout, in this batch, the next or the next run (a later look), finds nothing of these kinds either
    repo = init_harness(tmp_path / "h")
    reqs = _requests(commit_middleware(repo, "leaky.py", LEAKY), 3)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=8 if fork == "batch" else 2, warm_fork=fork) as ex:
        warm = ex.run(reqs) + ex.run(reqs)
        assert ex.warm_starts == 1 and ex.warm_cost["child_forks"] == 6  # a fresh child for each rollout
        # the probe can see leaks: one process running the batch (the Docker-style path) carries them over
        shared = ex._run_batched(reqs, ex._batch)
    assert _leaks(warm) == []
    assert not [t.task_id for t in warm if t.meta.get("rollout_failure")]  # each ran its probe (no vacuous pass)
    # every rollout but a batch's first finds the leaks: batches of 8 (one of 3) or of 2 (2 + 1)
    assert len(_leaks(shared)) == {"batch": 2, "commit": 1}[fork]
    assert all("LEAK ipc,global,module,/tmp/leak,process" in leak for leak in _leaks(shared)), _leaks(shared)


def test_the_process_the_probe_leaves_reads_as_itself_at_once(tmp_path):
    """The look above finds "process" only if the leaker's sleep reads as one: the probe returned as soon as Popen did,
    before the exec had put the arguments in place, and a look at once read an empty cmdline in 5 to 81 of 100 calls
    (bwrap, load ~25) -- at load ~15 the next rollout's look once came that early ("neighbour" without "process")."""
    look = LEAKY + """
import signal
unread = 0
for _ in range(100):
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    try:
        before_model([], {"step": 0})
    except RuntimeError:
        pass  # LEAK: what the earlier calls left
    new = [p for p in os.listdir("/proc") if p.isdigit() and p not in before]
    unread += not any(b"9999" in open(f"/proc/{p}/cmdline", "rb").read() for p in new)
    for p in new:
        os.kill(int(p), signal.SIGKILL)
        os.waitpid(int(p), 0)
print("unread", unread)
"""
    harness, work = tmp_path / "h", tmp_path / "w"
    harness.mkdir(mode=0o755)
    work.mkdir()
    tmp_path.chmod(0o755)
    r = BwrapSandbox().run([sys.executable, "-c", look], harness_dir=harness, workdir=work, env={},
                           limits=Limits(wall_seconds=120))
    assert r.stdout.split() == ["unread", "0"], (r.stdout, r.stderr[-500:])


def test_a_crash_or_a_killed_worker_fails_only_that_rollout_with_the_signal_named(tmp_path, monkeypatch,
                                                                                  commit_middleware):
    from evoharness.envs import get_environment

    accounts = []  # each rollout's account as the executor reads it: a killed server's rollout has none
    run = WarmWorker.run

    def run_and_note(self, payload, **kw):
        out = run(self, payload, **kw)
        accounts.append(dict(self.last_cost))
        return out

    monkeypatch.setattr(WarmWorker, "run", run_and_note)
    repo = init_harness(tmp_path / "h")
    crash, victim = get_environment("synthetic").list_tasks("dev")[:2]
    middleware = KILLS_ITS_WORKER.replace("{task}", victim.prompt[:40]).replace("{crash}", crash.prompt[:40])
    reqs = _requests(commit_middleware(repo, "kill.py", middleware), 3)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=8) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_starts == 2  # a crashed child leaves its server up; a killed server is replaced
    failed = [t.task_id for t in trajs if t.meta.get("rollout_failure")]
    assert failed == [crash.id, victim.id]
    reasons = [" ".join(e.detail for e in t.events) for t in trajs[:2]]
    assert "worker failed: killed by SIGSEGV" in reasons[0], reasons[0]
    # bwrap's status, 128 + 9: the same as a plain exit 137, so both are named
    assert "warm worker exited, exit 137 (killed by SIGKILL, or exited 137)" in reasons[1], reasons[1]
    assert accounts[0]["child_cpu_s"] > 0 and accounts[1] == {} and accounts[2]["child_cpu_s"] > 0, accounts


def test_each_rollout_has_its_own_wall_limit_and_the_worker_survives(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    spin = "def before_model(messages, ctx):\n    while True:\n        pass\n"
    reqs = _requests(commit_middleware(repo, "spin.py", spin), 2)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       limits=Limits(wall_seconds=1.5, cpu_seconds=30)) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_starts == 1
    for t in trajs:
        assert t.termination.value == "timeout" and t.score == 0.0
        assert any("wall-time" in e.detail for e in t.events)


def test_a_rollout_over_its_cpu_limit_fails_alone(tmp_path, commit_middleware):
    from evoharness.envs import get_environment

    repo = init_harness(tmp_path / "h")
    victim = get_environment("synthetic").list_tasks("dev")[0]
    spin = (f"def before_model(messages, ctx):\n    if {victim.prompt[:40]!r} in str(messages):\n"
            "        while True:\n            pass\n")
    reqs = _requests(commit_middleware(repo, "spin.py", spin), 2)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                       limits=Limits(wall_seconds=60, cpu_seconds=1)) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_starts == 1  # the server's own CPU limit is not the rollout's
    assert [bool(t.meta.get("rollout_failure")) for t in trajs] == [True, False]
    assert any("cpu limit" in e.detail for e in trajs[0].events)


def test_a_rollout_that_raises_its_own_cpu_limit_in_a_batch_child_still_fails_over_it(tmp_path, commit_middleware):
    """A batch child's hard CPU limit covers its whole batch, so harness code may raise its soft limit to it (or
    catch SIGXCPU): the rollout that ran past its own cpu_seconds fails all the same, as a forked child would."""
    from evoharness.envs import get_environment

    repo = init_harness(tmp_path / "h")
    victim = get_environment("synthetic").list_tasks("dev")[0]
    spin = ("import resource, signal, time\ndef before_model(messages, ctx):\n"
            f"    if {victim.prompt[:40]!r} in str(messages):\n"
            "        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
            "        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))\n"
            "        end = time.process_time() + 3\n"
            "        while time.process_time() < end:\n            pass\n")
    reqs = _requests(commit_middleware(repo, "spin.py", spin), 2)
    for fork in ("batch", "rollout", "commit"):
        with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1, batch_size=4,
                           limits=Limits(wall_seconds=60, cpu_seconds=1), warm_fork=fork) as ex:
            trajs = ex.run(reqs)
        assert [bool(t.meta.get("rollout_failure")) for t in trajs] == [True, False], fork  # batch: was [False, False]
        # a forked child's hard limit is its own cpu_seconds + 2: raised to it, the kernel kills it there (SIGKILL);
        # a batch or commit child's covers its CHILD_ROLLOUTS rollouts, and each rollout is held to its own soft one
        words = "killed by SIGKILL" if fork == "rollout" else "cpu limit hit"
        assert any(words in e.detail for e in trajs[0].events), (fork, trajs[0].events)


def _worker(repo, limits: Limits | None = None) -> WarmWorker:
    return WarmWorker(BwrapSandbox(), sha=None, tree=repo.path, env={}, limits=limits or Limits(), sockets=[],
                      warm={"env_spec": "synthetic", "model_spec": "scripted:weak"})


def test_the_pool_stops_idle_workers_and_a_plain_directorys_worker_makes_room(tmp_path):
    repo = init_harness(tmp_path / "h")
    made: list[WarmWorker] = []

    def start(sha):
        made.append(_worker(repo))  # sha None: it shows the directory itself, and only that
        return made[-1]

    pool = WarmPool(start, slots=1, idle_s=0.3)
    try:
        a = pool.acquire(None)
        pool.release(a)
        assert pool.acquire(None) is a  # the same: reused
        pool.release(a)
        b = pool.acquire("b" * 40)  # one slot, a worker that cannot show b: a is stopped
        assert a.live.proc.poll() is not None and b is not a
        pool.release(b)
        deadline = time.monotonic() + 10
        while b.live.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.live.proc.poll() is not None  # idle past idle_s: stopped
    finally:
        pool.close()


# Lists what /harness holds, tries to write there, and fails the rollout saying both.
SEES = """import os
def before_model(messages, ctx):
    if ctx.get("step", 0) == 0:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            open(os.path.join(root, "planted"), "w").write("x")
            wrote = "wrote"
        except OSError:
            wrote = "read-only"
        raise RuntimeError("SEES " + root + " " + ",".join(sorted(n for n in os.listdir(root) if n.startswith("mark")))
                           + " " + wrote)
    return None
"""


def test_one_warm_worker_serves_several_commits_each_seeing_only_its_own_tree_read_only(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    (repo.path / "mark_a").write_text("a")
    first = commit_middleware(repo, "sees.py", SEES)
    (repo.path / "mark_a").unlink()
    (repo.path / "mark_b").write_text("b")
    second = commit_middleware(repo, "sees.py", SEES + "\n")
    reqs = [*_requests(first, 2), *_requests(second, 2), *_requests(first, 1)]
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=8) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_starts == 1  # three switches of commit, one sandbox
    seen = [next(e.detail for e in t.events if "SEES" in (e.detail or "")).split("SEES ", 1)[1] for t in trajs]
    assert [s.split()[:3] for s in seen] == [["/harness", m, "read-only"] for m in
                                             ("mark_a", "mark_a", "mark_b", "mark_b", "mark_a")], seen
    assert not (repo.path / "planted").exists()


def test_nothing_of_one_commits_rollout_reaches_another_commits_in_a_user_namespace(tmp_path, commit_middleware):
    """As an ordinary user runs it (bwrap makes a user namespace; simulated here as root): the sandbox's uid
    owns /scratch, so a rollout can write there -- e.g. over the warm.json the server read at start -- and
    make a directory the host, the same uid, cannot list. None of it may reach the next rollout, here of
    another commit on the same worker."""
    repo = init_harness(tmp_path / "h")
    first = commit_middleware(repo, "leaky.py", LEAKY)
    second = commit_middleware(repo, "leaky.py", LEAKY + "\n")
    sandbox = BwrapSandbox()
    sandbox.privileged = False  # a user namespace, as for an ordinary user (the host stays root here)
    try:
        sandbox.check()
    except InfraError as e:  # root in a container that refuses user namespaces: the mode cannot be simulated
        if os.geteuid() != 0:
            raise
        pytest.skip(f"bwrap cannot make a user namespace here as root: {e}")
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=sandbox, workers=1, batch_size=8) as ex:
        trajs = ex.run([*_requests(first, 1), *_requests(second, 1), *_requests(first, 1)])
        assert ex.warm_starts == 1
    assert _leaks(trajs) == []
    assert not [t.task_id for t in trajs if t.meta.get("rollout_failure")]  # each ran its probe


def test_a_dead_rollouts_unlistable_directory_is_removed_by_the_same_uid(tmp_path):
    """What an unprivileged sandbox leaves in /scratch is the host's own uid's: ``forget`` opens up a directory
    made unreadable (0000, nested) and removes it (run as an unprivileged uid in a child: root ignores modes)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged uid")
    from evoharness.sandbox.warm import _remove_tree

    root = Path(tempfile.mkdtemp(prefix="evoharness-test-scratch-"))  # under /tmp: reachable by nobody
    os.chown(root, 65534, 65534)
    pid = os.fork()
    if pid == 0:  # the child: nobody, as the sandbox and the host would both be
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            deep = root / "7" / "locked" / "inner"
            deep.mkdir(parents=True)
            (deep / "leak").write_text("x")
            (root / "7" / "ro").mkdir()
            (root / "7" / "ro" / "f").write_text("x")
            os.chmod(deep, 0)
            os.chmod(deep.parent, 0)
            os.chmod(root / "7" / "ro", 0o500)
            _remove_tree(root / "7")
            code = 0 if not (root / "7").exists() else 3
        except BaseException as e:  # noqa: BLE001 -- said on stderr, exit 1
            print(f"child: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert list(root.iterdir()) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_worker_shows_the_commit_it_is_handed_and_a_plain_directory_only_itself(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    (repo.path / "mark_a").write_text("a")
    first = commit_middleware(repo, "a.py", "")
    (repo.path / "mark_a").unlink()
    second = commit_middleware(repo, "b.py", "")
    tree_a, tree_b = tmp_path / "a", tmp_path / "b"
    for sha, tree in ((first, tree_a), (second, tree_b)):
        tree.mkdir()
        git.Repo(repo.path).git.archive(sha, "-o", str(tmp_path / "t.tar"))
        subprocess.run(["tar", "-xf", str(tmp_path / "t.tar"), "-C", str(tree)], check=True)
    (tree_b / "link").symlink_to("/etc/hostname")  # copied as a link, never followed on the host
    w = WarmWorker(BwrapSandbox(), sha=first, tree=tree_a, env={}, limits=Limits(), sockets=[],
                   warm={"env_spec": "synthetic", "model_spec": "scripted:weak"})
    try:
        assert (w.view / "mark_a").is_file() and w.can_show(second) and not w.can_show(None)
        w.show(second, tree_b)
        assert not (w.view / "mark_a").exists() and (w.view / "link").is_symlink() and w.switches == 1
        assert sorted(p.name for p in w.view.iterdir()) == sorted(p.name for p in tree_b.iterdir())
    finally:
        w.close()
    assert not w.view.exists()
    plain = _worker(repo)
    try:
        assert plain.view is None and plain.can_show(None) and not plain.can_show(first)
    finally:
        plain.close()


def test_the_fork_server_refuses_to_run_outside_a_pid_namespace(tmp_path):
    (tmp_path / "warm.json").write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "evoharness.agent.worker", "--serve", str(tmp_path / "warm.json")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "private PID namespace" in proc.stderr


class _FakeWorker:
    def __init__(self, sha):
        self.sha, self.alive, self.closed, self.idle_since, self.shown = sha, True, False, 0.0, [sha]

    def can_show(self, sha):
        return sha is not None

    def show(self, sha, tree=None):
        self.sha = sha
        self.shown.append(sha)

    def close(self):
        self.closed = True


def test_the_pool_hands_an_idle_worker_of_another_commit_over_instead_of_starting_one():
    made: list[_FakeWorker] = []

    def start(sha):
        made.append(_FakeWorker(sha))
        return made[-1]

    pool = WarmPool(start, slots=2, idle_s=60)
    try:
        for sha in ("a", "b", "a", "c"):  # a round's baseline, candidates and variants in turn: one start
            w = pool.acquire(sha)
            w.show(sha)
            pool.release(w)
        assert len(made) == 1 and made[0].shown == ["a", "a", "b", "a", "c"]
        one, two = pool.acquire("a"), pool.acquire("b")  # two at once: a second worker, never more than slots
        assert len(made) == 2 and one is not two
        two.show("b")
        pool.release(one)
        pool.release(two)
        assert pool.acquire("b") is two  # the idle worker already showing the commit is preferred
        made[0].alive = False
        pool.release(two)
        pool.acquire("a")  # a dead idle worker is stopped, never handed out
        assert made[0].closed
    finally:
        pool.close()


# ---- one forked child per batch (sandbox.warm_fork = "batch", the default) --------------------------------

# Ends each rollout at once with what it saw as its answer: how many times this module's hook ran in this
# import of it (1: imported afresh for the rollout), the process it ran in, and whether an earlier rollout's
# mark on a standard module the batch child does not check (``string``) is there; then leaves that mark.
PROBE = """import os, string
RUNS = []
def after_model(message, ctx):
    RUNS.append(1)
    seen = getattr(string, "_probe_mark", 0)
    string._probe_mark = seen + 1
    return {"role": "assistant", "content": f"PROBE runs={len(RUNS)} pid={os.getpid()} mark={seen}"}
"""

# Leaves one of everything the batch child checks for, after failing its rollout if an earlier one's is there.
LEAVES = """import atexit, builtins, os, signal, sys, threading, time
import evoharness.agent.loop
def before_model(messages, ctx):
    if ctx.get("step", 0) > 0:
        return None
    found = [name for name, there in (("builtins", hasattr(builtins, "_left")), ("module", "left_mod" in sys.modules),
             ("package", hasattr(evoharness.agent.loop, "_left")), ("environ", "LEFT" in os.environ),
             ("signal", signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)),
             ("thread", threading.active_count() > 1)) if there]
    builtins._left = 1
    sys.modules["left_mod"] = sys
    evoharness.agent.loop._left = 1
    os.environ["LEFT"] = "1"
    signal.signal(signal.SIGUSR1, lambda *a: None)
    atexit.register(print)
    os.open("/dev/null", os.O_RDONLY)
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    if found:
        raise RuntimeError("FOUND " + ",".join(found))
    return None
"""


def _probes(trajs) -> list[dict[str, int]]:
    out = []
    for t in trajs:
        assert (t.final_answer or "").startswith("PROBE "), (t.final_answer, t.events)
        out.append({k: int(v) for k, v in (w.split("=") for w in t.final_answer.split()[1:4])})
    return out


def test_a_batch_shares_one_child_with_fresh_harness_modules_and_the_same_results(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(repo.main_head(), 4, seeds=2)
    plain = LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=None).run(reqs)
    runs = {}
    for fork in ("batch", "rollout", "commit"):
        with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                           batch_size=4, warm_fork=fork) as ex:
            runs[fork] = ex.run(reqs)
            assert ex.warm_cost["rollouts"] == 8 and ex.warm_changed == {}
            # two batches of 4: one child each, one per rollout, or one for both (the commit's)
            assert ex.warm_cost["child_forks"] == {"batch": 2, "rollout": 8, "commit": 1}[fork], ex.warm_cost
    for a, b, c, d in zip(plain, runs["batch"], runs["rollout"], runs["commit"], strict=True):
        assert (a.score, a.final_answer, a.messages) == (b.score, b.final_answer, b.messages)
        assert (b.score, b.final_answer, b.messages, b.termination) == (c.score, c.final_answer, c.messages,
                                                                         c.termination)
        assert (b.score, b.final_answer, b.messages, b.termination) == (d.score, d.final_answer, d.messages,
                                                                         d.termination)
    probe = commit_middleware(repo, "probe.py", PROBE)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=3) as ex:
        seen = _probes(ex.run(_requests(probe, 3)))
        assert ex.warm_cost["child_forks"] == 1, ex.warm_changed
    assert {s["pid"] for s in seen} == {seen[0]["pid"]}  # one process ran the batch
    assert [s["runs"] for s in seen] == [1, 1, 1]  # the harness's modules were imported afresh for each rollout


def test_a_rollout_that_leaves_anything_in_a_batch_child_ends_it(tmp_path, commit_middleware):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(commit_middleware(repo, "leaves.py", LEAVES), 3)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=8) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_cost["child_forks"] == 3  # each rollout after one that left something: a fresh child
        changed = {name.split(" (")[0] for name in ex.warm_changed}
    assert [e.detail for t in trajs for e in t.events if "FOUND" in (e.detail or "")] == []
    assert not [t.task_id for t in trajs if t.meta.get("rollout_failure")]  # each ran its probe
    assert {"modules", "attributes", "environment", "signal handlers", "threads", "atexit handlers",
            "open files"} <= changed, ex.warm_changed


def test_what_the_batch_child_does_not_check_reaches_only_later_rollouts_of_its_own_batch(tmp_path, commit_middleware):
    # the limit of warm_fork = "batch", kept visible: a change inside a module the child does not check
    # (here an attribute set on ``string``) reaches the next rollouts of the same batch -- the same commit --
    # and nothing else: not the next batch, not another commit; with warm_fork = "rollout", not even those
    repo = init_harness(tmp_path / "h")
    probe = commit_middleware(repo, "probe.py", PROBE)
    other = commit_middleware(repo, "probe.py", PROBE + "\n")
    reqs = [*_requests(probe, 3), *_requests(other, 2)]
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=3) as ex:
        batch = [s["mark"] for s in _probes(ex.run(reqs))]
        assert ex.warm_starts == 1
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=3, warm_fork="rollout") as ex:
        alone = [s["mark"] for s in _probes(ex.run(reqs))]
    assert batch == [0, 1, 2, 0, 1]
    assert alone == [0, 0, 0, 0, 0]


def test_by_default_what_the_child_does_not_check_never_reaches_the_same_commits_next_batch(tmp_path,
                                                                                             commit_middleware):
    # the isolation the settings give a run by default (sandbox.warm_fork = "batch"): a change the child does not
    # check stays within its batch, so a commit's later batches -- its later verification looks -- start clean.
    # "commit" (opt-in) would carry it on: [0, 1, 2, 3]. Built as a run builds its executor (make_local_executor).
    from evoharness.sandbox.config import SandboxConfig
    from evoharness.sandbox.factory import make_local_executor

    repo = init_harness(tmp_path / "h")
    probe = commit_middleware(repo, "probe.py", PROBE)
    with make_local_executor(SandboxConfig(), repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(),
                             workers=1, batch_size=2, env={}) as ex:
        marks = [s["mark"] for s in _probes(ex.run(_requests(probe, 4)))]
    assert marks == [0, 1, 0, 1]


def test_a_rollout_that_writes_the_batch_childs_answer_pipe_fails_alone(tmp_path, commit_middleware):
    from evoharness.envs import get_environment

    victim = get_environment("synthetic").list_tasks("dev")[0]
    # writes a line that is no answer to every pipe the child holds (its answer pipe among them)
    forger = f"""import os
def before_model(messages, ctx):
    if ctx.get("step", 0) == 0 and {victim.prompt[:40]!r} in str(messages):
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
                    os.write(int(fd), b"not an answer\\n")
            except OSError:
                pass
    return None
"""
    repo = init_harness(tmp_path / "h")
    reqs = _requests(commit_middleware(repo, "forger.py", forger), 3)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=8) as ex:
        trajs = ex.run(reqs)
        assert ex.warm_starts == 1  # the server lives on
        assert ex.warm_cost["child_forks"] == 2  # the child that answered out of turn was ended
    assert [bool(t.meta.get("rollout_failure")) for t in trajs] == [True, False, False]
    assert any("worker failed: exit 1" in e.detail for e in trajs[0].events), [e.detail for e in trajs[0].events]


def test_a_commits_child_serves_its_next_batches_on_the_worker_and_never_another_commits(tmp_path, commit_middleware):
    # warm_fork = "commit" (opt-in; the default is "batch"): the child forked for a commit's first rollout on a
    # worker runs that commit's next batches too, so what the child does not check (a mark on ``string``) reaches
    # them as well -- the same commit's rollouts, on the same worker; a rollout of another commit ends the child,
    # and a commit shown again after it gets a fresh one. Harness modules are still imported afresh for every
    # rollout.
    repo = init_harness(tmp_path / "h")
    probe = commit_middleware(repo, "probe.py", PROBE)
    other = commit_middleware(repo, "probe.py", PROBE + "\n")
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=2, warm_fork="commit") as ex:
        first = _probes(ex.run(_requests(probe, 3)))  # two batches (2 + 1) of one commit
        again = _probes(ex.run(_requests(probe, 1)))  # a later run of the same commit: the same child still
        second = _probes(ex.run(_requests(other, 2)))
        third = _probes(ex.run(_requests(probe, 2)))
        assert ex.warm_starts == 1
        assert ex.warm_cost["child_forks"] == 3 and ex.warm_changed == {}, (ex.warm_cost, ex.warm_changed)
    assert [s["mark"] for s in first + again] == [0, 1, 2, 3]
    assert len({s["pid"] for s in first + again}) == 1
    assert [s["mark"] for s in second] == [0, 1] and [s["mark"] for s in third] == [0, 1]
    assert {s["pid"] for s in second}.isdisjoint({s["pid"] for s in first + third})
    assert [s["runs"] for s in first + again + second + third] == [1] * 8
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=2, warm_fork="batch") as ex:
        batch = [s["mark"] for s in _probes(ex.run(_requests(probe, 3)))]
    assert batch == [0, 1, 0]  # "batch": the child ends with its batch


# Ends each rollout at once with the first draw of Python's ``random`` the harness code makes.
DRAW = """import random
def after_model(message, ctx):
    return {"role": "assistant", "content": f"DRAW {random.random()!r}"}
"""


def test_a_rollouts_random_draws_follow_its_seed_in_every_fork_mode(tmp_path, commit_middleware):
    """CPython reseeds ``random`` from the OS in a forked child: harness code's draws differed at each rollout,
    though the docs promised each rollout the same starting state. Now a rollout's ``random`` is seeded from its
    seed, task and rollout: the same draws in a batch child, a child per rollout and a cold worker, run after run;
    other rollouts draw otherwise."""
    repo = init_harness(tmp_path / "h")
    reqs = _requests(commit_middleware(repo, "draw.py", DRAW), 2, seeds=2)
    answers = []
    for fork in ("batch", "rollout", "batch"):
        with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                           batch_size=4, warm_fork=fork) as ex:
            answers.append([t.final_answer for t in ex.run(reqs)])
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=2, warm_fork="commit") as ex:  # one child for both batches, and for a second run
        answers += [[t.final_answer for t in ex.run(reqs)], [t.final_answer for t in ex.run(reqs)]]
        assert ex.warm_cost["child_forks"] == 1, ex.warm_cost
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                       batch_size=4, warm=False) as ex:
        answers.append([t.final_answer for t in ex.run(reqs)])
    assert all(a and a.startswith("DRAW ") for a in answers[0]), answers[0]
    assert answers[1:] == [answers[0]] * 5
    assert len(set(answers[0])) == 4  # two tasks x two seeds: four draws
