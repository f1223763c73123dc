"""A plain `serve` starts no run until there is work, and says where its harness is."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.service.helpers import Server, write_config


def test_a_fresh_service_waits_for_work_and_says_so(tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("min_new_process_failures = 0\n", ""))  # the default trigger
    server = Server(cfg).start()
    try:
        c = server.client()
        time.sleep(1.0)  # five poll intervals
        health = c.get("/health").json()
        assert health["current_run"] is None and health["auto_runs"] is True and health["worker_alive"] is True
        assert f"harness {tmp_path / 'harness'} (created now: a seed harness)" in server.output()
        assert "runs: on POST /runs, or once 1 ingested process failure(s) arrive" in server.output()
    finally:
        server.stop()


def test_a_second_service_on_the_same_home_is_refused(tmp_path):
    """Two `serve` processes on one home (different ports) both drove the home's current run: its trajectories
    were written twice and each candidate made twice (a '-2' branch beside the other's)."""
    import subprocess
    import sys

    from tests.service.helpers import TOKEN, free_port

    cfg = write_config(tmp_path)
    first = Server(cfg).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
        env["EVOHARNESS_API_TOKEN"] = TOKEN
        second = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve", "--port",
                                 str(free_port())], env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, (second.returncode, second.stderr[-3000:])
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), second.stderr[-3000:]
        assert f"pid {first.proc.pid}" in lines[0] and str(tmp_path / "home") in lines[0], lines[0]
        assert first.client().get("/health").json()["worker_alive"] is True  # the first one is untouched
    finally:
        first.stop()
    again = Server(cfg).start()  # the lock went with the first process
    again.stop()


@pytest.mark.parametrize("case", ["ingest store not a database", "harness under a file", "daemon.json not JSON",
                                  "daemon.json a list"])
def test_what_start_up_cannot_use_on_disk_is_one_error_line(tmp_path, case):
    """Start-up ran in uvicorn's lifespan: an ingest.sqlite that is not a database (a file copied over it, a cut
    backup), a run.harness that cannot be made or a service/daemon.json that is no JSON object was uvicorn's
    traceback and exit 3 (daemon.json: the service even started, with /health a 500 and the loop failing)."""
    import subprocess
    import sys

    from tests.service.helpers import TOKEN, free_port

    cfg = write_config(tmp_path)
    service = tmp_path / "home" / "service"
    service.mkdir(parents=True)
    named = {"ingest store not a database": service / "ingest.sqlite", "harness under a file": tmp_path / "file",
             "daemon.json not JSON": service / "daemon.json", "daemon.json a list": service / "daemon.json"}[case]
    named.write_text("[]" if case == "daemon.json a list" else '{"run_id": "run-1", ')
    if case == "harness under a file":
        cfg.write_text(cfg.read_text().replace(str(tmp_path / "harness"), str(tmp_path / "file" / "harness")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    env["EVOHARNESS_API_TOKEN"] = TOKEN
    done = subprocess.run([sys.executable, "-m", "evoharness", "--config", str(cfg), "serve", "--port",
                           str(free_port())], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    assert str(named) in lines[0], lines[0]


LAUNCHER = '''
import atexit, pathlib, sys, time


class SlowTeardown:  # freed by the cycle collector at exit, as the graph's ~1,750 modules are (module <-> globals)
    def __del__(self):
        time.sleep(4)


KEEP = SlowTeardown()
KEEP.cycle = KEEP
atexit.register(lambda: pathlib.Path(sys.argv[1]).write_text("atexit ran"))
from evoharness.cli import main
sys.exit(main(sys.argv[2:]))
'''


@pytest.mark.parametrize(("sig", "code", "said"), [("SIGTERM", 0, False), ("SIGINT", 130, True)])
def test_an_idle_service_ends_at_once_on_sigterm_or_sigint_without_the_interpreters_teardown(tmp_path, sig, code,
                                                                                             said):
    """`evoharness serve`, idle, took 2-3 s (load ~13; 5-6 s seen) from SIGTERM to exit: the service stopped in
    0.1 s, then the interpreter's cycle collector freed the ~1,750 modules langgraph, FastAPI and their models
    bring in. SIGINT still took 2.9 s: uvicorn raised it again once stopped, a KeyboardInterrupt out of the
    server, and the exit went through the whole teardown. Both now exit (0, 130 "interrupted") the ordinary way,
    atexit handlers run, with what existed when the service stopped left to the process's end (gc.freeze). The
    teardown stands in here as a 4 s __del__ of a global in a reference cycle."""
    import signal
    import subprocess
    import sys

    import httpx

    from tests.service.helpers import TOKEN, free_port

    cfg = write_config(tmp_path, service={"min_new_process_failures": 1})
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOHARNESS_")}
    env["EVOHARNESS_API_TOKEN"] = TOKEN
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this checkout, not the launcher's folder
    port = free_port()
    marker = tmp_path / "atexit.txt"
    proc = subprocess.Popen([sys.executable, str(launcher), str(marker), "--config", str(cfg), "serve", "--port",
                             str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        start = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        got = proc.wait(30)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = proc.stdout.read().decode(errors="replace")
    assert got == code and took < 3.5, (got, took, out[-2000:])
    assert ("interrupted" in out.splitlines()) == said and "Traceback" not in out, out[-2000:]
    assert marker.read_text() == "atexit ran"
