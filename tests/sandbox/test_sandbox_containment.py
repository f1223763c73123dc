"""The bubblewrap sandbox contains bad payloads: network, secrets, writes, fork bombs, memory, hangs."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import evoharness
from evoharness.errors import InfraError
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.models import Limits, SandboxResult
from tests.sandbox.conftest import HANG, TWO_CHILDREN_OVER_THE_MEMORY

SOURCE = Path(evoharness.__file__).resolve().parent  # mounted read-only in the sandbox


def test_no_network_not_even_the_hosts_loopback(run_py):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(5)
    t = threading.Thread(target=lambda: accepted.append(_accept(server)))
    t.start()
    r = run_py(
        "import socket\n"
        f"for addr in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=2); print('CONNECTED', addr)\n"
        "    except OSError as e:\n"
        "        print('refused', addr, e.errno)\n"
    )
    t.join()
    server.close()
    assert r.returncode == 0, r.stderr
    assert "CONNECTED" not in r.stdout
    assert r.stdout.count("refused") == 2
    assert accepted == [None]  # the host's listener never saw a connection


def _accept(server: socket.socket):
    try:
        return server.accept()
    except TimeoutError:
        return None


def test_host_secrets_and_ssh_keys_are_invisible(run_py, monkeypatch):
    home = Path(os.environ["HOME"])  # the per-test HOME from tests/conftest.py
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    monkeypatch.setenv("EVO_FAKE_SECRET", "hunter2-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-host-key")
    r = run_py(
        "import os, pathlib\n"
        "print(sorted(os.environ.items()))\n"
        f"for p in [pathlib.Path.home() / '.ssh', pathlib.Path({str(home)!r}) / '.ssh' / 'id_ed25519',\n"
        "          pathlib.Path('/root/.ssh'), pathlib.Path('/proc/1/environ')]:\n"
        "    try:\n"
        "        print('READ', p, p.read_text() if p.is_file() else list(p.iterdir()))\n"
        "    except OSError as e:\n"
        "        print('denied', p, e.errno)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "hunter2-secret" not in r.stdout and "sk-fake-host-key" not in r.stdout
    assert "PRIVATE-KEY-MATERIAL" not in r.stdout
    assert "EVO_FAKE_SECRET" not in r.stdout and "'HOME', '/tmp'" in r.stdout


def test_allow_listed_env_is_passed(run_py):
    r = run_py("import os; print(os.environ['EVO_ALLOWED'])", env={"EVO_ALLOWED": "yes-42"})
    assert r.stdout.strip() == "yes-42"


def test_writes_outside_the_workdir_fail_and_leave_the_host_untouched(run_py, dirs, tmp_path):
    harness, work = dirs
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)
    targets = ["/harness/lessons.md", "/harness/new.py", f"{outside}/pwned", "/etc/pwned", "/usr/pwned",
               str(SOURCE / "pwned")]
    r = run_py(
        "import pathlib\n"
        f"for t in {targets!r}:\n"
        "    try:\n"
        "        pathlib.Path(t).write_text('x'); print('WROTE', t)\n"
        "    except OSError as e:\n"
        "        print('blocked', t, e.errno)\n"
        "pathlib.Path('/scratch/result.txt').write_text('ok')\n"
        "pathlib.Path('/tmp/private').write_text('ok')\n"
    )
    assert r.returncode == 0, r.stderr
    assert "WROTE" not in r.stdout
    assert (harness / "lessons.md").read_text() == "be careful\n"
    assert not (harness / "new.py").exists() and not (outside / "pwned").exists()
    assert not (SOURCE / "pwned").exists()
    assert (work / "result.txt").read_text() == "ok"  # the one writable place works
    assert not Path("/tmp/private").exists()  # /tmp is private to the sandbox


def _procs_in_uid_range(lo: int, hi: int) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            except (OSError, IndexError):
                continue
            if lo <= uid < hi:
                n += 1
    return n


def test_fork_bomb_is_bounded_and_fully_killed(dirs):
    lo = 400_000 + (os.getpid() % 1000) * 100  # uids of this test alone (other suites may run beside it)
    sb = BwrapSandbox(uid_base=lo, uid_span=100)
    limits_before = {r: resource.getrlimit(r) for r in (resource.RLIMIT_NPROC, resource.RLIMIT_AS)}
    start = time.monotonic()
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = sb.run([sys.executable, "-c", bomb], harness_dir=dirs[0], workdir=dirs[1], env={},
               limits=Limits(pids=8, wall_seconds=3, cpu_seconds=10))
    assert r.timed_out and r.limit == "wall"
    assert time.monotonic() - start < 10
    time.sleep(0.3)
    if os.geteuid() == 0:  # the sandbox ran as a uid of its own: none of its processes survive
        assert _procs_in_uid_range(lo, lo + 100) == 0
    # the calling process is unaffected: same limits, and it can still start processes
    assert {r: resource.getrlimit(r) for r in limits_before} == limits_before
    assert subprocess.run(["true"]).returncode == 0


def test_fork_bomb_that_gives_up_reports_the_pids_limit(run_py):
    r = run_py("import os\nfor _ in range(100):\n    os.fork() or __import__('time').sleep(2)\n",
               limits=Limits(pids=8, wall_seconds=10))
    assert r.limit == "pids", r


def test_four_gigabytes_cannot_be_allocated(run_py):
    r = run_py("b = bytearray(4 * 1024**3); print('ALLOCATED')", limits=Limits(memory_mb=1024, wall_seconds=20))
    assert "ALLOCATED" not in r.stdout
    assert r.limit == "memory" and r.returncode != 0


def test_a_memory_hit_then_a_wall_timeout_is_recorded_as_both(run_py):
    """Two children each under the address-space limit, together over the sandbox's cgroup: one is OOM-killed; the
    parent then waits past the wall. It was recorded as the wall limit alone, the memory hit lost."""
    r = run_py(TWO_CHILDREN_OVER_THE_MEMORY + HANG, limits=Limits(memory_mb=160, wall_seconds=6))
    assert "-9" in r.stdout, r  # the kernel killed one of them
    assert r.timed_out and r.limit == "memory", r
    reason = r.reason()
    assert reason.startswith("wall-time limit hit, ended after 6.") and "the memory limit was hit before it" in reason


def test_spinning_forever_is_killed_at_the_wall_limit(run_py):
    start = time.monotonic()
    r = run_py("import subprocess\nsubprocess.Popen(['sleep', '600'])\nwhile True: pass",
               limits=Limits(wall_seconds=1.5))
    assert r.timed_out and 1.4 < r.wall_seconds < 5
    assert time.monotonic() - start < 6


def test_cpu_limit(run_py):
    r = run_py("while True: pass", limits=Limits(cpu_seconds=1, wall_seconds=20))
    assert r.limit == "cpu" and not r.timed_out


def test_a_status_above_128_names_a_signal_only_where_it_can_mean_one(run_py, dirs):
    """bwrap reports a child killed by signal N as 128 + N, so there a status above 128 is either; a plain
    process's status is its own: one that exits 143 or 152 was not killed by SIGTERM or SIGXCPU."""
    from evoharness.sandbox.base import ProcessSandbox

    killed = run_py("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    exited = run_py("import sys; sys.exit(143)")
    assert killed.reason() == exited.reason() == "exit 143 (killed by SIGTERM, or exited 143)", killed.reason()
    plain = ProcessSandbox()

    def run(code: str) -> SandboxResult:
        return plain.run([sys.executable, "-c", code], harness_dir=dirs[0], workdir=dirs[1], env={},
                         limits=Limits(wall_seconds=20))

    assert run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)").reason() == "killed by SIGTERM"
    assert run("import sys; sys.exit(143)").reason() == "exit 143"
    xcpu = run("import sys; sys.exit(128 + 24)")  # the status SIGXCPU has through a shell: no cpu limit here
    assert xcpu.reason() == "exit 152" and xcpu.limit is None
    shelled = plain.run(["/bin/sh", "-c", f"{sys.executable} -c 'import os; os.abort()'; exit $?"],
                        harness_dir=dirs[0], workdir=dirs[1], env={}, limits=Limits(wall_seconds=20))
    assert shelled.reason().startswith("exit 134 (killed by SIGABRT, or exited 134)"), shelled.reason()


@pytest.mark.parametrize("tool", ["/nonexistent/bwrap"])
def test_missing_backend_raises_infra_error(tool, dirs):
    sb = BwrapSandbox(bwrap=tool)
    with pytest.raises(InfraError, match="not found"):
        sb.run(["true"], harness_dir=dirs[0], workdir=dirs[1], env={}, limits=Limits())


def test_plain_process_backend_still_strips_the_environment(dirs, monkeypatch):
    from evoharness.sandbox.base import ProcessSandbox

    monkeypatch.setenv("EVO_FAKE_SECRET", "hunter2-secret")
    r = ProcessSandbox().run([sys.executable, "-c", "import os; print(sorted(os.environ))"], harness_dir=dirs[0],
                             workdir=dirs[1], env={"KEEP": "1"}, limits=Limits(wall_seconds=20))
    assert r.returncode == 0 and "EVO_FAKE_SECRET" not in r.stdout and "'KEEP'" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root here")
def test_a_cgroup_asked_again_sees_a_limit_hit_since_its_last_answer():
    """A warm worker asks after every rollout, through counter files kept open: a hit after the first answer is
    seen by the next one, and closing the cgroup still removes it."""
    from evoharness.sandbox.containment import cgroup_layout, sandbox_cgroup

    if cgroup_layout() is None:
        pytest.skip("no writable memory+pids cgroup here")
    with sandbox_cgroup(Limits(pids=4)) as cg:
        assert cg is not None
        assert cg.limit_hit() is None and cg.limit_hit() is None  # asked twice before anything happened
        bomb = "import os, time\nfor _ in range(20):\n    try:\n        os.fork() or time.sleep(1)\n" \
               "    except OSError:\n        pass\n"
        subprocess.run([*cg.prefix(), sys.executable, "-c", bomb], timeout=30, check=False)
        assert cg.limit_hit() == "pids"
        dirs = list(cg.dirs.values())
    assert not any(d.exists() for d in dirs)


def test_an_interpreter_reached_through_a_symlinked_venv_runs_by_the_path_the_host_gives_it(tmp_path, monkeypatch):
    """A worktree whose .venv links another checkout's: the sandbox bound only the real path, so an agent command
    naming sys.executable as the host spells it failed 'not found' (exit 127) in every rollout."""
    from evoharness.sandbox.bwrap import BwrapSandbox

    real = Path(sys.prefix).resolve()
    link = tmp_path / "venv-link"
    link.symlink_to(real, target_is_directory=True)
    monkeypatch.setattr(sys, "prefix", str(link))
    monkeypatch.setattr(sys, "exec_prefix", str(link))
    harness, work = tmp_path / "h", tmp_path / "w"
    harness.mkdir(mode=0o755)
    work.mkdir()
    tmp_path.chmod(0o755)
    python = link / "bin" / Path(sys.executable).name
    result = BwrapSandbox().run([str(python), "-c", "print('ran')"], harness_dir=harness, workdir=work, env={},
                                limits=Limits(wall_seconds=60))
    assert result.ok and result.stdout.strip() == "ran", result.reason()
