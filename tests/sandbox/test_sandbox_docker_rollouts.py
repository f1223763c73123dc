"""Rollouts through the real agent worker in Docker: bad harnesses fail with reasons, good ones match bwrap,
and a warm container passes nothing from one rollout to the next."""

from __future__ import annotations

import os
import sys
import time

import pytest

from evoharness.harness_repo import gitops
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.docker import DockerSandbox
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not os.environ.get("EVOHARNESS_TEST_DOCKER"),
                       reason="EVOHARNESS_TEST_DOCKER not set (scripts/services.sh starts dockerd)"),
]


@pytest.fixture(scope="module")
def pooled():
    box = DockerSandbox(pool_size=2)
    box.check()
    yield box
    box.close()


def _requests(commit: str, n: int = 2) -> list[RolloutRequest]:
    from evoharness.envs import get_environment

    tasks = [t.id for t in get_environment("synthetic").list_tasks("dev")][:n]
    return [RolloutRequest(task_id=t, harness_commit=commit, seed=s, rollout=s) for t in tasks for s in (0, 1)]


@pytest.mark.slow
def test_docker_rollouts_give_the_same_trajectories_as_bwrap(tmp_path, pooled):
    repo = init_harness(tmp_path / "h")
    reqs = _requests(repo.main_head())
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=2) as ex:
        ref = ex.run(reqs)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=pooled, workers=2) as ex:
        pool = ex.run(reqs)
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=DockerSandbox(), workers=2,
                       batch_size=3) as ex:
        cold_batched = ex.run(reqs)
    for got in (pool, cold_batched):
        assert [t.task_id for t in got] == [r.task_id for r in reqs]
        for a, b in zip(ref, got, strict=True):
            assert not b.meta.get("rollout_failure"), b.meta
            assert (a.score, a.final_answer, a.messages, a.termination, a.events) == \
                (b.score, b.final_answer, b.messages, b.termination, b.events)
    assert {t.meta["sandbox"]["backend"] for t in pool} == {"docker"}


def _commit(repo, files: dict[str, str], msg: str) -> str:
    base = repo.main_head()
    tree = gitops.rewrite_tree(repo.repo, repo.repo.commit(base).tree, {k: v.encode() for k, v in files.items()})
    return gitops.make_commit(repo.repo, tree, msg, [base])


def test_bad_harnesses_become_failed_trajectories_with_reasons(tmp_path, pooled):
    repo = init_harness(tmp_path / "h")
    hook = "def before_model(messages, ctx):\n"
    shas = {
        "syntax": _commit(repo, {"middleware/bad.py": "def before_model(messages, ctx:\n    return None\n"}, "syntax"),
        "crash": _commit(repo, {"middleware/bad.py": hook + "    import os\n    os._exit(7)\n"}, "crash"),
        "hang": _commit(repo, {"middleware/bad.py": hook + "    import time\n    time.sleep(600)\n"}, "hang"),
        "write_harness": _commit(repo, {"middleware/bad.py": hook + "    open('/harness/lessons.md', 'w')\n"},
                                 "write"),
    }
    # The three that end on their own get a wall limit they never reach, however loaded the machine (a
    # worker's start in a container took over 6 s at load 18); the hang gets a short one, and must come back
    # far sooner than its 600 s sleep: killed at the limit, not waited out.
    ending, wall = ["syntax", "crash", "write_harness"], 4.0
    reqs = [RolloutRequest(task_id="contact_0", harness_commit=shas[n], seed=i) for i, n in enumerate(ending)]
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=pooled, workers=2,
                       limits=Limits(wall_seconds=300)) as ex:
        out = dict(zip(ending, ex.run(reqs), strict=True))
    with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=pooled, workers=1,
                       limits=Limits(wall_seconds=wall)) as ex:
        start = time.monotonic()
        (out["hang"],) = ex.run([RolloutRequest(task_id="contact_0", harness_commit=shas["hang"], seed=3)])
        took = time.monotonic() - start
    assert wall <= took < 120, took
    for name, traj in out.items():
        assert traj.final_answer is None and traj.score == 0.0, name
        assert traj.harness_commit == shas[name]
    reason = {n: " ".join(e.detail for e in t.events) for n, t in out.items()}
    assert "SyntaxError" in reason["syntax"] or "invalid syntax" in reason["syntax"], reason["syntax"]
    assert "exit 7" in reason["crash"] and out["crash"].termination == Termination.error, reason["crash"]
    assert out["hang"].termination == Termination.timeout and "wall-time limit" in reason["hang"]
    assert "Read-only file system" in reason["write_harness"]
    assert "pwned" not in (repo.path / "lessons.md").read_text()


def test_a_warm_container_keeps_nothing_of_the_previous_command(tmp_path):
    """Same container, two commands: the second sees no file, process, IPC object or work file of the first."""
    harness, w1, w2 = tmp_path / "h", tmp_path / "w1", tmp_path / "w2"
    for d in (harness, w1, w2):
        d.mkdir()
    tmp_path.chmod(0o755)
    harness.chmod(0o755)
    leave = ("import os, subprocess\n"
             "open('/tmp/left-behind', 'w').write('secret')\n"
             "os.makedirs('/tmp/d/e'); os.chmod('/tmp/d', 0)\n"
             "open('/dev/shm/shm-left', 'w').write('secret')\n"
             "open('/scratch/mine', 'w').write('w1')\n"
             "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
             "print(os.getuid())\n")
    look = ("import os\n"
            # the runtime's read-only mounts may lie below /tmp (a checkout in /tmp): they are no leftovers
            "mounts = [line.split()[4] for line in open('/proc/self/mountinfo')]\n"
            "def mine(d): return sorted(e for e in os.listdir(d)\n"
            "                           if not any((m + '/').startswith(f'{d}/{e}/') for m in mounts))\n"
            "print(mine('/tmp'), mine('/dev/shm'), mine('/scratch'))\n"
            "procs = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "print(sorted(open(f'/proc/{p}/cmdline').read().split('\\0')[0] for p in procs))\n"
            "print(os.getuid())\n")
    box = DockerSandbox(pool_size=1)
    try:
        r1 = box.run([sys.executable, "-c", leave], harness_dir=harness, workdir=w1, env={}, limits=Limits())
        (first,) = box._pool._idle
        r2 = box.run([sys.executable, "-c", look], harness_dir=harness, workdir=w2, env={}, limits=Limits())
        (second,) = box._pool._idle
    finally:
        box.close()
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    assert first.container.id == second.container.id  # the warm container was reused
    places, procs, uid = r2.stdout.splitlines()
    assert places == "[] [] []"  # /tmp, /dev/shm and /scratch are empty
    assert "sleep" in procs and procs.count("sleep") == 1  # only the container's own `sleep infinity`
    assert uid != r1.stdout.strip()  # each command its own uid
    assert (w1 / "mine").read_text() == "w1" and not (w2 / "mine").exists()
