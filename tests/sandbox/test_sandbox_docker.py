"""The Docker sandbox contains bad payloads, in a fresh container per run and in warm pooled ones.

Runs for real when EVOHARNESS_TEST_DOCKER is set (scripts/services.sh starts dockerd and builds
the image); skipped otherwise. Each containment test runs in both modes: ``cold`` (a container
per command) and ``pool`` (warm containers reused across tests, which also checks that nothing of
one command reaches the next).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from evoharness.errors import InfraError
from evoharness.sandbox.docker import DockerSandbox
from evoharness.sandbox.models import Limits
from tests.sandbox.conftest import EXIT_ON_A_KILL, HANG, TWO_CHILDREN_OVER_THE_MEMORY

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not os.environ.get("EVOHARNESS_TEST_DOCKER"),
                       reason="EVOHARNESS_TEST_DOCKER not set (scripts/services.sh starts dockerd)"),
]


@pytest.fixture(scope="module")
def boxes():
    cold, pool = DockerSandbox(), DockerSandbox(pool_size=1)
    cold.check()  # no skipping past here: an engine or image that does not work fails loudly
    yield {"cold": cold, "pool": pool}
    pool.close()


@pytest.fixture(params=["cold", "pool"])
def box(request, boxes) -> DockerSandbox:
    return boxes[request.param]


@pytest.fixture
def run_py(box, dirs):
    harness, work = dirs

    def run(code: str, limits: Limits | None = None, env: dict[str, str] | None = None, **kw):
        return box.run([sys.executable, "-c", code], harness_dir=harness, workdir=work, env=env or {},
                       limits=limits or Limits(wall_seconds=20), **kw)

    return run


def test_no_network_not_even_the_hosts_loopback(run_py):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    t = threading.Thread(target=lambda: accepted.append(_accept(server)))
    t.start()
    r = run_py(
        "import socket\n"
        f"for addr in [('127.0.0.1', {port}), ('1.1.1.1', 80), ('172.17.0.1', {port})]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=2); print('CONNECTED', addr)\n"
        "    except OSError as e:\n"
        "        print('refused', addr, e.errno)\n"
        "import os; print(sorted(os.listdir('/sys/class/net')))\n"
    )
    t.join()
    server.close()
    assert r.returncode == 0, r.stderr
    assert "CONNECTED" not in r.stdout and r.stdout.count("refused") == 3
    assert "['lo']" in r.stdout  # network_mode none: a loopback of its own, nothing else
    assert accepted == [None]


def _accept(server: socket.socket):
    try:
        return server.accept()
    except TimeoutError:
        return None


def test_host_secrets_and_ssh_keys_are_invisible(run_py, monkeypatch):
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    monkeypatch.setenv("EVO_FAKE_SECRET", "hunter2-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-host-key")
    r = run_py(
        "import os, pathlib\n"
        "print(sorted(os.environ.items()))\n"
        f"for p in [pathlib.Path({str(home)!r}) / '.ssh' / 'id_ed25519', pathlib.Path('/root/.ssh'),\n"
        "          pathlib.Path('/etc/shadow'), pathlib.Path('/work/shared'), pathlib.Path('/var/run/docker.sock')]:\n"
        "    try:\n"
        "        print('READ', p, p.read_text() if p.is_file() else list(p.iterdir()))\n"
        "    except OSError as e:\n"
        "        print('denied', p, e.errno)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "hunter2-secret" not in r.stdout and "sk-fake-host-key" not in r.stdout
    assert "PRIVATE-KEY-MATERIAL" not in r.stdout and "EVO_FAKE_SECRET" not in r.stdout
    assert "READ" not in r.stdout and r.stdout.count("denied") == 5
    assert "'HOME', '/tmp'" in r.stdout


def test_allow_listed_env_is_passed(run_py):
    r = run_py("import os; print(os.environ['EVO_ALLOWED'], os.getuid() >= 300000)", env={"EVO_ALLOWED": "yes-42"})
    assert r.stdout.split() == ["yes-42", "True"], r


def test_writes_outside_the_workdir_fail_and_leave_the_host_untouched(run_py, dirs, tmp_path):
    harness, work = dirs
    (work / "request.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)
    targets = ["/harness/lessons.md", "/harness/new.py", f"{outside}/pwned", "/etc/pwned", "/usr/pwned",
               "/pwned", str(Path(sys.prefix) / "pwned")]
    r = run_py(
        "import pathlib\n"
        f"for t in {targets!r}:\n"
        "    try:\n"
        "        pathlib.Path(t).write_text('x'); print('WROTE', t)\n"
        "    except OSError as e:\n"
        "        print('blocked', t, e.strerror)\n"
        "print(pathlib.Path('/scratch/request.json').read_text())\n"
        "pathlib.Path('/scratch/result.txt').write_text('ok')\n"
        "pathlib.Path('/tmp/private').write_text('ok')\n"
    )
    assert r.returncode == 0, r.stderr
    assert "WROTE" not in r.stdout and "{}" in r.stdout
    assert "blocked /harness/lessons.md Read-only file system" in r.stdout
    assert (harness / "lessons.md").read_text() == "be careful\n"
    assert not (harness / "new.py").exists() and not (outside / "pwned").exists()
    assert sorted(p.name for p in work.iterdir()) == ["request.json", "result.txt"]  # the work dir came back
    assert (work / "result.txt").read_text() == "ok"
    assert not Path("/tmp/private").exists()


def test_fork_bomb_is_bounded_and_killed_at_the_wall_limit(box, dirs):
    start = time.monotonic()
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = box.run([sys.executable, "-c", bomb], harness_dir=dirs[0], workdir=dirs[1], env={},
                limits=Limits(pids=8, wall_seconds=3, cpu_seconds=10))
    assert r.timed_out and r.limit == "wall"
    assert time.monotonic() - start < 12
    _assert_nothing_left(box)


def test_fork_bomb_that_gives_up_reports_the_pids_limit(run_py):
    r = run_py("import os\nfor _ in range(100):\n    os.fork() or __import__('time').sleep(2)\n",
               limits=Limits(pids=8, wall_seconds=15))
    assert r.limit == "pids", r


def test_four_gigabytes_cannot_be_allocated(run_py):
    r = run_py("b = bytearray(4 * 1024**3); print('ALLOCATED')", limits=Limits(memory_mb=1024, wall_seconds=20))
    assert "ALLOCATED" not in r.stdout and "MemoryError" in r.stderr
    assert r.limit == "memory" and r.returncode != 0


def test_processes_over_the_container_memory_are_oom_killed(run_py, box):
    # each child stays under its own address-space limit; together they exceed the cgroup's 160 MiB
    r = run_py(TWO_CHILDREN_OVER_THE_MEMORY + EXIT_ON_A_KILL, limits=Limits(memory_mb=160, wall_seconds=20))
    assert "-9" in r.stdout, r  # the kernel killed one of them
    assert r.limit == "memory", r
    _assert_nothing_left(box)


def test_an_oom_kill_then_a_wall_timeout_is_recorded_as_both(run_py, box):
    # as above, then the parent waits past the wall: it was recorded as the wall limit alone, the OOM kill lost
    r = run_py(TWO_CHILDREN_OVER_THE_MEMORY + HANG, limits=Limits(memory_mb=160, wall_seconds=6))
    assert "-9" in r.stdout, r
    assert r.timed_out and r.limit == "memory", r
    assert "the memory limit was hit before it" in r.reason()
    _assert_nothing_left(box)


def test_spinning_forever_is_killed_at_the_wall_limit(run_py, box):
    start = time.monotonic()
    r = run_py("import subprocess\nsubprocess.Popen(['sleep', '600'])\nwhile True: pass",
               limits=Limits(wall_seconds=1.5))
    assert r.timed_out and r.limit == "wall" and 1.4 < r.wall_seconds < 6
    assert time.monotonic() - start < 10
    _assert_nothing_left(box)


def test_cpu_limit(run_py):
    r = run_py("while True: pass", limits=Limits(cpu_seconds=1, wall_seconds=20))
    assert r.limit == "cpu" and not r.timed_out


def test_output_is_bounded(run_py):
    r = run_py("import sys\nfor _ in range(3):\n    sys.stdout.write('x' * 2**20)\n    sys.stdout.flush()\n",
               limits=Limits(file_mb=1, wall_seconds=20))
    assert r.limit == "output", r
    assert len(r.stdout) <= 64 * 1024


def test_a_passed_unix_socket_is_reachable_and_nothing_else_of_its_directory(run_py, tmp_path):
    sock_dir = tmp_path / "gw"
    sock_dir.mkdir()
    (sock_dir / "other.txt").write_text("not for the sandbox")
    path = sock_dir / "gateway.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o666)
    server.listen(1)
    server.settimeout(10)
    got: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            got.append(conn.recv(100))
            conn.sendall(b"pong")
            conn.close()
        except TimeoutError:
            pass

    t = threading.Thread(target=serve)
    t.start()
    r = run_py("import os, socket\n"
               f"s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); s.sendall(b'ping')\n"
               "print(s.recv(100).decode())\n"
               f"print(sorted(os.listdir({str(sock_dir)!r})))\n", sockets=[path])
    t.join()
    server.close()
    assert r.returncode == 0, r.stderr
    assert got == [b"ping"] and r.stdout.split("\n")[:2] == ["pong", "['gateway.sock']"]


def test_a_path_that_is_not_a_socket_is_refused(run_py, tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(InfraError, match="not a Unix socket"):
        run_py("pass", sockets=[tmp_path / "plain"])


@pytest.mark.parametrize("pool_size", [0, 1], ids=["cold", "pool"])
def test_an_interpreter_reached_through_a_symlinked_venv_runs_by_the_path_the_host_gives_it(pool_size, dirs, tmp_path,
                                                                                           monkeypatch):
    """A worktree whose .venv links another checkout's: only the real path was mounted, so every command naming
    sys.executable as the host spells it failed ('prlimit: failed to execute ...: No such file or directory')."""
    real = Path(sys.prefix).resolve()
    link = tmp_path / "venv-link"
    link.symlink_to(real, target_is_directory=True)
    monkeypatch.setattr(sys, "prefix", str(link))
    monkeypatch.setattr(sys, "exec_prefix", str(link))
    python = link / "bin" / Path(sys.executable).name
    with DockerSandbox(pool_size=pool_size) as box:
        r = box.run([str(python), "-c", "import os, sys; print(sys.prefix); print(os.environ['PATH'])"],
                    harness_dir=dirs[0], workdir=dirs[1], env={}, limits=Limits(wall_seconds=30))
        wrote = box.run([str(python), "-c", f"open({str(link / 'pwned')!r}, 'w')"], harness_dir=dirs[0],
                        workdir=dirs[1], env={}, limits=Limits(wall_seconds=30))
    assert r.returncode == 0, r.reason()
    prefix, path = r.stdout.split("\n")[:2]
    assert prefix == str(link) and path.split(":")[0] == str(link / "bin")  # the venv's bin first, as on the host
    assert wrote.returncode != 0 and "Read-only file system" in wrote.stderr  # bound read-only, as its real path
    assert not (real / "pwned").exists()


def test_containers_of_a_killed_process_are_removed_at_the_next_check(boxes):
    import subprocess

    import docker

    from evoharness.sandbox.docker import OWNER_LABEL, labels

    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = labels("pool")[OWNER_LABEL].rpartition(":")[0] + f":{dead.pid}"
    client = docker.from_env()
    c = client.containers.run(boxes["cold"].image, detach=True, network_mode="none",
                              labels={"org.evoharness.sandbox": "pool", OWNER_LABEL: owner})
    DockerSandbox().check()
    # gone, or being removed: a check in another test process may have begun removing it first (docker answers this
    # check's removal with 409 "already in progress"), and that removal ends after this check returns
    deadline = time.monotonic() + 30
    with pytest.raises(docker.errors.NotFound):
        while time.monotonic() < deadline:
            c.reload()
            time.sleep(0.2)


def test_missing_image_names_the_build_script():
    sb = DockerSandbox(image="evoharness-sandbox:no-such-tag")
    with pytest.raises(InfraError, match="build-image.sh"):
        sb.check()


def _assert_nothing_left(box: DockerSandbox) -> None:
    """No container of a cold run survives; a pooled slot holds only its init and sleep."""
    import docker

    from evoharness.sandbox.docker import OWNER_LABEL, labels

    time.sleep(0.2)
    mine = docker.from_env().containers.list(all=True, filters={"label": f"{OWNER_LABEL}={labels('x')[OWNER_LABEL]}"})
    assert all(c.labels["org.evoharness.sandbox"] == "pool" for c in mine), mine
    for c in mine:
        procs = c.top()["Processes"]
        assert len(procs) == 2, procs  # tini and sleep infinity
